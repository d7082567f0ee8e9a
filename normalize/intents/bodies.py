"""Command bodies: heredocs (`<<TAG` … `TAG`) and fenced blocks, and where each one ends.

Every rule about reading a body, and what happens when it never closes, is here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEREDOC_RE = re.compile(
    r"(?<!<)<<(-?)[ \t]*(?:'([A-Za-z_]\w*)'|\"([A-Za-z_]\w*)\"|([A-Za-z_]\w*))[ \t]*\Z"
)
PROSE_HEREDOC_RE = re.compile(r"(?<!<)<<(-?)(['\"]?)([A-Z][A-Z0-9_]*)\2\Z")
"""A heredoc opened on a prose line: its body is prose too, up to the tag."""
FENCE_RE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([^`\s]*)[^`]*\Z")

REJECTED = "rejected"
"""The `params` key of an action the parser rejected (its body never closed): why."""
NOT_RUN = "; this command and the rest of the reply did not run"

Heredoc = tuple[bool, str]
"""(strip leading tabs?, TAG) of a `<<TAG` or `<<-TAG`."""


def cut_heredoc(rest: str) -> tuple[str, Heredoc | None]:
    """`rest` without a trailing `<<TAG`, and the heredoc when there was one."""
    h = HEREDOC_RE.search(rest)
    if h is None:
        return rest, None
    return rest[: h.start()].rstrip(), (h.group(1) == "-", h.group(2) or h.group(3) or h.group(4))


def fence_closes(line: str, marker: str) -> bool:
    s = line.strip()
    return len(s) >= len(marker) and s == s[0] * len(s) and s[0] == marker[0]


def unwrap_fence(lines: list[str]) -> list[str]:
    """A heredoc body that is one whole fenced block, without its fence lines."""
    if len(lines) >= 2:
        m = FENCE_RE.fullmatch(lines[0])
        if m and fence_closes(lines[-1], m.group(1)):
            return lines[1:-1]
    return lines


def join_body(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def find_fence_end(lines: list[str], start: int, marker: str) -> int:
    """Index of the line closing a fence opened with `marker`, or len(lines)."""
    for k in range(start, len(lines)):
        if fence_closes(lines[k], marker):
            return k
    return len(lines)


def find_terminator(lines: list[str], start: int, tag: str, fence: str | None) -> int:
    """Index of the heredoc's `tag` line; at the enclosing `fence`'s end or len(lines)."""
    for k in range(start, len(lines)):
        if lines[k].strip() == tag:
            return k
        if fence is not None and fence_closes(lines[k], fence):
            return k
    return len(lines)


@dataclass
class Body:
    """A command's body as read: its text (None: no body), the lines it took, the next line.

    `unclosed` says why the body is not there: its heredoc or fence never closed
    (see `read_body`).
    """

    text: str | None
    lines: list[str]
    next: int
    unclosed: str | None = None


def read_body(lines: list[str], i: int, heredoc: Heredoc | None, takes_body: bool,
              fence: str | None) -> Body:
    """The body of the command on line `i`: a heredoc, or (for verbs that take one) a fence.

    `fence` is the marker of an enclosing shell fence, if the command is in one.
    A body that never closes (no line `TAG`; no closing fence) is no body: the
    reply was cut short or mistyped, so the command is rejected (`unclosed`)
    and the lines it would have taken are consumed, so nothing after it runs.
    A heredoc inside a shell fence that ends before its `TAG` line is unclosed too.
    """
    if heredoc is not None:
        dash, tag = heredoc
        end = find_terminator(lines, i + 1, tag, fence)
        if end < len(lines) and lines[end].strip() == tag:
            raw = lines[i + 1 : end]
            if dash:
                raw = [ln.lstrip("\t") for ln in raw]
            return Body(join_body(unwrap_fence(raw)), lines[i + 1 : end + 1], end + 1)
        return Body(None, [], end,
                    f"the heredoc <<{'-' if dash else ''}{tag} is never closed (no line `{tag}`)")
    if takes_body and i + 1 < len(lines) and fence is None:
        m = FENCE_RE.fullmatch(lines[i + 1].rstrip())
        if m is not None:
            marker = m.group(1)
            end = find_fence_end(lines, i + 2, marker)
            if end < len(lines):
                return Body(join_body(lines[i + 2 : end]), lines[i + 1 : end + 1], end + 1)
            return Body(None, [], end,
                        f"the fenced body is never closed (no closing {marker} line)")
    return Body(None, [], i + 1)
