"""The tool protocol, the context a tool runs in, and the registry that runs them.

A tool is the hands on the codebase. It declares whether it is read-only (safe
to run again after a crash) or side-effecting, parses its own arguments from
`action.args` / `action.body`, and returns an `ActionResult`. Tools never
print and never emit events: the engine does.

Output is sized by intent: a tool whose output the reader explicitly asked
for (`asked = True`: `view`, `fetch`) comes back whole up to the cache's
asked-for bound; any other long output becomes an error-first preview and an
id. A tool with `previewed = False` bounds its own output.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

from normalize.cancel import CancelToken
from normalize.errors import NormalizeError, ToolError, WorkspaceError
from normalize.execution.cache import DEFAULT_ASKED_CHARS, DEFAULT_ASKED_LINES, SizedByIntent
from normalize.sandbox import SandboxPolicy
from normalize.task import Action, ActionResult

if TYPE_CHECKING:
    from normalize.events import Emit, Event
    from normalize.execution.cache import CacheSet, ResultCache
    from normalize.mcp.client import McpSessions
    from normalize.subtasks.children import Spawner
    from normalize.tools.approval import ApprovalPolicy
    from normalize.tools.guard import WorkspaceGuard


@runtime_checkable
class Tool(Protocol):
    """What every tool provides."""

    name: ClassVar[str]
    read_only: ClassVar[bool]
    summary: ClassVar[str]

    def run(self, action: Action, ctx: ToolContext) -> ActionResult: ...


@runtime_checkable
class Previews(Protocol):
    """A side-effecting tool that can say what an action would change, changing nothing.

    The approval policy shows it (a diff) to the person before asking; a
    `ToolError` means the action would fail, and says why.
    """

    def preview(self, action: Action, ctx: ToolContext) -> str: ...


@runtime_checkable
class Concurrent(Protocol):
    """A side-effecting tool whose consecutive actions in a decision run together (when true;
    default: they run one after the other)."""

    concurrent: ClassVar[bool]


@runtime_checkable
class Reattaches(Protocol):
    """A side-effecting tool safe to run again after a crash: it finds its own earlier work.

    When true, resume runs a started, never finished action of it again instead
    of reporting its outcome as unknown (`spawn`: the same child, re-attached).
    Default: the outcome is unknown.
    """

    reattaches: ClassVar[bool]


@runtime_checkable
class Previewed(Protocol):
    """A tool that says whether the registry cuts its long output to a preview (default: yes).

    False: the tool bounds its own output (`fetch` gives back what it kept,
    `spawn` a child's summary), and the registry leaves it as it is.
    """

    previewed: ClassVar[bool]


@runtime_checkable
class AskedFor(Protocol):
    """A tool whose output the reader explicitly asked to read (when true; default: no).

    Its output comes back whole up to the cache's asked-for bound (`view`,
    `fetch`) instead of as the short preview incidental output gets.
    """

    asked: ClassVar[bool]


def runs_together(tool: Tool | None) -> bool:
    """Whether `tool` declares that its consecutive actions run together."""
    return bool(getattr(tool, "concurrent", False))  # `Concurrent`, without its slow isinstance


def reattaches(tool: Tool | None) -> bool:
    """Whether `tool` declares that a cut-short action of it may simply run again."""
    return bool(getattr(tool, "reattaches", False))  # `Reattaches`


def previewed(tool: Tool) -> bool:
    """Whether the registry cuts `tool`'s long output to a preview."""
    return bool(getattr(tool, "previewed", True))  # `Previewed`


def asked_for(tool: Tool) -> bool:
    """Whether `tool`'s output is what the reader asked to read (shown whole, within bounds)."""
    return bool(getattr(tool, "asked", False))  # `AskedFor`


Approver = Callable[[str], str]
"""Asks a person a yes/no/always question; returns "yes", "no" or "always". The question
may be an `approval.Question`, whose `detail` shows what the action would change."""


@dataclass
class ToolContext:
    """Everything a tool may use: the workspace, its guard, the cache, the policy."""

    workspace: Path
    guard: WorkspaceGuard
    cache: ResultCache
    policy: ApprovalPolicy
    cancel: CancelToken = field(default_factory=CancelToken)
    timeout: float = 600.0
    approver: Approver | None = None
    asker: Callable[[str], str | None] | None = None
    task_id: str = ""
    caches: CacheSet | None = None  # scoped caches (a workflow scope's `cache`), with `cache`
    on_spawn: Callable[[int], None] | None = None  # told each child process's pid
    on_writes: Callable[[set[str]], None] | None = None  # told the paths a program wrote
    sandbox: SandboxPolicy = field(default_factory=SandboxPolicy)  # what programs may touch
    mcp: McpSessions | None = None  # the run's MCP servers (started on first use)
    children: Spawner | None = None  # starts sub-tasks (`spawn`)
    on_child: Callable[[Event], None] | None = None  # journals a child's creation/outcome
    on_progress: Callable[[list[str], dict[str, int]], None] | None = None
    """Told a running program's last lines and a test run's counts so far (the live view)."""
    emit: Emit | None = None  # streams a harness's events (text, its tool calls) as they come
    state_dir: Path | None = None  # the task's own directory outside normalize's hidden data
    recall: Callable[[str], str] | None = None  # the run's memory for an input (a harness's)

    def cache_for(self, action: Action) -> ResultCache:
        """The cache an action's result goes to: its scope's, or the task's default."""
        table = action.params.get("cache")
        if self.caches is None or not isinstance(table, dict):
            return self.cache
        return self.caches.for_table(table)

    def retrieve(self, cache_id: str) -> str | None:
        """The text behind a cache id, whichever of the task's caches gave it out."""
        return self.caches.retrieve(cache_id) if self.caches else self.cache.retrieve(cache_id)


class ToolRegistry:
    """Name → tool. Runs an action with the guard, the approval policy and the cache."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._later: dict[str, Callable[[], Tool]] = {}  # made (imported) when first used
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        self._later.pop(tool.name, None)
        self._tools[tool.name] = tool

    def register_later(self, name: str, make: Callable[[], Tool]) -> None:
        """Register the tool `make` returns, made when it is first asked for (a run that
        never greps never imports grep)."""
        if name not in self._tools:
            self._later[name] = make

    def get(self, name: str) -> Tool | None:
        tool = self._tools.get(name)
        if tool is None and name in self._later:
            tool = self._tools[name] = self._later.pop(name)()
        return tool

    def names(self) -> list[str]:
        return sorted({*self._tools, *self._later})

    def __contains__(self, name: object) -> bool:
        return name in self._tools or name in self._later

    def is_read_only(self, action: Action) -> bool:
        tool = self.get(action.tool)
        return bool(tool and tool.read_only)

    def runs_together(self, action: Action) -> bool:
        """Whether a side-effecting tool's actions run together with their neighbours (`spawn`)."""
        return runs_together(self.get(action.tool))

    def reattaches(self, action: Action) -> bool:
        """Whether a side effect a crash cut short may simply run again (it finds its work)."""
        return reattaches(self.get(action.tool))

    def execute(self, action: Action, ctx: ToolContext, *, approved: bool = False) -> ActionResult:
        """Run `action`: never raises for a tool's own failure, returns an error result.

        `approved` skips the approval policy (a person approved this very action).
        """
        tool = self.get(action.tool)
        started = time.perf_counter()
        if tool is None:
            return ActionResult.failure(f"unknown tool {action.tool!r}")
        try:
            if not tool.read_only and not approved:
                detail = partial(tool.preview, action, ctx) if isinstance(tool, Previews) \
                    else None
                verdict = ctx.policy.check(action, ctx, detail=detail)
                if verdict is not None:
                    verdict.duration = time.perf_counter() - started
                    return verdict
            result = tool.run(action, ctx)
        except WorkspaceError as exc:
            result = ActionResult.blocked(str(exc))
        except ToolError as exc:
            result = ActionResult.failure(str(exc))
        except NormalizeError as exc:
            result = ActionResult.failure(str(exc))
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            result = ActionResult.failure(f"{exc.strerror or exc}{where}")
        result.duration = result.duration or (time.perf_counter() - started)
        if previewed(tool) and (result.ok or result.output):
            preview, cache_id = shape_output(ctx.cache_for(action), result.output,
                                             asked=asked_for(tool))
            if cache_id is not None or preview != result.output:
                result.preview, result.cache_id = preview, cache_id
        return result


def shape_output(cache: ResultCache, output: str, *, asked: bool) -> tuple[str, str | None]:
    """What a reader sees of `output`: whole when asked for and within the bound, else a preview.

    A cache that does not size by intent (a third-party one) previews everything alike.
    """
    if asked and isinstance(cache, SizedByIntent):
        return cache.preview_asked(output)
    return cache.preview(output)


def asked_bound(cache: ResultCache) -> tuple[int, int]:
    """(lines, characters) up to which `cache` shows an asked-for result whole."""
    if isinstance(cache, SizedByIntent):
        return cache.asked_bound
    return DEFAULT_ASKED_LINES, DEFAULT_ASKED_CHARS
