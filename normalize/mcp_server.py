"""`normalize mcp`: normalize's code tools and tasks, served to other agents over MCP (stdio).

Read-only tools (annotated `readOnlyHint`): `view`, `skeleton`, `grep` under the
workspace guard, and the task tools `list_tasks`, `show_task`, `task_events`.
With `allow_run` two side-effecting tools join them: `start_workflow` starts a
workflow by name as a task (it runs in the background; follow it with
`task_events`) and `answer_task` answers a waiting task and resumes it. What a
task's programs may touch is the usual sandbox and approval policy (`auto`,
non-interactive: nothing is approved for want of a person).

The server is scoped to its workspace: it lists, shows, answers and starts
only the tasks whose recorded workspace is the one it serves (real paths
compared). A workflow file named by path is another agent's choice, not the
person's: it counts as an untrusted workspace file (its permissions only
narrow) and must lie inside the workspace. An answer may approve only what any
answerer may (`persons_call` in `normalize.tools.approval`): leaving the
sandbox, destroying work or calling another server's tool stays the person's,
unless the server was started with `allow_approve_all`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.cancel import CancelToken
from normalize.task import Action, ResultStatus, Task

if TYPE_CHECKING:
    from normalize.store import TaskStore

__all__ = ["ServeOptions", "build_server", "serve"]

DISCONNECT_GRACE = 5.0
INSTRUCTIONS = (
    "normalize's code tools (view, skeleton, grep) read the workspace {root}; paths are "
    "relative to it and may not leave it. The task tools list and follow normalize tasks.")


@dataclass
class ServeOptions:
    """What `normalize mcp` was started with."""

    workspace: Path
    allow_run: bool = False
    allow_approve_all: bool = False  # answers may approve what needs the person
    cancel: CancelToken = field(default_factory=CancelToken)
    runs: list[threading.Thread] = field(default_factory=list)


class _Refused(Exception):
    """A tool's own failure, shown to the client as an error result."""


class _Scope:
    """The tasks of one workspace: the only ones the server lists, shows, answers or starts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real = os.path.realpath(root)
        self._seen: dict[str, bool] = {}

    def store(self) -> TaskStore:
        from normalize.redact import Redactor
        from normalize.store import TaskStore

        return TaskStore(redact=Redactor.for_workspace(self.root))

    def owns(self, workspace: Any) -> bool:
        """Whether a task recorded in `workspace` belongs here (real paths compared)."""
        if not isinstance(workspace, str) or not workspace:
            return False
        if workspace not in self._seen:
            self._seen[workspace] = os.path.realpath(workspace) == self.real
        return self._seen[workspace]

    def ids(self, tasks: TaskStore) -> list[str]:
        """This workspace's task ids, most recently updated first."""
        rows, _ = tasks.summaries()
        mine = [row for row in rows if self.owns(row.get("workspace"))]
        mine.sort(key=lambda row: row.get("updated_at") or 0.0, reverse=True)
        return [str(row["id"]) for row in mine]

    def resolve(self, tasks: TaskStore, ref: str) -> str:
        """The id `ref` means among this workspace's tasks (an id, a unique prefix, `last`)."""
        from normalize.errors import TaskNotFoundError

        ids = self.ids(tasks)
        if ref == "last" and ids:
            return ids[0]
        matches = [ref] if ref in ids else [i for i in ids if ref and i.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if matches:
            raise TaskNotFoundError(f"{ref!r} is ambiguous: it matches {', '.join(matches[:5])}")
        raise TaskNotFoundError(f"no task {ref!r} in this workspace ({self.root})")

    def load(self, ref: str) -> Task:
        """This workspace's task `ref` (its state, not its config), checked against its record."""
        from normalize.errors import TaskNotFoundError

        tasks = self.store()
        task = tasks.load(self.resolve(tasks, ref), with_config=False)
        if not self.owns(task.workspace):  # the index said so; the record disagrees
            raise TaskNotFoundError(f"no task {ref!r} in this workspace ({self.root})")
        return task


def _code_tool(options: ServeOptions) -> Callable[[str, list[str]], str]:
    """Run one read-only code tool (view, skeleton, grep) under the workspace guard."""
    from normalize.execution.cache import NoCache
    from normalize.homes import config_home, data_home
    from normalize.tools import default_tools
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy
    from normalize.tools.base import ToolContext
    from normalize.tools.guard import WorkspaceGuard

    root = options.workspace.resolve()
    registry = default_tools()
    ctx = ToolContext(workspace=root,
                      guard=WorkspaceGuard(root, protected=[data_home(), config_home()]),
                      cache=NoCache(preview_lines=10**9, preview_chars=10**9),
                      policy=ApprovalPolicy(mode=ApprovalMode.NEVER))

    def run(verb: str, args: list[str]) -> str:
        text = " ".join([verb, *args])
        result = registry.execute(Action(verb, {"args": args, "body": None}, text=text), ctx)
        if result.status is not ResultStatus.SUCCESS:
            raise _Refused(result.error or result.status.value)
        return result.output

    return run


def _task_summary(task: Task) -> dict[str, Any]:
    out: dict[str, Any] = {"id": task.id, "status": task.status.value, "goal": task.goal,
                           "driver": task.driver, "workspace": task.workspace,
                           "turn": task.turn, "actions_run": task.actions_run,
                           "updated_at": task.updated_at}
    if task.summary:
        out["summary"] = task.summary
    if task.error:
        out["error"] = task.error
    if task.pending is not None:
        out["waiting_for"] = {"kind": task.pending.kind, "question": task.pending.question}
    return out


def build_server(options: ServeOptions) -> Any:
    """The `MCPServer` with normalize's tools registered (side effects only with allow_run)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp_types import ToolAnnotations

    from normalize.errors import NormalizeError

    root = options.workspace.resolve()
    scope = _Scope(root)
    server: MCPServer[Any] = MCPServer("normalize", instructions=INSTRUCTIONS.format(root=root),
                                         log_level="WARNING")
    code = _code_tool(options)
    read = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
    acts = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)

    def guarded(verb: str, args: list[str]) -> str:
        try:
            return code(verb, args)
        except (_Refused, NormalizeError) as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=read)
    def view(target: str) -> str:
        """A file with line numbers (PATH, PATH:START-END, PATH/SYMBOL) or a directory tree."""
        return guarded("view", [target])

    @server.tool(annotations=read)
    def skeleton(path: str) -> str:
        """The signatures of a file's classes and functions, with line numbers."""
        return guarded("skeleton", [path])

    @server.tool(annotations=read)
    def grep(pattern: str, path: str = "") -> str:
        """Regex search in the workspace (`path:line: text`), respecting .gitignore."""
        return guarded("grep", [pattern, *([path] if path else [])])

    def load(ref: str) -> Task:
        try:
            return scope.load(ref)
        except NormalizeError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=read)
    def list_tasks(limit: int = 20) -> str:
        """This workspace's tasks, newest first: id, status, goal (JSON lines)."""
        return "\n".join(json.dumps(_task_summary(t)) for t in _listed(scope, limit)) \
            or "(no tasks)"

    @server.tool(annotations=read)
    def show_task(task: str) -> str:
        """One task (an id, a unique prefix or `last`): status, goal, what it waits for."""
        return json.dumps(_task_summary(load(task)), indent=2)

    @server.tool(annotations=read)
    def task_events(task: str, since: int = 0, limit: int = 200) -> str:
        """A task's journal events with a sequence number above `since` (JSON lines)."""
        found = load(task)
        events = [e for e in scope.store().events(found.id) if int(e.get("seq", 0)) > since]
        return "\n".join(json.dumps(e) for e in events[:limit]) or "(no events)"

    if options.allow_run:
        @server.tool(annotations=acts)
        def start_workflow(workflow: str, goal: str = "",
                           variables: dict[str, str] | None = None) -> str:
            """Start a workflow by name (or a path in the workspace) as a task; returns its id."""
            return _start(options, workflow, goal, variables or {})

        @server.tool(annotations=acts)
        def answer_task(task: str, answer: str) -> str:
            """Answer a task waiting for input (`yes`/`no` for an approval) and resume it."""
            try:
                return _answer(options, load(task), answer)
            except NormalizeError as exc:
                raise ToolError(str(exc)) from None

    return server


def _listed(scope: _Scope, limit: int) -> list[Task]:
    """Up to `limit` of the workspace's tasks, newest first (unreadable ones left out)."""
    from normalize.errors import NormalizeError

    tasks = scope.store()
    out: list[Task] = []
    for task_id in scope.ids(tasks):
        if len(out) >= max(0, limit):
            break
        try:
            task = tasks.load(task_id, with_config=False)
        except NormalizeError:
            continue
        if scope.owns(task.workspace):
            out.append(task)
    return out


def _background(options: ServeOptions, task: Task, **kwargs: Any) -> None:
    """Run `task` to its next resting point on a thread of the server."""
    from normalize.runner import RunOptions, run_task

    run = RunOptions(workspace=Path(task.workspace), cancel=options.cancel)

    def go() -> None:
        try:
            run_task(task, run, **kwargs)
        except Exception:  # the task records its own failure; nothing to show here
            return

    thread = threading.Thread(target=go, name=f"normalize-task-{task.id}", daemon=True)
    options.runs.append(thread)
    thread.start()


def _start(options: ServeOptions, workflow: str, goal: str, variables: dict[str, str]) -> str:
    from mcp.server.mcpserver.exceptions import ToolError

    from normalize.errors import NormalizeError
    from normalize.runner import RunOptions, load_spec, start_task
    from normalize.workflow.catalog import names_a_path

    root = options.workspace.resolve()
    try:
        ref = str(_in_workspace(root, workflow)) if names_a_path(workflow) else workflow
        spec = load_spec(ref, root, {**variables, **({"task": goal} if goal else {})},
                         paths_trusted=False)  # another agent named it, not the person
        task = start_task(spec, goal, RunOptions(workspace=root))
    except NormalizeError as exc:
        raise ToolError(str(exc)) from None
    _background(options, task)
    return json.dumps({"task": task.id, "status": "started",
                       "follow": f"task_events task={task.id} since=0"})


def _in_workspace(root: Path, ref: str) -> Path:
    """The workflow file `ref` names, relative to the workspace and inside it."""
    from normalize.errors import UsageError

    path = Path(os.path.realpath(root / ref))
    if not path.is_relative_to(root):
        raise UsageError(f"{ref}: outside the workspace {root}; name a workflow file in it, "
                         f"or a workflow by name")
    return path


def _answer(options: ServeOptions, task: Task, answer: str) -> str:
    from mcp.server.mcpserver.exceptions import ToolError

    from normalize.engine import Reply
    from normalize.runner import RunOptions, open_task

    pending = task.pending
    if pending is None:
        raise ToolError(f"task {task.id} is not waiting for input (it is {task.status.value})")
    full = open_task(task.id, RunOptions(workspace=Path(task.workspace)))
    if pending.kind == "approval":
        word = answer.strip().lower()
        if word not in ("yes", "no", "y", "n"):
            raise ToolError(f"task {task.id} waits for an approval: {pending.question} — "
                            f"answer yes or no")
        approve = word in ("yes", "y")
        refused = _persons_call(full) if approve and not options.allow_approve_all else None
        if refused is not None:
            raise ToolError(refused)
        reply = Reply(approve=approve)
    else:
        reply = Reply(answer=answer)
    _background(options, full, resumed=True, reply=reply)
    return json.dumps({"task": task.id, "status": "resumed"})


def _persons_call(task: Task) -> str | None:
    """Why approving what `task` waits for is the person's call alone (a refusal), or None."""
    from normalize.permissions import Flags, task_permissions
    from normalize.tools.approval import persons_call

    action = task.pending.action if task.pending is not None else None
    perms = task_permissions(task, Flags())  # no flags: the person's own record decides
    why = "its action is not recorded" if action is None else \
        persons_call(action, perms.sandbox_policy())
    if why is None:
        return None
    return (f"task {task.id} waits for an approval only the person can give ({why}); an "
            f"answer over MCP may not approve it. Answer it at a terminal with `normalize "
            f"resume {task.id} --answer yes`, or serve with --allow-approve-all to let MCP "
            f"clients approve such actions")


def serve(options: ServeOptions) -> None:
    """Serve over stdio until the client disconnects; then stop the tasks it started.

    Each gets `DISCONNECT_GRACE` seconds to reach its resting point, then is
    cancelled (it stops at a safe point and can be resumed).
    """
    try:
        build_server(options).run("stdio")
    finally:
        deadline = time.monotonic() + DISCONNECT_GRACE
        for thread in options.runs:  # a task near its resting point gets there
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        options.cancel.cancel()  # the rest stop at a safe point, resumable
        for thread in options.runs:
            thread.join(timeout=30)
