"""The MCP server tables: `[[mcp]]` in the user's config, `[[workflow.mcp]]` in a workflow.

```toml
[[mcp]]
name = "git"                      # how the model names it: `mcp git git_status ...`
command = "mcp-server-git"        # a stdio server: a program normalize starts (sandboxed)
args = ["--repository", "."]
env = { GIT_PAGER = "cat" }       # added to its (scrubbed) environment
timeout = 30                      # seconds, for starting and for each call
tools = ["git_status", "git_log"] # the tools exposed to the model (default: all)
sandbox = "workspace"             # workspace | read-only | off (default: the run's)
network = false                   # true or false (default: the run's; a host list is not)

[[mcp]]
name = "docs"
url = "http://127.0.0.1:8000/mcp" # a streamable-HTTP server
```
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from normalize.errors import ConfigError
from normalize.keys import BOOL, NUM, STR, STRS, TABLE, declared, key
from normalize.serial import Record

__all__ = ["DEFAULT_TIMEOUT", "KEYS", "ServerSpec", "parse_server", "parse_servers"]

DEFAULT_TIMEOUT = 30.0
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
SANDBOXES = ("workspace", "read-only", "off")


@dataclass(frozen=True)
class ServerSpec(Record):
    """One configured MCP server: how to reach it and which of its tools the model sees.

    Checked once, where it is configured (`parse_server`); stored and read
    back by its fields (`normalize.serial`).
    """

    name: str = key(MISSING, STR, "how the model names it: `mcp NAME TOOL …`",
                    omit_default=False)
    command: str = key("", STR, "a stdio server: the program normalize starts (sandboxed)",
                       omit_default=False)
    args: tuple[str, ...] = key((), STRS, "its arguments", omit_default=False)
    env: Mapping[str, str] = key(None, TABLE, "added to its (scrubbed) environment",
                                 factory=dict, omit_default=False)
    url: str = key("", STR, "a streamable-HTTP server's address (instead of `command`)",
                   omit_default=False)
    timeout: float = key(DEFAULT_TIMEOUT, NUM, "seconds, for starting and for each call",
                         omit_default=False)
    tools: tuple[str, ...] | None = key(None, STRS, "the tools the model sees (not set: all)",
                                        omit_default=False)
    sandbox: str | None = key(None, STR, "`workspace`, `read-only` or `off` (not set: the "
                                         "run's)", omit_default=False)
    network: bool | None = key(None, BOOL, "whether it may reach the network (not set: the "
                                           "run's)", omit_default=False)
    origin: str = ""  # where it was configured (a file), for messages (not a key)

    @property
    def transport(self) -> str:
        return "http" if self.url else "stdio"

    @property
    def shown(self) -> str:
        """How the server is reached, as one short phrase."""
        if self.url:
            return self.url
        return " ".join([self.command, *self.args])

    def exposes(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools


KEYS = tuple(declared(ServerSpec))
"""The keys of a server table (`ServerSpec` declares them, with their types)."""

Fail = Callable[[str, str], ConfigError]


def _default_fail(where: str) -> Fail:
    return lambda _key, message: ConfigError(f"{where}: {message}")


def parse_server(table: Mapping[str, Any], where: str, fail: Fail | None = None) -> ServerSpec:
    """One server table, checked; a `ConfigError` naming the key at the first problem."""
    fail = fail or _default_fail(where)
    for given in table:
        if given not in (*KEYS, "origin"):
            raise fail(given, f"unknown key {given!r} in an MCP server table; expected one "
                              f"of: {', '.join(KEYS)}")
    name = table.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise fail("name", f"an MCP server needs a `name` of letters, digits, `_`, `-` or `.` "
                           f"(got {name!r})")
    command, url = table.get("command", ""), table.get("url", "")
    if not isinstance(command, str) or not isinstance(url, str):
        raise fail("command" if not isinstance(command, str) else "url",
                   f"MCP server {name!r}: `command` and `url` must be strings")
    if bool(command) == bool(url):
        raise fail("command", f"MCP server {name!r} needs either `command` (a stdio server) or "
                              f"`url` (streamable HTTP), not {'both' if command else 'neither'}")
    if url and not re.match(r"https?://", url):
        raise fail("url", f"MCP server {name!r}: url must start with http:// or https://")
    args = _strings(table.get("args", []), "args", name, fail)
    tools = table.get("tools")
    env = table.get("env", {})
    if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise fail("env", f"MCP server {name!r}: env must be a table of strings")
    timeout = table.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise fail("timeout", f"MCP server {name!r}: timeout must be a positive number of "
                              f"seconds, not {timeout!r}")
    sandbox = table.get("sandbox")
    if sandbox is not None and sandbox not in SANDBOXES:
        raise fail("sandbox", f"MCP server {name!r}: sandbox = {sandbox!r}: expected one of: "
                              f"{', '.join(SANDBOXES)}")
    network = table.get("network")
    if network is not None and not isinstance(network, bool):
        raise fail("network", f"MCP server {name!r}: network must be true or false")
    if url and (args or env or sandbox is not None or network is not None):
        raise fail("url", f"MCP server {name!r}: args, env, sandbox and network belong to a "
                          f"stdio server (`command`), not to a `url`")
    return ServerSpec(name=name, command=command, args=tuple(args), env=dict(env), url=url,
                      timeout=float(timeout),
                      tools=None if tools is None else tuple(_strings(tools, "tools", name, fail)),
                      sandbox=sandbox, network=network,
                      origin=str(table.get("origin") or where))


def _strings(value: Any, key: str, name: str, fail: Fail) -> list[str]:
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise fail(key, f"MCP server {name!r}: {key} must be a list of strings")
    return list(value)


def parse_servers(tables: Sequence[Mapping[str, Any]], where: str,
                  fail: Callable[[int, str, str], ConfigError] | None = None) -> list[ServerSpec]:
    """An array of server tables; names must be unique. `fail(index, key, message)` locates."""
    out: list[ServerSpec] = []
    for index, table in enumerate(tables):
        if not isinstance(table, Mapping):
            raise ConfigError(f"{where}: each MCP server must be a table")
        one: Fail | None = None
        if fail is not None:
            one = (lambda i: lambda key, message: fail(i, key, message))(index)
        spec = parse_server(table, where, one)
        if any(s.name == spec.name for s in out):
            error = f"MCP server {spec.name!r} is configured twice"
            raise fail(index, "name", error) if fail is not None else ConfigError(
                f"{where}: {error}")
        out.append(spec)
    return out
