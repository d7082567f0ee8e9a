"""Fixtures for the CLI tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from cli_helpers import Clock, make_console
from rich.console import Console

from normalize.cli.render import LiveRenderer
from normalize.events import Emitter


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def live_factory(clock: Clock) -> Callable[..., tuple[LiveRenderer, Console, Emitter]]:
    """A LiveRenderer (no ticker: refresh by hand) fed by a real Emitter."""

    def make(*, terminal: bool = False) -> tuple[LiveRenderer, Console, Emitter]:
        console = make_console(terminal=terminal)
        renderer = LiveRenderer(console, auto_refresh=False, clock=clock)
        emitter = Emitter("abc12345")
        emitter.subscribe(renderer)
        return renderer, console, emitter

    return make
