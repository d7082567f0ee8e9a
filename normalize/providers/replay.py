"""Replay a recorded task: the model's replies, in order, from the task journal."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from normalize.cancel import CancelToken
from normalize.errors import CorruptTaskError, ProviderError, UsageError
from normalize.providers.base import ModelEvent, ModelRequest, TurnCancelledError, one_line
from normalize.providers.synthetic import PromptCache, synthetic_turn

REPLY_EVENT = "model_replied"
"""The journal event type whose `text` field holds one model reply."""


class ReplayExhaustedError(ProviderError):
    """The replay was asked for more replies than were recorded."""


class ReplayModel:
    """A ModelClient that answers with recorded replies, in order, and fails past the end."""

    name = "replay"

    def __init__(self, replies: Sequence[str], *, model: str = "replay", source: str = "") -> None:
        self.model = model
        self.replies = list(replies)
        self.source = source
        self.requests: list[ModelRequest] = []
        self._next = 0
        self._lock = threading.Lock()
        self._cache = PromptCache()

    @classmethod
    def from_journal(cls, path: str | Path, *, model: str = "replay") -> ReplayModel:
        """Read the `text` of every `model_replied` line of a JSONL journal."""
        path = Path(path)
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as err:
            raise UsageError(f"cannot read journal {path}: {err.strerror or err}") from err
        replies: list[str] = []
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError as err:
                if number == len(lines):
                    break  # a torn last line: the write it belongs to never finished
                raise CorruptTaskError(f"{path}:{number}: not a JSON event") from err
            if isinstance(event, dict) and event.get("type") == REPLY_EVENT:
                replies.append(str(event.get("text", "")))
        return cls(replies, model=model, source=str(path))

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    def stream(
        self, request: ModelRequest, cancel: CancelToken | None = None
    ) -> Iterator[ModelEvent]:
        """Yield the next recorded reply as a turn."""
        if cancel is not None and cancel.cancelled:
            raise TurnCancelledError()
        with self._lock:
            self.requests.append(request)
            index = self._next
            if index >= len(self.replies):
                where = f" from {self.source}" if self.source else ""
                raise ReplayExhaustedError(
                    one_line(
                        f"replay{where} has no reply left: all {len(self.replies)} recorded "
                        f"replies are used (last message: {request.last_message!r})"
                    ),
                    hint="continue the task with `normalize resume ID --driver user`",
                )
            self._next += 1
        text = self.replies[index]
        yield from synthetic_turn(text, self._cache.usage(request, text), model=self.model)


def create(
    model: str,
    *,
    base_url: str | None = None,
    env: Mapping[str, str] | None = None,
    **opts: Any,
) -> ReplayModel:
    """Provider factory for `replay:TASKID` (or `replay:PATH` to a journal).

    The task store is not known here: a caller resolves the id with
    `journal=PATH` or `resolve_journal=callable(task_id) -> PATH`.
    """
    del base_url, env
    journal = opts.pop("journal", None)
    resolve = opts.pop("resolve_journal", None)
    if journal is None and resolve is not None:
        journal = resolve(model)
    if journal is None and Path(model).is_file():
        journal = model
    if journal is None:
        raise UsageError(f"cannot find the journal of task {model!r} to replay")
    return ReplayModel.from_journal(journal, model=f"replay-{Path(str(model)).name}")
