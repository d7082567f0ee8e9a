"""The model boundary: ModelClient, streamed events, retries, prices and providers.

Importing this package loads neither the anthropic SDK nor httpx; each
provider imports its HTTP stack the first time it sends a request.
"""

from __future__ import annotations

from normalize.providers.base import (
    MAX_RETRY_AFTER,
    MODEL_RETRY,
    Completed,
    IncompleteStreamError,
    ModelClient,
    ModelEvent,
    ModelRequest,
    ProviderStatusError,
    TextDelta,
    ThinkingDelta,
    TurnCancelledError,
    UsageReport,
    close_client,
    complete,
    parse_retry_after,
)
from normalize.providers.pricing import (
    DEFAULT_PRICES,
    CostEstimate,
    Price,
    PriceTable,
    cost,
    is_priced,
)
from normalize.providers.registry import (
    PROVIDERS,
    ProviderFactory,
    create_client,
    parse_spec,
    register_provider,
)

__all__ = [
    "DEFAULT_PRICES",
    "MAX_RETRY_AFTER",
    "MODEL_RETRY",
    "PROVIDERS",
    "Completed",
    "CostEstimate",
    "IncompleteStreamError",
    "ModelClient",
    "ModelEvent",
    "ModelRequest",
    "Price",
    "PriceTable",
    "ProviderFactory",
    "ProviderStatusError",
    "TextDelta",
    "ThinkingDelta",
    "TurnCancelledError",
    "UsageReport",
    "close_client",
    "complete",
    "cost",
    "create_client",
    "is_priced",
    "parse_retry_after",
    "parse_spec",
    "register_provider",
]
