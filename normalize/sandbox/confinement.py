"""Turning a `SandboxPolicy` into what one child process starts with.

Filesystem: Landlock allows reading everywhere except the credential stores
(built as rules on the siblings of each hidden path, since Landlock can only
allow), writing in the workspace, the per-program temporary directory and a few
devices, and a private, empty `/dev/shm` (a tmpfs mounted in the child's mount
namespace, allowed by a rule the child adds after mounting it). Landlock cannot
take a `.git` out of a writable workspace without making the workspace root
read-only for new files, so every `.git` and
`.normalize` found in the workspace is bind-mounted read-only in a private mount
namespace (inside a new user namespace, so no privilege is needed and none is
gained: the child keeps its uid, and Landlock forbids it any later mount or
umount). Network: a new network namespace (no interfaces but a down loopback)
plus Landlock's TCP rules on ABI 4 and later.

That is the `full` tier. Where namespaces are refused (a container's seccomp
profile, Ubuntu's AppArmor restriction) the `landlock` tier keeps the same
Landlock rules and adds a seccomp filter (`seccomp.sandbox_filter`) in place of
the namespaces: no read-only binds (a write guard decides every path change
instead, `normalize.sandbox.writeguard`, refusing every `.git`, `.normalize` and
hidden place), the real `/dev/shm`, of /dev only `BUILD_DEVICES` (no terminal),
sockets refused by family, and every program's temporary directory made in one
private directory per user (`temp_parent`) that Landlock hides but for its own.

With a host list (`hosts`), in the full tier the child brings its namespace's
loopback up, listens on `PROXY_PORT` there and hands the listener to
normalize's proxy (`Confinement.started`), which reaches only the listed hosts;
Landlock allows connecting to that port only. In the landlock tier the proxy
listens on a loopback port of normalize's own namespace, the only port
Landlock lets the program connect to.

Beyond files: the program runs as a child of PID 1 of a new PID namespace, so
nothing it starts outlives it (see `normalize.sandbox.reaper`); no terminal
device is readable or writable; `/tmp` (and the temp root), `/run` and the
user's runtime directory are empty tmpfs mounts, so no Unix socket outside
the workspace can be reached, with the workspace, the program's temp dir and
HOME bound back in; every hidden directory (credential stores, container
engines' homes, normalize's own data and config, wherever they lie) is covered
by an empty, read-only tmpfs, since Landlock governs no `connect` and, inside
the workspace, would allow them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from normalize.sandbox import landlock, seccomp
from normalize.sandbox.child import CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, ChildPlan, mount_flags
from normalize.sandbox.credentials import CREDENTIAL_STORES, credential_places, homes
from normalize.sandbox.env import scrub_env
from normalize.sandbox.policy import SandboxMode, SandboxPolicy, SandboxTier
from normalize.sandbox.proxy import Proxy
from normalize.sandbox.writeguard import Protection, WriteGuard

__all__ = ["CREDENTIAL_STORES", "PROTECTED_NAMES", "PROXY_PORT", "Confinement", "confine",
           "protected_paths"]

AGENT_HOMES = (".docker", ".colima", ".rd", ".orbstack", ".lima")
"""Directories under HOME holding a container engine's socket (and its credentials)."""
PROTECTED_NAMES = frozenset({".git", ".normalize"})
"""Entries no program may write, at any depth of the workspace."""
TOOL_MANAGED = frozenset({"node_modules", "__pycache__", ".mypy_cache", ".ruff_cache",
                          ".pytest_cache", ".tox", ".nox"})
"""Directories the walk does not enter (nor a virtualenv's, found by its `pyvenv.cfg`)."""
PRIVATE_TMPFS = ("/dev/shm",)
"""Shared writable directories each program gets an empty copy of (POSIX shared memory and
semaphores keep working; nothing left there reaches another program or outlives this one)."""
PROXY_PORT = 3128
"""Where the proxy listens inside the program's own network namespace (nothing else is there)."""
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                   "all_proxy")
BUILD_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                 "/dev/shm")
"""All of /dev the landlock tier lets a program open: no terminal (`/dev/pts`, `/dev/ptmx`,
`/dev/tty`), since no mount namespace sets the person's pty apart, and no disk. `/dev/fd` and
`/dev/std*` lead to /proc (readable); a rule made through them would name the parent's files."""
WRITABLE_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                    "/dev/shm")
TERMINALS = ("/dev/tty", "/dev/console", "/dev/ptmx", "/dev/pts")
"""Neither readable nor writable: the person's terminal (and the virtual consoles below)."""
_CONSOLES = re.compile(r"^(?:tty\d+|vcs\w*)$")
SCRATCH = ("/tmp",)
"""Replaced by an empty tmpfs (with the temp root): other programs' sockets and temp files."""
SOCKET_DIRS = ("/run", "/var/run")
"""Replaced by an empty tmpfs (with $XDG_RUNTIME_DIR): agents', Docker's and D-Bus's sockets."""


@dataclass
class Confinement:
    """One child's sandbox: its environment, temp dir and the function run before exec."""

    env: dict[str, str]
    tmpdir: str | None = None
    preexec: Callable[[], None] | None = None
    proxy: Proxy | None = None
    _ruleset: landlock.Ruleset | None = None
    _channel: socket.socket | None = None  # the parent's end; the child's is `_child_end`
    _child_end: socket.socket | None = None
    guard: WriteGuard | None = None
    """The supervisor of path changes (`normalize.sandbox.writeguard`), in both tiers."""

    def started(self) -> None:
        """After the spawn: serve the listener the child passed back (a host list only).

        Raises OSError when none came: the program must then be stopped.
        """
        if self._channel is None or self.proxy is None:
            return
        channel, self._channel = self._channel, None
        self._close_child_end()
        try:
            channel.settimeout(5.0)
            _, fds, _, _ = socket.recv_fds(channel, 1, 1)
        finally:
            channel.close()
        if len(fds) != 1:
            raise OSError("the confined program passed no loopback listener to the proxy")
        self.proxy.serve(socket.socket(fileno=fds[0]))

    def network_log(self) -> list[dict[str, object]]:
        """The hosts the program asked the proxy for, allowed or refused."""
        return self.proxy.log() if self.proxy is not None else []

    def _close_child_end(self) -> None:
        if self._child_end is not None:
            self._child_end.close()
            self._child_end = None
    _plan: ChildPlan | None = None

    def refusal(self) -> str:
        """Why the child could not set the sandbox up (the step and the error), or ""."""
        return self._plan.refusal() if self._plan is not None else ""

    def leftovers(self) -> int:
        """How many processes the program left behind that were killed when it ended."""
        return self._plan.leftovers() if self._plan is not None else 0

    def close(self) -> None:
        """Stop the proxy and the write guard, free the ruleset, remove the temporary dir."""
        if self.proxy is not None:
            self.proxy.close()
        if self.guard is not None:
            self.guard.stop()
        for end in (self._channel, self._child_end):
            if end is not None:
                end.close()
        self._channel = self._child_end = None
        if self._ruleset is not None:
            self._ruleset.close()
            self._ruleset = None
        if self._plan is not None:
            self._plan.close()
            self._plan = None
        if self.tmpdir is not None:
            shutil.rmtree(self.tmpdir, ignore_errors=True)
            self.tmpdir = None


def temp_parent() -> str:
    """Where each program's temporary directory is made: one directory per user (0700) under
    the temp root, which the landlock tier hides whole (a program's own is allowed by its
    rule), so no program reads another's, made before it or after."""
    parent = os.path.join(tempfile.gettempdir(), f"normalize-{os.getuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(parent, 0o700)
    info = os.lstat(parent)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(errno.EPERM, f"{parent} is not a private directory of this user")
    return parent


def protected_paths(workspace: str) -> Iterator[str]:
    """Every `.git` and `.normalize` (directory or file) in the workspace, not following links.

    Dependency and cache trees (`node_modules`, virtualenvs, …) are not entered:
    they are the slow part of a walk and hold no repository of the user's own.
    """
    stack = [workspace]
    while stack:
        directory = stack.pop()
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        below: list[str] = []
        with entries:
            for entry in entries:
                if entry.name in PROTECTED_NAMES:
                    yield entry.path
                elif entry.name == "pyvenv.cfg":
                    below = []
                    break
                elif entry.name not in TOOL_MANAGED and entry.is_dir(follow_symlinks=False):
                    below.append(entry.path)
        stack.extend(below)


def _hidden(policy: SandboxPolicy, env: Mapping[str, str]) -> set[str]:
    """What no program may read: the credential places (`env`, the environment before the
    scrub, says where the person moved them), container engines' homes, `policy.hidden`
    and the terminals; never what the program may write (a harness's own home)."""
    engines = [os.path.join(home, name) for home in homes([env]) for name in AGENT_HOMES]
    paths = [*credential_places([env]), *engines]
    found = {os.path.realpath(p) for p in [*paths, *policy.hidden, *TERMINALS]} | _consoles()
    writable = _writable(policy)
    return {p for p in found if not any(p == w or _beneath(w, p) for w in writable)}


def _writable(policy: SandboxPolicy) -> list[str]:
    return [os.path.realpath(p) for p in policy.writable]


def _consoles() -> set[str]:
    try:
        return {os.path.join("/dev", n) for n in os.listdir("/dev") if _CONSOLES.match(n)}
    except OSError:
        return set()


def _beneath(path: str, other: str) -> bool:
    return other.startswith(path.rstrip("/") + "/")


def _readable(path: str, hidden: set[str]) -> Iterator[str]:
    """Paths whose hierarchies together cover `path` minus every hidden path."""
    above = {os.path.dirname(h) for h in hidden}
    for parent in list(above):
        while parent not in ("/", ""):
            parent = os.path.dirname(parent)
            above.add(parent)
    yield from _uncovered(os.path.realpath(path), hidden, above)


def _uncovered(real: str, hidden: set[str], above: set[str]) -> Iterator[str]:
    if any(p in hidden for p in _self_and_parents(real)):  # /dev/stdin → /dev/pts/3
        return
    if real not in above:
        yield real
        return
    try:
        entries = list(os.scandir(real))
    except OSError:
        return
    for entry in entries:
        path = os.path.realpath(entry.path) if entry.is_symlink() else entry.path
        yield from _uncovered(path, hidden, above)


def _self_and_parents(path: str) -> Iterator[str]:
    while path not in ("/", ""):
        yield path
        path = os.path.dirname(path)


def _ruleset(policy: SandboxPolicy, workspace: str, tmpdir: str, abi: int,
             env: Mapping[str, str], tier: SandboxTier = SandboxTier.FULL) -> landlock.Ruleset:
    ruleset = landlock.Ruleset(abi, deny_tcp=not policy.network)
    hidden = _hidden(policy, env)
    devices: tuple[str, ...] = WRITABLE_DEVICES
    if tier is SandboxTier.LANDLOCK:
        hidden.add("/dev")
        hidden.add(os.path.dirname(os.path.realpath(tmpdir)))  # others' temp dirs; ours below
        devices = tuple(d for d in devices if d in BUILD_DEVICES)
    try:
        ruleset.allow_all(_readable("/", hidden), landlock.ACCESS_READ)
        if tier is SandboxTier.LANDLOCK:
            ruleset.allow_all(BUILD_DEVICES, landlock.ACCESS_READ)
        write = landlock.ACCESS_READ | landlock.ACCESS_WRITE
        if policy.mode is SandboxMode.WORKSPACE:
            ruleset.allow(workspace, write)
        ruleset.allow(tmpdir, write)
        ruleset.allow_all(devices, write)
        ruleset.allow_all([os.path.realpath(p) for p in policy.writable], write)
    except BaseException:
        ruleset.close()
        raise
    return ruleset


def _proxied(confinement: Confinement, plan: ChildPlan, ruleset: landlock.Ruleset,
             hosts: tuple[str, ...]) -> None:
    """Route the program to a proxy for `hosts`: where it listens, the port rule, the variables.

    In a network namespace the child listens on its own loopback (`PROXY_PORT`)
    and passes the listener back. Without one, the proxy listens on a loopback
    port of normalize's namespace and Landlock allows connecting to that port
    only; Landlock's rules name ports, not addresses, so that port on any
    other address is reachable too, and without Landlock's TCP rules (ABI < 4)
    nothing would keep the program to the proxy: that is refused.
    """
    proxy = confinement.proxy = Proxy(hosts)
    if plan.unshare & CLONE_NEWNET:
        confinement._channel, confinement._child_end = socket.socketpair(socket.AF_UNIX,
                                                                         socket.SOCK_STREAM)
        plan.proxy_channel, plan.proxy_port = confinement._child_end, PROXY_PORT
        port = PROXY_PORT
    elif ruleset.denies_tcp:
        listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        port = listener.getsockname()[1]
        proxy.serve(listener)
    else:
        raise OSError(errno.EPERM, "a host list needs a network namespace or Landlock TCP rules")
    ruleset.allow_port(port)
    url = f"http://127.0.0.1:{port}"
    confinement.env.update(dict.fromkeys(PROXY_VARIABLES, url))
    for name in ("NO_PROXY", "no_proxy"):
        confinement.env.pop(name, None)


@dataclass
class _Mounts:
    """The directories a child replaces, and what it binds back into them."""

    scratch: list[str]
    sockets: list[str]
    keep: list[str]


def _coverable(paths: list[str | None], root: str, keep: set[str]) -> list[str]:
    found: list[str] = []
    for real in sorted({os.path.realpath(p) for p in paths if p}, key=len):
        if (os.path.isdir(real) and real != "/" and real not in keep and real != root
                and not _beneath(root, real) and not any(_beneath(f, real) for f in found)):
            found.append(real)
    return found


def _mounts(root: str, tmpdir: str, env: Mapping[str, str], network: bool,
            visible: Iterable[str] = ()) -> _Mounts:
    """Scratch and socket directories to replace (never the workspace), and what to bind back."""
    wanted = {root, os.path.realpath(tmpdir), *_named(visible)}
    if env.get("HOME"):
        wanted.add(os.path.realpath(env["HOME"]))
    # the programs a run calls: this interpreter's environment and every PATH entry (a venv
    # made under /tmp, as CI jobs often do, must stay runnable; Landlock keeps them read-only)
    for place in (sys.prefix, sys.base_prefix, *env.get("PATH", "").split(os.pathsep)):
        if place and os.path.isabs(place) and os.path.isdir(place):
            above = os.path.dirname(os.path.realpath(place))  # a venv's bin/: the venv whole
            venv = os.path.exists(os.path.join(above, "pyvenv.cfg"))
            wanted.add(above if venv else os.path.realpath(place))
    if network:
        wanted.add(os.path.realpath("/etc/resolv.conf"))  # often a link into /run
    scratch = _coverable([*SCRATCH, tempfile.gettempdir()], root, wanted)
    sockets = [p for p in _coverable([*SOCKET_DIRS, os.environ.get("XDG_RUNTIME_DIR")], root,
                                     wanted)
               if not any(p == s or _beneath(s, p) or _beneath(p, s) for s in scratch)]
    keep: list[str] = []
    for path in sorted(wanted, key=len):
        under = any(_beneath(c, path) for c in [*scratch, *sockets])
        if under and os.path.exists(path) and not any(_beneath(k, path) for k in keep):
            keep.append(path)
    return _Mounts(scratch, sockets, keep)


def _hideable(hidden: set[str], root: str, tmpdir: str, mounts: _Mounts,
              writable: Iterable[str] = ()) -> list[str]:
    """Hidden directories a child can cover with a mount: they hold sockets Landlock cannot
    refuse a connection to, and inside the workspace Landlock would allow them. One that
    holds a `writable` directory (a harness's own home among every task's) is not covered
    whole: its other entries are."""
    covered = [*mounts.scratch, *mounts.sockets]
    found: list[str] = []
    for path in sorted(_around(hidden, list(writable))):
        if path == root or _beneath(path, root) or _beneath(path, tmpdir):
            continue  # never cover the workspace itself
        gone = any(_beneath(c, path) for c in covered) and not any(
            _beneath(k, path) for k in mounts.keep)
        inside = any(path == f or _beneath(f, path) for f in found)  # covered by one before
        if not gone and not inside and os.path.isdir(path) and not os.path.islink(path):
            found.append(path)
    return found


def _around(paths: Iterable[str], open_: list[str]) -> Iterator[str]:
    """`paths`, each one above an `open_` path replaced by its entries, down to that path
    (which is left out)."""
    for path in paths:
        if not any(_beneath(path, o) for o in open_):
            if path not in open_:
                yield path
            continue
        try:
            names = os.listdir(path)
        except OSError:
            continue
        yield from _around([os.path.join(path, name) for name in names], open_)


def _named(paths: Iterable[str]) -> set[str]:
    """What a command the person configured names (its program, its script): the directory of
    each absolute path that exists, or the file alone where that directory is a covered root."""
    roots = {"/", *SCRATCH, *SOCKET_DIRS, tempfile.gettempdir()}
    found: set[str] = set()
    for path in paths:
        if not os.path.isabs(path) or not os.path.exists(path):
            continue
        real = os.path.realpath(path)
        if real in roots:
            continue  # kept whole, a covered root (/tmp itself) would not be covered at all
        where = real if os.path.isdir(real) else os.path.dirname(real)
        found.add(real if where in roots else where)
    return found


def _plan(policy: SandboxPolicy, root: str, tmpdir: str, env: Mapping[str, str],
          ruleset: landlock.Ruleset, visible: Iterable[str] = ()) -> ChildPlan:
    mounts = _mounts(root, tmpdir, env, policy.network, [*visible, *policy.writable])
    private = [p for p in PRIVATE_TMPFS if os.path.isdir(p)]
    hidden = _hidden(policy, env)
    hide = _hideable(hidden, root, tmpdir, mounts, _writable(policy))
    for path in mounts.keep:  # bound back, it loses the rules of its old parents
        if not any(path == h or _beneath(path, h) for h in hidden):
            ruleset.allow(path, landlock.ACCESS_READ)
    plan = ChildPlan(unshare=CLONE_NEWUSER | CLONE_NEWNS, ruleset_fd=ruleset.fd,
                     private_tmpfs=[os.fsencode(p) for p in private],
                     masked=[os.fsencode(p) for p in [*mounts.scratch, *mounts.sockets]],
                     keep=[os.fsencode(p) for p in mounts.keep],
                     hide=[os.fsencode(p) for p in hide],
                     tmpfs_access=(landlock.ACCESS_READ | landlock.ACCESS_WRITE) & ruleset.handled)
    if not policy.network:
        plan.unshare |= CLONE_NEWNET
    if policy.mode is SandboxMode.WORKSPACE:
        for path in protected_paths(root):
            plan.read_only.append((os.fsencode(path), mount_flags(path)))
    return plan


def confine(policy: SandboxPolicy, workspace: str | os.PathLike[str], *, abi: int,
            env: Mapping[str, str] | None = None, label: str = "",
            tier: SandboxTier = SandboxTier.FULL, visible: Iterable[str] = ()) -> Confinement:
    """The confinement for one program; `abi` 0 with mode off gives only the scrubbed env.

    `visible` names paths a command the person configured needs (an MCP server's program and
    script): they stay readable where the child empties `/tmp` and `/run`.

    Raises OSError when Landlock refuses the ruleset or no seccomp filter can
    be built for this machine (the caller fails closed).
    """
    source = os.environ if env is None else env  # where the person's stores are, unscrubbed
    child_env = scrub_env(source, policy.env_allow)
    if policy.mode is SandboxMode.OFF:
        return Confinement(env=child_env)
    root = os.path.realpath(workspace)
    tmpdir = tempfile.mkdtemp(prefix=f"normalize-{label or 'run'}-", dir=temp_parent())
    for name in ("TMPDIR", "TMP", "TEMP"):
        child_env[name] = tmpdir
    confinement = Confinement(env=child_env, tmpdir=tmpdir)
    try:
        ruleset = _ruleset(policy, root, tmpdir, abi, source, tier)
        confinement._ruleset = ruleset
        if tier is SandboxTier.LANDLOCK:
            plan = _filtered_plan(policy, ruleset)
        else:
            plan = _plan(policy, root, tmpdir, source, ruleset, visible)
        # both tiers: the read-only binds hold only the repositories that exist at the start;
        # the guard also refuses making one, and moving a directory that holds one
        confinement.guard = WriteGuard(_protection(policy, root, tmpdir, child_env))
        plan.guard = confinement.guard.preexec
        confinement._plan = plan
        if policy.hosts and not policy.network:
            _proxied(confinement, plan, ruleset, policy.hosts)
        confinement.preexec = plan.preexec()
    except BaseException:
        confinement.close()
        raise
    return confinement


def _protection(policy: SandboxPolicy, root: str, tmpdir: str,
                env: Mapping[str, str]) -> Protection:
    """What the write guard lets programs change: what Landlock lets them write (the same in
    both tiers), minus every protected name in the workspace and every hidden place."""
    writable = [tmpdir, *policy.writable, *(d for d in BUILD_DEVICES if d in PRIVATE_TMPFS)]
    if policy.mode is SandboxMode.WORKSPACE:
        writable.append(root)
    devices = [d for d in BUILD_DEVICES if d not in PRIVATE_TMPFS]
    return Protection.of(root, writable, devices, _hidden(policy, env))


def _filtered_plan(policy: SandboxPolicy, ruleset: landlock.Ruleset) -> ChildPlan:
    """The landlock tier: no namespace; Landlock, then the seccomp filter."""
    program = seccomp.sandbox_filter(network=policy.network,
                                     tcp_rules=ruleset.denies_tcp).build()
    return ChildPlan(ruleset_fd=ruleset.fd, seccomp=program)
