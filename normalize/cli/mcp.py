"""`normalize mcp`: serve normalize over MCP (stdio); and the MCP part of `help commands`."""

from __future__ import annotations

import contextlib
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.console import Environment, error_line, fail
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.mcp_server import ServeOptions


def serve_mcp(env: Environment, *, workspace: Path | None, allow_run: bool,
              allow_approve_all: bool = False) -> int:
    """Serve until the client disconnects; stdout carries the protocol only."""
    from normalize.mcp_server import ServeOptions, serve

    root = (workspace or Path.cwd()).resolve()
    try:
        if not root.is_dir():
            raise UsageError(f"--workspace {root}: no such directory")
        if allow_approve_all and not allow_run:
            raise UsageError("--allow-approve-all needs --allow-run (answer_task is served "
                             "only with it)")
        options = ServeOptions(workspace=root, allow_run=allow_run,
                               allow_approve_all=allow_approve_all)
        with contextlib.suppress(ValueError):  # (served from a thread: its caller's signals)
            signal.signal(signal.SIGINT, lambda *_: _stop(env, options))
        if env.stdin_tty:  # a person, not a client: say what this is and how it ends
            served = "code tools and tasks" if allow_run else "code tools"
            env.stderr.write(f"normalize mcp: serving {root}'s {served} over MCP on stdin and "
                             "stdout, for an MCP client (claude mcp add normalize -- normalize "
                             "mcp); Ctrl-C stops\n")
            env.stderr.flush()
        serve(options)
    except NormalizeError as exc:
        return fail(env, exc)
    except KeyboardInterrupt:
        return 130
    return 0


def _stop(env: Environment, options: ServeOptions) -> None:
    """Ctrl-C: the stdin reader cannot be woken, so the tasks started stop at a safe point
    (resumable) and the process leaves at once with 130."""
    options.cancel.cancel()
    for thread in options.runs:
        thread.join(timeout=30)
    env.stderr.write("normalize mcp: stopped\n")
    env.stderr.flush()
    os._exit(130)


def user_servers_reference(env: Environment, workspace: Path | None = None) -> str:
    """The tools of the servers in the user's `[[mcp]]` tables ('' when there are none).

    The servers are started (sandboxed, in the workspace) to list their tools,
    then stopped; a problem is one line on stderr and the rest still shows.
    """
    from normalize.permissions import load_mcp_servers

    try:
        servers = load_mcp_servers()
    except NormalizeError as exc:
        error_line(env, str(exc))
        return ""
    if not servers:
        return ""
    from dataclasses import replace

    from normalize.homes import config_home, data_home
    from normalize.mcp.client import McpSessions
    from normalize.sandbox import SandboxPolicy

    policy = replace(SandboxPolicy(), hidden=(str(data_home()), str(config_home())))
    with McpSessions(servers, workspace=(workspace or Path.cwd()).resolve(),
                     sandbox=policy) as sessions:
        return sessions.reference()
