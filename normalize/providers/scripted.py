"""The scripted provider: a strict model for tests and for users' CI (`--model scripted:FILE`).

Each call consumes the next step of the script: a reply string, a callable
that builds the reply from the request, or an exception to raise. A call past
the end fails loudly (`ScriptExhaustedError`), and `assert_done` fails when
steps are left over, so a test notices both a model called too often and a
model called too rarely. Usage is estimated as in `providers.synthetic`.
Tests import it as `normalize.testing.ScriptedModel`.
"""

from __future__ import annotations

import json
import threading
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from normalize.cancel import CancelToken
from normalize.errors import ConfigError, ProviderError
from normalize.faults import crash_point
from normalize.providers.base import ModelEvent, ModelRequest, TurnCancelledError, one_line
from normalize.providers.synthetic import PromptCache, synthetic_turn

ScriptedTurn = str | Callable[[ModelRequest], str] | BaseException


class ScriptExhaustedError(ProviderError, AssertionError):
    """The scripted model was called more often than its script allows."""


class ScriptedModel:
    """A ModelClient that plays a fixed script and records every request."""

    name = "scripted"

    def __init__(self, steps: Iterable[ScriptedTurn] = (), *, model: str = "scripted") -> None:
        self.model = model
        self.source = ""  # the file the script came from, if any
        self.steps: list[ScriptedTurn] = list(steps)
        self.requests: list[ModelRequest] = []
        self._next = 0
        self._lock = threading.Lock()
        self._cache = PromptCache()

    def __repr__(self) -> str:
        return f"ScriptedModel(model={self.model!r}, steps={len(self.steps)}, used={self._next})"

    def add(self, *steps: ScriptedTurn) -> None:
        """Append steps to the script."""
        with self._lock:
            self.steps.extend(steps)

    @property
    def remaining(self) -> int:
        """Steps not yet played."""
        return len(self.steps) - self._next

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        """Record `request`, then play the next step as a streamed turn."""
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        with self._lock:
            self.requests.append(request)
            index = self._next
            if index >= len(self.steps):
                # a file's script (the CLI's) says where to add; a test's, what it was asked
                more = (f": add replies in {self.source} for what the task asks next"
                        if self.source else f"; last message: {request.last_message!r}")
                raise ScriptExhaustedError(
                    one_line(
                        f"scripted model {self.model!r} got call {index + 1} but its script has "
                        f"{len(self.steps)} step(s){more}",
                        500,
                    )
                )
            self._next += 1
        step = self.steps[index]
        if isinstance(step, BaseException):
            raise step
        text = step if isinstance(step, str) else step(request)
        for number, event in enumerate(
                synthetic_turn(text, self._cache.usage(request, text), model=self.model)):
            if number == 1:
                crash_point("model_stream")  # fault injection: die with the reply half streamed
            yield event

    def assert_done(self) -> None:
        """Fail (AssertionError) when script steps were never played."""
        left = self.remaining
        if left:
            preview = ", ".join(_describe(s) for s in self.steps[self._next : self._next + 3])
            raise AssertionError(
                f"scripted model {self.model!r} has {left} unplayed step(s) of "
                f"{len(self.steps)}: {preview}"
            )

    @classmethod
    def from_file(cls, path: str | Path, *, model: str | None = None) -> ScriptedModel:
        """Load a script from JSON (a list, or {"replies": [...]}) or TOML (replies = [...])."""
        path = Path(path)
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as err:
            raise ConfigError(f"cannot read script: {err.strerror or err}", file=str(path)) from err
        try:
            data: Any = tomllib.loads(raw) if path.suffix == ".toml" else json.loads(raw)
        except (ValueError, tomllib.TOMLDecodeError) as err:
            raise ConfigError(f"cannot parse script: {err}", file=str(path)) from err
        if isinstance(data, dict):
            data = data.get("replies")
        if not isinstance(data, list):
            raise ConfigError(
                "a script is a list of replies (or a table with `replies`)", file=str(path)
            )
        steps = [_step_from_data(item, path, n) for n, item in enumerate(data, 1)]
        scripted = cls(steps, model=model or path.stem)
        scripted.source = str(path)
        return scripted


def _step_from_data(item: Any, path: Path, number: int) -> ScriptedTurn:
    """A reply string, or `{"text": ...}`, or `{"error": ..., "retryable": bool}`."""
    if isinstance(item, str):
        return item
    if isinstance(item, dict):
        if isinstance(item.get("text"), str):
            return str(item["text"])
        if isinstance(item.get("error"), str):
            return ProviderError(str(item["error"]), retryable=bool(item.get("retryable")))
    raise ConfigError(
        f"reply {number} must be a string, {{text = ...}} or {{error = ...}}", file=str(path)
    )


def _describe(step: ScriptedTurn) -> str:
    if isinstance(step, str):
        return repr(step if len(step) <= 40 else step[:39] + "…")
    if isinstance(step, BaseException):
        return f"raise {type(step).__name__}"
    return f"<{getattr(step, '__name__', 'callable')}>"


def create(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ScriptedModel:
    """Provider factory for `scripted:FILE`; `skip=N` starts after the first N replies (resume)."""
    del base_url, env
    skip = int(opts.pop("skip", 0))
    scripted = ScriptedModel.from_file(model, **opts)
    scripted._next = min(max(skip, 0), len(scripted.steps))
    return scripted
