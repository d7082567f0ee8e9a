"""`normalize view|skeleton|grep|analyze …`: the tools, straight from the command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from normalize.cli.console import Environment, error_line
from normalize.errors import ExitStatus
from normalize.task import Action, ActionResult, ResultStatus

UNBOUNDED = 10**9
NO_MATCH = 1


def run_verb(env: Environment, verb: str, args: list[str], *, workspace: Path | None = None,
             json_output: bool = False) -> int:
    """Run one read-only tool on the workspace and print its whole output."""
    from normalize.execution.cache import NoCache
    from normalize.homes import data_home
    from normalize.tools import default_tools
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy
    from normalize.tools.base import ToolContext
    from normalize.tools.guard import WorkspaceGuard

    if workspace is not None and not workspace.is_dir():
        what = "not a directory" if workspace.exists() else "no such directory"
        error_line(env, f"--workspace {workspace}: {what}")
        return int(ExitStatus.USAGE)
    root = (workspace or Path.cwd()).resolve()
    if verb in PATH_VERBS:
        args = [inside(arg, root, workspace or Path.cwd()) for arg in args]
    tools = default_tools((verb,))  # one verb imports one tool's modules
    ctx = ToolContext(workspace=root, guard=WorkspaceGuard(root, protected=[data_home()]),
                      cache=NoCache(preview_lines=UNBOUNDED, preview_chars=UNBOUNDED),
                      policy=ApprovalPolicy(mode=ApprovalMode.NEVER))
    text = " ".join([verb, *args])
    result = tools.execute(Action(verb, {"args": args, "body": None}, text=text), ctx)
    _show(env, verb, text, result, json_output)
    if result.status is ResultStatus.SUCCESS:
        if verb == "grep" and result.data.get("matches") == 0:
            return NO_MATCH  # like grep and rg: a search that finds nothing exits 1
        return int(ExitStatus.DONE)
    if not json_output:
        error_line(env, result.error or result.status.value)
    # what a reader verb fails on is what it was asked (a path, a pattern): 2, as in grep and
    # rg, and as `run` says of a missing file; 1 stays grep's "no match"
    return int(ExitStatus.USAGE)


def _show(env: Environment, verb: str, text: str, result: ActionResult,
          json_output: bool) -> None:
    """The verb's whole output, or (`--json`) its result as one JSON object."""
    if json_output:
        shown: dict[str, object] = {
            "command": text, "status": result.status.value, "output": result.output,
            "error": result.error, "exit_code": result.exit_code, "data": result.data,
            "duration": round(result.duration, 6)}  # fmt: skip
        if verb == "skeleton" and "items" in result.data:  # the symbols themselves, nested
            from normalize.tools.code.symbols import nest  # (loaded by skeleton already)

            shown["symbols"] = nest(result.data["items"])
        env.stdout.write(json.dumps(shown) + "\n")
    elif result.output:
        env.stdout.write(result.output.rstrip("\n") + "\n")


PATH_VERBS = frozenset({"view", "skeleton"})
"""The verbs whose arguments are paths, so a pasted absolute path can be made relative."""


def inside(arg: str, root: Path, given: Path) -> str:
    """A pasted absolute path inside the workspace, made relative (`view` reads only those);
    anything else is left for the tool to judge."""
    if not arg.startswith("/"):
        return arg
    for base in dict.fromkeys((str(root), str(given.absolute()))):
        if arg == base:
            return "."
        if arg.startswith(base.rstrip("/") + "/"):
            return arg[len(base.rstrip("/")) + 1:] or "."
    return arg


def print_commands(env: Environment, *, markdown: bool) -> int:
    """The command language reference, generated from the verb table."""
    from normalize.cli.mcp import user_servers_reference
    from normalize.intents import command_reference

    env.stdout.write(command_reference(markdown=markdown).rstrip("\n") + "\n")
    extra = user_servers_reference(env)  # the configured MCP servers' tools
    if extra:
        env.stdout.write("\n" + extra.rstrip("\n") + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover - debugging aid
    sys.exit(run_verb(Environment(), sys.argv[1], sys.argv[2:]))
