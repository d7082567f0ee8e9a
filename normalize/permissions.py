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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.errors import ConfigError
from normalize.homes import config_home
from normalize.keys import declared
from normalize.sandbox import SandboxMode, SandboxPolicy
from normalize.sandbox.hosts import check_host, covered
from normalize.serial import Record, stored
from normalize.tables import PermissionsTable, given

if TYPE_CHECKING:
    from normalize.hooks import Hook, HookRunner
    from normalize.mcp.config import ServerSpec
    from normalize.task import Task
    from normalize.tools.approval import ApprovalPolicy
    from normalize.workflow.spec import WorkflowSpec

__all__ = [
    "KEYS",
    "MODES",
    "SANDBOXES",
    "Flags",
    "Grants",
    "Permissions",
    "command_line",
    "config_path",
    "file_digest",
    "is_trusted",
    "load_mcp_servers",
    "load_user_config",
    "load_user_hooks",
    "mcp_servers",
    "network_value",
    "resolve_permissions",
    "shown_path",
    "task_grants",
    "task_hooks",
    "task_mcp_servers",
    "task_permissions",
    "trust_file",
    "trusted_files",
    "untrust_file",
]

MODES = ("never", "ask", "auto", "yes")
"""Approval modes, strictest first."""
SANDBOXES = ("read-only", "workspace", "off")
"""Sandbox modes, strictest first."""
KEYS = tuple(declared(PermissionsTable))
"""The keys of a permissions table (declared once, with their types, in `normalize.tables`)."""
APPROVAL_KEYS = ("mode", "allow", "deny", "allow_shell")
UNTRUSTED_HINT = "untrusted workspace file; `normalize trust FILE` to allow"


def _hosts_out(value: bool | tuple[str, ...]) -> bool | list[str]:
    return list(value) if isinstance(value, tuple) else value


def _hosts_in(value: bool | list[str]) -> bool | tuple[str, ...]:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True)
class Permissions(Record):
    """The resolved permissions of a run (plain data, recorded in the task by its fields)."""

    mode: str = "auto"
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    allow_shell: bool = False
    network: bool | tuple[str, ...] = field(
        default=False, metadata=stored(wrap=_hosts_out, unwrap=_hosts_in))
    """False, True (every host) or the only hosts programs reach."""
    sandbox: str = SandboxMode.WORKSPACE.value
    env_allow: tuple[str, ...] = ()
    hosts_ask: bool = field(default=False, metadata=stored(omit_default=True))
    """The host list narrowed a `true` from a workspace file: it asks in auto, as `true` does."""
    notes: tuple[str, ...] = field(default=(), compare=False, metadata=stored(transient=True))
    """What was ignored, and why (said when the run starts; not recorded)."""

    def approval_config(self) -> dict[str, Any]:
        """The table `ApprovalPolicy.from_config` takes."""
        return {key: value for key, value in self.to_dict().items() if key in APPROVAL_KEYS}

    def sandbox_policy(self, hidden: tuple[Path, ...] = ()) -> SandboxPolicy:
        """What programs may touch; `hidden` names paths none may read (normalize's own)."""
        hosts = self.network if isinstance(self.network, tuple) else ()
        return SandboxPolicy(mode=SandboxMode(self.sandbox), network=self.network is True,
                             hosts=hosts, hosts_ask=self.hosts_ask, env_allow=self.env_allow,
                             hidden=tuple(map(str, hidden)))

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
    """The config file as a TOML document (edits keep its comments) and its text; no file
    reads as an empty table, and then tomlkit is not imported (every run reads this)."""
    try:
        source = path.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError):  # no config file there
        return {}, ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    from normalize.workflow.loader import parse_toml_text

    parse_toml_text(source, str(path))  # syntax errors in tomllib's words, at their place
    import tomlkit

    return tomlkit.parse(source), source


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
        if key not in ("permissions", "trust", "mcp", "hooks", "memory"):
            line = _line_of(source, "")(key) or 1
            raise ConfigError(f"{path}:{line}: unknown table {key!r}; expected [permissions], "
                              f"[trust], [[mcp]], [[hooks]] or [memory]")
    table = doc.get("permissions", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: `permissions` must be a table")
    return Permissions().overlay(table.unwrap() if hasattr(table, "unwrap") else table,
                                 str(path), locate=_line_of(source, "permissions"))


def load_user_memory(path: Path | None = None) -> dict[str, Any]:
    """The user's `[memory]` table (`top_k`, `mode`, `store`), as plain values ({}: none)."""
    path = path or config_path()
    doc, _ = _read_config(path)
    table = doc.get("memory", {})
    if not isinstance(table, Mapping):
        raise ConfigError(f"{path}: `memory` must be a table")
    return dict(table.unwrap() if hasattr(table, "unwrap") else table)


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


# -- a run's permissions, servers and hooks: the layers resolved for one task ---------------


@dataclass(frozen=True)
class Flags:
    """The command line's layer of one run: it may widen (the person typed it)."""

    approve: str | None = None
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    env_allow: tuple[str, ...] = ()
    sandbox: str | None = None  # --sandbox workspace|read-only|off
    network: bool | tuple[str, ...] | None = None  # --network

    def table(self) -> dict[str, Any]:
        """The flags as a permissions table (the top layer)."""
        table: dict[str, Any] = {"allow": list(self.allow), "deny": list(self.deny),
                                 "env_allow": list(self.env_allow)}
        if self.approve:
            table["mode"] = self.approve
        if self.sandbox is not None:
            table["sandbox"] = self.sandbox
        if self.network is not None:
            table["network"] = self.network
        return table

    def argv(self) -> tuple[str, ...]:
        """The flags a child's `normalize` process is started with (it keeps its parent's)."""
        argv: list[str] = []
        if self.sandbox is not None:
            argv += ["--sandbox", self.sandbox]
        if self.network is False:
            argv.append("--no-network")
        elif self.network is not None:  # every host ("*"), or those named
            for host in ("*",) if self.network is True else self.network:
                argv += ["--network", host]
        if self.approve:
            argv += ["--approve", self.approve]
        return tuple(argv)


def command_line(perms: Permissions, flags: Flags) -> Permissions:
    """`perms` with the flags on top (they may widen: the user typed them)."""
    return perms.overlay(flags.table(), "the command line")


def shown_path(path: str, workspace: Path) -> str:
    """`path` as a note shows it: relative to the workspace when it is inside."""
    try:
        return Path(path).resolve().relative_to(workspace.resolve()).as_posix()
    except ValueError:
        return path


def resolve_permissions(spec: WorkflowSpec, flags: Flags, workspace: Path) -> Permissions:
    """Defaults < the user's config < the workflow (only narrowing, if untrusted) < flags."""
    perms = load_user_config()
    where = shown_path(spec.path, workspace)
    if spec.shadowed:
        shadowed = shown_path(spec.shadowed, workspace)
        perms = replace(perms, notes=(f"ignored {shadowed}: {UNTRUSTED_HINT}; running the "
                                      f"{spec.origin} workflow {spec.name!r} ({where}) instead",))
    perms = perms.overlay(given(spec.permissions), where, trusted=spec.origin != "workspace")
    return command_line(perms, flags)


def task_permissions(task: Task, flags: Flags) -> Permissions:
    """The permissions recorded when the task started, with this run's flags on top.

    A task from before permissions were recorded is resolved anew from its
    stored spec (and its recorded `approve`).
    """
    from normalize.workflow.spec import WorkflowSpec

    config = task.config
    if config.permissions is not None:
        return command_line(Permissions.from_dict(config.permissions), flags)
    spec = WorkflowSpec.from_dict(config.spec) if config.spec else \
        WorkflowSpec(name=task.driver, path="", driver=task.driver)
    if config.approve and not flags.approve:
        flags = replace(flags, approve=config.approve)
    return resolve_permissions(spec, flags, Path(task.workspace))


def mcp_servers(spec: WorkflowSpec, workspace: Path) -> tuple[list[ServerSpec], list[str]]:
    """The MCP servers a run of `spec` uses: the user's `[[mcp]]`, then `[[workflow.mcp]]`.

    A server names a program to start, so an untrusted workspace workflow's
    servers are left out (with a note), as any widening it asks for is.
    """
    servers = {server.name: server for server in load_mcp_servers()}
    ignored: list[str] = []
    if spec.mcp:
        if spec.origin == "workspace":
            names = ", ".join(server.name for server in spec.mcp)
            ignored.append(f"ignored [[workflow.mcp]] {names} from "
                           f"{shown_path(spec.path, workspace)}: {UNTRUSTED_HINT}")
        else:
            servers.update((server.name, server) for server in spec.mcp)
    return list(servers.values()), ignored


def task_mcp_servers(task: Task) -> list[ServerSpec]:
    """The servers recorded when the task started (or, for an older task, found anew)."""
    from normalize.mcp.config import ServerSpec
    from normalize.workflow.spec import WorkflowSpec

    config = task.config
    if config.mcp_servers is not None:
        return [ServerSpec.from_dict(item) for item in config.mcp_servers]
    if config.permissions is not None or not config.spec:
        return []  # started with none (or from before servers were recorded, without a spec)
    return mcp_servers(WorkflowSpec.from_dict(config.spec), Path(task.workspace))[0]


def task_hooks(task: Task, env_allow: Sequence[str] = ()) -> tuple[HookRunner | None, list[str]]:
    """The user's hooks, then a trusted workflow's; an untrusted workflow's are left out, said.
    `env_allow`: the variables the task's permissions let through the scrub, for hooks too."""
    from normalize.hooks import Hook, HookRunner

    hooks = list(load_user_hooks())
    spec = task.config.spec_table
    tables, notes = spec.get("hooks") or [], []
    if tables and spec.get("origin") == "workspace":
        where = shown_path(str(spec.get("path", "")), Path(task.workspace))
        notes.append(f"ignored {len(tables)} hook(s) of {where}: {UNTRUSTED_HINT}")
    elif tables:  # checked when the workflow was loaded
        hooks.extend(Hook.from_dict(table) for table in tables)
    runner = HookRunner(hooks, Path(task.workspace), task.id, env_allow) if hooks else None
    return runner, notes


@dataclass(frozen=True)
class Grants:
    """What one run of a task may do and start, resolved once before anything runs."""

    permissions: Permissions
    policy: ApprovalPolicy  # who says yes
    sandbox: SandboxPolicy  # what a yes can touch (normalize's own data hidden)
    servers: tuple[ServerSpec, ...]  # the MCP servers it may start
    hooks: HookRunner | None  # the person's hooks, and a trusted workflow's
    ignored: tuple[str, ...]  # what a workspace file asked for and was left out (said at start)
    argv: tuple[str, ...]  # the flags its children's processes are started with
    remembers: bool = False  # its driver's model reads memory and skills (`Remembers`)


def task_grants(task: Task, flags: Flags, *, hidden: tuple[Path, ...], home: Path,
                interactive: bool) -> Grants:
    """What one run of `task` may do: its permissions with `flags` on top, the approval
    policy, the sandbox (`hidden`: normalize's own data), the MCP servers and the hooks.

    Fails closed (a `UsageError`) when its programs could run unconfined with no
    person to ask, or the sandbox could not hide the data `home` from them.
    """
    from normalize.sandbox.refuse import refuse_state_in_workspace, refuse_unconfined
    from normalize.tools.approval import ApprovalMode, ApprovalPolicy

    perms = task_permissions(task, flags)
    policy = ApprovalPolicy.from_config(perms.approval_config(), interactive=interactive)
    if task.driver == "user" and policy.mode is ApprovalMode.ASK:
        policy.mode = ApprovalMode.AUTO  # a person's own edits are not put to them again
    sandbox = perms.sandbox_policy(hidden)
    refuse_unconfined(sandbox, policy.mode.value, interactive)
    refuse_state_in_workspace(sandbox, Path(task.workspace), home)
    hooks, ignored = task_hooks(task, perms.env_allow)
    from normalize.contract.driver import driver_traits

    return Grants(perms, policy, sandbox, tuple(task_mcp_servers(task)), hooks, tuple(ignored),
                  flags.argv(), driver_traits(task.driver).remembers)


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


def trust_check() -> Callable[[Path], bool]:
    """`is_trusted` for many files: the trusted table read once (skills are checked by the
    hundred)."""
    table = trusted_files()

    def trusted(path: Path) -> bool:
        recorded = table.get(_key(path))
        try:
            return recorded is not None and recorded == file_digest(path)
        except OSError:
            return False

    return trusted


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
