"""Turns made up locally (scripted and replayed models): deltas, usage, completion.

Token counts are estimated at one token per four characters (rounded up),
which is close to real tokenizers on English and code. Input counts the
system prompt and every message; when `cache_system` is on, the system prompt
is counted as a cache write the first time a client sees it and as a cache
read afterwards, as with Anthropic prompt caching, so benchmarks comparing
context strategies see realistic numbers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

from normalize.providers.base import (
    Completed,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ThinkingDelta,
    UsageReport,
)


def estimate_tokens(text: str) -> int:
    """Tokens in `text`, estimated as ceil(len / 4)."""
    return (len(text) + 3) // 4


def split_text(text: str, pieces: int = 4) -> list[str]:
    """Split `text` at spaces into about `pieces` deltas that join back to `text`."""
    words = text.split(" ")
    size = max(1, -(-len(words) // pieces))
    groups = [" ".join(words[i : i + size]) for i in range(0, len(words), size)]
    chunks = [g + " " for g in groups[:-1]] + groups[-1:]
    return [c for c in chunks if c]


class PromptCache:
    """Which system prompts a client has already sent (for cache read/write counts)."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def usage(self, request: ModelRequest, reply: str) -> UsageReport:
        """Estimated usage of `request` answered with `reply`."""
        messages = sum(estimate_tokens(str(m.get("content", ""))) for m in request.messages)
        system = estimate_tokens(request.system)
        output = max(1, estimate_tokens(reply))
        if not request.cache_system or not request.system:
            return UsageReport(input_tokens=system + messages, output_tokens=output)
        with self._lock:
            seen = request.system in self._seen
            self._seen.add(request.system)
        return UsageReport(
            input_tokens=messages,
            output_tokens=output,
            cache_read_tokens=system if seen else 0,
            cache_write_tokens=0 if seen else system,
        )


def synthetic_turn(
    text: str,
    usage: UsageReport,
    *,
    thinking: str = "",
    stop_reason: str = "end_turn",
    model: str = "",
) -> Iterator[ModelEvent]:
    """Yield a turn's events for a reply known in advance."""
    for piece in split_text(thinking):
        yield ThinkingDelta(piece)
    for piece in split_text(text):
        yield TextDelta(piece)
    yield usage
    yield Completed(text=text, thinking=thinking, stop_reason=stop_reason, usage=usage, model=model)
