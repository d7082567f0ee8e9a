"""A model server on this machine that is not running, named before a task exists."""

from __future__ import annotations

from typing import TYPE_CHECKING

from normalize.errors import MissingKeyError

if TYPE_CHECKING:
    from normalize.providers.base import ModelClient
    from normalize.tables import LLMTable


def local_server_down(llm: LLMTable) -> None:
    """Raise ServerDownError when a workflow's model server is on this machine and not
    running (a model named by provider and key is checked when it is first called)."""
    from normalize.drivers.models import LLMSettings
    from normalize.providers.base import close_client
    from normalize.providers.registry import create_client

    settings = LLMSettings.of(llm)
    if settings.spec.startswith(("replay:", "scripted:")):
        return
    try:
        client = create_client(settings.spec, base_url=settings.base_url)
    except MissingKeyError:
        return  # the run says it, as it always has
    try:
        check_server(client)
    finally:
        close_client(client)


def check_server(client: ModelClient) -> None:
    """Raise ServerDownError when the client's server is on this machine and not running."""
    from normalize.providers.openai_compat import OpenAICompatClient

    if isinstance(client, OpenAICompatClient):
        client.check_server()
