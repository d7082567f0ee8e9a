"""Permissions in layers: what a run may do, and which files may say so.

The layers, lowest first: the built-in defaults, the user's config file
(`config_home()/config.toml`, a `[permissions]` table), the workflow's
`[workflow.permissions]`, the command line. A workflow the model could have
written — one found by name under the workspace and not trusted — may only
narrow what the layers below it give: a stricter `mode` (yes > auto > ask >
never), more `deny` patterns, `allow_shell`/`network` false, a stricter
`sandbox` (off > workspace > read-only), and a host list (`network = ["pypi.org"]`)
only within what the layers below reach: it narrows `true` to a list (which
then asks in auto, as `true` does: the person chose everything, not these
hosts) or a list to some of its hosts. Every widening it asks for is left
out and reported. `normalize trust FILE` records a file's exact content hash
in the user's config (`[trust]`); a trusted file counts as the user's own
until its content changes.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.errors import ConfigError
from normalize.homes import config_home
from normalize.sandbox import SandboxMode, SandboxPolicy
from normalize.sandbox.hosts import check_host, covered

if TYPE_CHECKING:
    from normalize.hooks import Hook
    from normalize.mcp.config import ServerSpec

__all__ = ["KEYS", "MODES", "SANDBOXES", "Permissions", "config_path", "file_digest",
           "is_trusted", "load_mcp_servers", "load_user_config", "load_user_hooks",
           "network_value", "trust_file", "trusted_files", "untrust_file"]

MODES = ("never", "ask", "auto", "yes")
"""Approval modes, strictest first."""
SANDBOXES = ("read-only", "workspace", "off")
"""Sandbox modes, strictest first."""
KEYS = ("mode", "allow", "deny", "allow_shell", "network", "sandbox", "env_allow")
APPROVAL_KEYS = ("mode", "allow", "deny", "allow_shell")
UNTRUSTED_HINT = "untrusted workspace file; `normalize trust FILE` to allow"


@dataclass(frozen=True)
class Permissions:
    """The resolved permissions of a run (plain data, recorded in the task)."""

    mode: str = "auto"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow_shell: bool = False
    network: bool | tuple[str, ...] = False
    """False, True (every host) or the only hosts programs reach."""
    sandbox: str = SandboxMode.WORKSPACE.value
    env_allow: tuple[str, ...] = ()
    hosts_ask: bool = False
    """The host list narrowed a `true` from a workspace file: it asks in auto, as `true` does."""
    notes: tuple[str, ...] = field(default=(), compare=False)  # what was ignored, and why

    def to_dict(self) -> dict[str, Any]:
        network = list(self.network) if isinstance(self.network, tuple) else self.network
        out = {"mode": self.mode, "allow": list(self.allow), "deny": list(self.deny),
               "allow_shell": self.allow_shell, "network": network,
               "sandbox": self.sandbox, "env_allow": list(self.env_allow)}
        return {**out, "hosts_ask": True} if self.hosts_ask else out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "recorded permissions"
                  ) -> Permissions:
        table = dict(data)
        hosts_ask = table.pop("hosts_ask", False) is True  # recorded only, never a file's key
        return replace(Permissions().overlay(table, where), hosts_ask=hosts_ask)

    def approval_config(self) -> dict[str, Any]:
        """The table `ApprovalPolicy.from_config` takes."""
        return {key: value for key, value in self.to_dict().items() if key in APPROVAL_KEYS}

    def sandbox_policy(self) -> SandboxPolicy:
        hosts = self.network if isinstance(self.network, tuple) else ()
        return SandboxPolicy(mode=SandboxMode(self.sandbox), network=self.network is True,
                             hosts=hosts, hosts_ask=self.hosts_ask, env_allow=self.env_allow)

    def overlay(self, table: Mapping[str, Any], where: str, *, trusted: bool = True,
                locate: Any = None) -> Permissions:
        """These permissions with `table` on top; an untrusted table only narrows."""
        checked = validate(table, where, locate)
        out = self
        notes = list(self.notes)
        for key, value in checked.items():
            if key == "network":
                out, dropped = _network(out, value, trusted)
                notes.extend(f"ignored network = {_show(item)} from {where}: {UNTRUSTED_HINT}"
                             for item in dropped)
                continue
            wider = _widening(out, key, value)
            if wider and not trusted:
                notes.extend(f"ignored {key} = {_show(item)} from {where}: {UNTRUSTED_HINT}"
                             for item in wider)
                value = _narrowed(out, key)
            out = _apply(out, key, value)
        return replace(out, notes=tuple(notes))


def _network(perms: Permissions, value: bool | tuple[str, ...], trusted: bool
             ) -> tuple[Permissions, list[Any]]:
    """`perms` with `network = value` on top, and what an untrusted file asked beyond them."""
    current = perms.network
    if trusted or value is False:
        return replace(perms, network=value, hosts_ask=False), []
    if value is True:
        return perms, [] if current is True else [True]
    if current is True:  # a list narrows everything, but the person did not choose these
        return replace(perms, network=value, hosts_ask=True), []
    kept = tuple(host for host in value if current and covered(host, current))
    return replace(perms, network=kept or False), [h for h in value if h not in kept]


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f'"{value}"'


def _merge(old: tuple[str, ...], new: list[str]) -> tuple[str, ...]:
    return (*old, *[item for item in new if item not in old])


def _apply(perms: Permissions, key: str, value: Any) -> Permissions:
    merged: Any = _merge(getattr(perms, key), value) if key in ("allow", "deny", "env_allow") \
        else value
    return replace(perms, **{key: merged})


def _widening(perms: Permissions, key: str, value: Any) -> list[Any]:
    """The parts of `key = value` that would give more than `perms` does."""
    if key == "mode":
        return [value] if MODES.index(value) > MODES.index(perms.mode) else []
    if key == "sandbox":
        return [value] if SANDBOXES.index(value) > SANDBOXES.index(perms.sandbox) else []
    if key in ("allow", "env_allow"):
        return [item for item in value if item not in getattr(perms, key)]
    if key == "allow_shell":
        return [value] if value and not perms.allow_shell else []
    return []  # deny only ever narrows


def _narrowed(perms: Permissions, key: str) -> Any:
    """The value of `key` with an untrusted widening left out."""
    if key in ("allow", "env_allow"):
        return []
    return getattr(perms, key)


def validate(table: Mapping[str, Any], where: str, locate: Any = None) -> dict[str, Any]:
    """A permissions table checked key by key; a bad one is a `ConfigError` naming its place."""

    def fail(key: str, message: str) -> ConfigError:
        line = locate(key) if locate is not None else None
        if line is not None:
            return ConfigError(f"{where}:{line}: {message}")
        return ConfigError(f"{where}: {message}")

    out: dict[str, Any] = {}
    for key, value in table.items():
        if key not in KEYS:
            raise fail(key, f"unknown permission {key!r}; expected one of: {', '.join(KEYS)}")
        if key in ("mode", "sandbox"):
            choices = MODES if key == "mode" else SANDBOXES
            if value not in choices:
                raise fail(key, f"{key} = {value!r}: expected one of: {', '.join(choices)}")
        elif key == "allow_shell":
            if not isinstance(value, bool):
                raise fail(key, f"{key} must be true or false, not {value!r}")
        elif key == "network":
            try:
                value = network_value(value)
            except ValueError as exc:
                raise fail(key, f"network {exc}") from None
        else:
            if isinstance(value, str):
                value = [value]
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                raise fail(key, f"{key} must be a list of strings")
            value = list(value)
        out[key] = value
    return out


def network_value(value: object) -> bool | tuple[str, ...]:
    """`network` checked: true, false or a list of hosts (an empty list is false)."""
    if isinstance(value, bool):
        return value
    if not isinstance(value, list | tuple):
        raise ValueError(f"must be true, false or a list of hosts, not {value!r}")
    if "*" in value:
        raise ValueError("\"*\" is not a host; network = true lets programs reach every host")
    hosts = tuple(dict.fromkeys(check_host(item) for item in value))
    return hosts or False


# -- the user's config file ------------------------------------------------------------------


def config_path() -> Path:
    """The user's config file (it may not exist)."""
    return config_home() / "config.toml"


def _read_config(path: Path) -> tuple[Any, str]:
    import tomlkit
    from tomlkit.exceptions import ParseError, TOMLKitError

    try:
        source = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no config file there
        return tomlkit.document(), ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    try:
        return tomlkit.parse(source), source
    except ParseError as exc:
        raise ConfigError(f"{path}:{exc.line}:{exc.col}: invalid TOML") from None
    except (TOMLKitError, RecursionError) as exc:  # a table declared twice; nesting too deep
        from normalize.workflow.loader import parse_toml_text

        parse_toml_text(source, str(path))  # tomllib's words and place, where it has them
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None


def _line_of(source: str, table: str) -> Any:
    from normalize.workflow.locate import Locator

    locator = Locator(source)

    def locate(key: str) -> int | None:
        found = locator.find(f"{table}.{key}")
        return found[0] if found else None

    return locate


def load_user_config(path: Path | None = None) -> Permissions:
    """The defaults with the user's `[permissions]` table on top."""
    path = path or config_path()
    doc, source = _read_config(path)
    for key in doc:
        if key not in ("permissions", "trust", "mcp", "hooks"):
            line = _line_of(source, "")(key) or 1
            raise ConfigError(f"{path}:{line}: unknown table {key!r}; expected [permissions], "
                              f"[trust], [[mcp]] or [[hooks]]")
    table = doc.get("permissions", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: `permissions` must be a table")
    return Permissions().overlay(table.unwrap() if hasattr(table, "unwrap") else table,
                                 str(path), locate=_line_of(source, "permissions"))


def load_user_hooks(path: Path | None = None) -> tuple[Hook, ...]:
    """The hooks of the user's config: its `[[hooks]]` tables (see `normalize.hooks`)."""
    from normalize.hooks import parse_hooks

    path = path or config_path()
    doc, _ = _read_config(path)
    tables = doc.get("hooks", [])
    return parse_hooks(tables.unwrap() if hasattr(tables, "unwrap") else tables, str(path))


def load_mcp_servers(path: Path | None = None) -> list[ServerSpec]:
    """The MCP servers of the user's config: its `[[mcp]]` tables (see `normalize.mcp.config`)."""
    from normalize.mcp.config import parse_servers
    from normalize.workflow.locate import Locator

    path = path or config_path()
    doc, source = _read_config(path)
    tables = doc.get("mcp", [])
    tables = tables.unwrap() if hasattr(tables, "unwrap") else tables
    if not isinstance(tables, list):
        raise ConfigError(f"{path}: `mcp` must be an array of tables ([[mcp]])")
    locator = Locator(source)

    def fail(index: int, key: str, message: str) -> ConfigError:
        found = locator.find(f"mcp.{index}.{key}")
        return ConfigError(f"{path}:{found[0]}: {message}" if found else f"{path}: {message}")

    return parse_servers(tables, str(path), fail)


# -- trust ----------------------------------------------------------------------------------


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _key(path: Path) -> str:
    return os.path.realpath(path)


def trusted_files(config: Path | None = None) -> dict[str, str]:
    """Path → sha256 of every trusted workflow file."""
    path = config or config_path()
    doc, _ = _read_config(path)
    table = doc.get("trust", {})
    if not isinstance(table, Mapping) or not all(isinstance(v, str) for v in table.values()):
        raise ConfigError(f"{path}: [trust] must map file paths to sha256 strings")
    return {str(k): str(v) for k, v in table.items()}


def is_trusted(path: Path, digest: str | None = None) -> bool:
    """Whether the user trusted this file with exactly its present content."""
    recorded = trusted_files().get(_key(path))
    if recorded is None:
        return False
    try:
        return recorded == (digest or file_digest(path))
    except OSError:
        return False


def _write_config(doc: Any) -> None:
    import tomlkit

    from normalize.fsutil import atomic_write, private_dirs

    path = config_path()
    private_dirs(path.parent)
    atomic_write(path, tomlkit.dumps(doc).encode("utf-8"), mode=0o600)


def trust_file(path: Path) -> tuple[str, str]:
    """Record `path`'s present content as trusted; returns (key, sha256)."""
    import tomlkit

    if not path.is_file():
        raise ConfigError(f"{path}: no such file")
    digest = file_digest(path)
    doc, _ = _read_config(config_path())
    if "trust" not in doc:
        doc["trust"] = tomlkit.table()
    doc["trust"][_key(path)] = digest
    _write_config(doc)
    return _key(path), digest


def untrust_file(path: Path) -> bool:
    """Forget `path`'s trust; False when it was not trusted."""
    doc, _ = _read_config(config_path())
    table = doc.get("trust")
    key = _key(path)
    if table is None or key not in table:
        return False
    del table[key]
    _write_config(doc)
    return True
