"""The `fetch` tool: the full text of a cached result whose preview was shown."""

from __future__ import annotations

import re
from typing import ClassVar

from normalize.errors import ToolError
from normalize.execution.cache import SaysRetention
from normalize.task import Action, ActionResult
from normalize.tools.base import ToolContext

__all__ = ["FetchTool"]

_ID_RE = re.compile(r"^[rm][1-9][0-9]*$")
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d*))?$")


def _parse(args: list[str]) -> tuple[str, tuple[int, int | None] | None]:
    """`ID`, `ID START-END`, or `ID:START-END`; END may be left open (`100-`)."""
    if not args or len(args) > 2:
        raise ToolError("usage: fetch ID [START-END] (e.g. `fetch r7` or `fetch r7 40-80`)")
    cache_id, _, joined = args[0].partition(":")
    cache_id = cache_id.lower()
    span = args[1] if len(args) == 2 else joined
    if not _ID_RE.match(cache_id):
        raise ToolError(f"not a cached result id: {args[0]!r} (ids look like r7)")
    if not span:
        return cache_id, None
    match = _RANGE_RE.match(span)
    if match is None:
        raise ToolError(f"not a line range: {span!r} (use START-END, e.g. 40-80)")
    start = int(match.group(1))
    end_text = match.group(2)
    end = start if end_text is None else (int(end_text) if end_text else None)
    if start < 1 or (end is not None and end < start):
        raise ToolError(f"not a line range: {span!r} (lines count from 1, START ≤ END)")
    return cache_id, (start, end)


class FetchTool:
    """`fetch ID [START-END]`: a cached result in full, or a range of its lines."""

    name: ClassVar[str] = "fetch"
    read_only: ClassVar[bool] = True
    summary: ClassVar[str] = "the full text of a cached result whose preview was shown"
    previewed: ClassVar[bool] = False
    """The registry must not cut this output down to a preview again."""
    asked: ClassVar[bool] = True
    """The reader asked for this text: the prompt shows it whole up to the result bound."""

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        cache_id, span = _parse(action.args)
        text = ctx.retrieve(cache_id)
        if text is None:
            retention = ctx.cache.retention if isinstance(ctx.cache, SaysRetention) else ""
            why = f" ({retention})" if retention else ""
            raise ToolError(f"no cached result {cache_id}{why}")
        lines = text.splitlines()
        data: dict[str, object] = {"cache_id": cache_id, "lines": len(lines)}
        if span is None:
            return ActionResult.success(text, data=data)
        start, end = span
        if start > len(lines):
            raise ToolError(f"{cache_id} has only {len(lines)} lines")
        end = len(lines) if end is None else min(end, len(lines))
        data.update(start=start, end=end)
        return ActionResult.success("\n".join(lines[start - 1 : end]), data=data)
