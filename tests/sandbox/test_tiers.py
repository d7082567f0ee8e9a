"""The landlock tier: its seccomp filter, and normalize where namespaces are restricted.

The restricted machines are built here with tests/sandbox/restricted.py:
`docker` (Docker's default seccomp profile) and `apparmor` (Ubuntu 24.04's
`apparmor_restrict_unprivileged_userns`, which GitHub's ubuntu-latest inherits).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import FULL_TIER, Listener, Site, UnixListener, make_site, restricted

from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock, seccomp
from normalize.sandbox.confinement import _readable

KINDS = ["docker", "apparmor"]

CHILD = r'''
import ctypes, errno, json, os, socket, subprocess, sys, threading
nr = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def call(name, *args):
    r = libc.syscall(ctypes.c_long(nr[name]), *[ctypes.c_long(a) for a in args])
    return "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()]
def sock(*args):
    try:
        socket.socket(*args).close()
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
def ioctl(request):
    fd = os.open("/dev/null", os.O_RDWR)
    return call("ioctl", fd, request, 0)
def fastopen():
    s = socket.socket()
    try:
        s.sendto(b"x", 0x20000000, ("127.0.0.1", int(sys.argv[2])))
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]
t = threading.Thread(target=lambda: None); t.start(); t.join()
a, b = socket.socketpair()
print(json.dumps({
    "unix": sock(socket.AF_UNIX), "udp": sock(socket.AF_INET, socket.SOCK_DGRAM),
    "tcp": sock(socket.AF_INET, socket.SOCK_STREAM),
    "tcp6": sock(socket.AF_INET6, socket.SOCK_STREAM | socket.SOCK_CLOEXEC),
    "sctp": sock(socket.AF_INET, socket.SOCK_STREAM, 132),
    "netlink": sock(socket.AF_NETLINK, socket.SOCK_RAW), "packet": sock(17, socket.SOCK_RAW),
    "unshare": call("unshare", 0x10000000), "setns": call("setns", -1, 0),
    "clone_ns": call("clone", 0x10000000 | 0x00010000, 0, 0, 0, 0), "clone3": call("clone3", 0, 0),
    "ptrace": call("ptrace", 0xFFFF, 0, 0, 0), "keyctl": call("keyctl", 0, -3, 0),
    "bpf": call("bpf", -1, 0, 0), "io_uring": call("io_uring_setup", 1, 0),
    "perf": call("perf_event_open", 0, 0, -1, -1, 0),
    "handle": call("open_by_handle_at", -100, 0, 0),
    "tiocsti": ioctl(0x5412), "tioclinux": ioctl(0x541C), "fastopen": fastopen(),
    "socketpair": "ok", "thread": "ok",
    "subprocess": subprocess.run(["true"]).returncode,
}))
'''


def in_landlock_tier(tmp_path: Path, port: int, *, network: bool) -> dict[str, Any]:
    """What the child script sees when started confined in the landlock tier."""
    numbers = {name: seccomp.syscall_number(name) for name in (
        "unshare", "setns", "clone", "clone3", "ptrace", "keyctl", "bpf", "io_uring_setup",
        "perf_event_open", "ioctl", "open_by_handle_at")}
    confinement = confine(SandboxPolicy(network=network), tmp_path, abi=landlock.abi_version(),
                          label="tiers", tier=SandboxTier.LANDLOCK)
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(numbers), str(port)],
                              env=confinement.env, preexec_fn=confinement.preexec, cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)
    finally:
        confinement.close()
    assert proc.returncode == 0, proc.stderr
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


REFUSED = ("unshare", "setns", "clone_ns", "ptrace", "keyctl", "bpf", "io_uring", "perf",
           "handle", "tiocsti", "tioclinux")


def test_the_filter_refuses_what_landlock_cannot(tmp_path: Path, listener: Listener) -> None:
    seen = in_landlock_tier(tmp_path, listener.port, network=False)
    assert {name: seen[name] for name in REFUSED} == dict.fromkeys(REFUSED, "EPERM")
    assert seen["clone3"] == "ENOSYS"  # so the C library falls back to clone, which is checked
    for family in ("unix", "udp", "sctp", "netlink", "packet", "fastopen"):
        assert seen[family] == "EPERM", (family, seen)
    assert (seen["tcp"], seen["tcp6"]) == ("ok", "ok")  # Landlock's TCP rules refuse connect
    assert (seen["socketpair"], seen["thread"], seen["subprocess"]) == ("ok", "ok", 0)
    assert listener.accepted == 0


def test_with_network_udp_and_netlink_work_but_unix_sockets_stay_refused(
        tmp_path: Path) -> None:
    seen = in_landlock_tier(tmp_path, 9, network=True)  # (fast open may connect: not to ours)
    assert (seen["udp"], seen["netlink"], seen["tcp"]) == ("ok", "ok", "ok")
    assert (seen["unix"], seen["packet"], seen["unshare"]) == ("EPERM", "EPERM", "EPERM")


def test_a_call_through_a_foreign_architecture_kills_the_process() -> None:
    machine = seccomp.arch()
    if machine is None:
        pytest.skip("no seccomp filter for this machine")
    other = next(name for name in seccomp.ARCHES if name != machine)
    code = ("import sys; from normalize.sandbox import seccomp\n"
            f"seccomp.installer(seccomp.Filter().build({other!r}))()\n"
            "print('still alive')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == -signal.SIGSYS, proc
    assert "still alive" not in proc.stdout


def normalize_cli(kind: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*restricted(kind), sys.executable, "-m", "normalize.cli.app", *args],
                          env=env, capture_output=True, text=True, timeout=120, check=False,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("kind", KINDS)
def test_sandbox_check_names_the_landlock_tier(site: Site, kind: str) -> None:
    proc = normalize_cli(kind, "sandbox", "check", env=site.env)
    assert proc.returncode == 0, proc.stderr
    assert "tier:       landlock (no full tier:" in proc.stdout
    assert "enforces:   .git (at any depth, any spelling, a new one too" in proc.stdout
    assert ".normalize and the hidden places: every change refused at the call" in proc.stdout
    assert "does not:   each path change is a round trip" in proc.stdout
    assert "does not:   /dev/shm is shared" in proc.stdout
    found = json.loads(normalize_cli(kind, "sandbox", "check", "--json", env=site.env).stdout)
    assert found["tier"] == "landlock" and found["available"]
    if FULL_TIER:  # the same machine, unrestricted
        unrestricted = subprocess.run([sys.executable, "-m", "normalize.cli.app", "sandbox",
                                       "check", "--json"], env=site.env, capture_output=True,
                                      text=True, timeout=120, check=False)
        full = json.loads(unrestricted.stdout)
        assert full["tier"] == "full"  # prevention there too, the binds beneath it
        assert any(line.startswith(".git (at any depth, any spelling, a new one too")
                   for line in full["enforced"]), full


@pytest.mark.parametrize("kind", KINDS)
def test_ci_run_check_runs_the_tests_confined_and_passes(site: Site, kind: str) -> None:
    proc = normalize_cli(kind, "run", "check", "--json", "-w", str(site.ws), env=site.env)
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    finished = [e for e in events if e.get("type") == "action_finished"]
    assert [(e["command"], e["status"]) for e in finished] == [("test", "success")]
    assert "1 passed" in finished[0]["preview"]
    notices = [line for line in proc.stderr.splitlines() if "sandbox tier landlock" in line]
    assert len(notices) == 1 and "/dev/shm is shared" in notices[0], proc.stderr


@pytest.fixture
def unix_listener() -> Iterator[UnixListener]:
    server = UnixListener()
    yield server
    server.close()


def escapes(site: Site, port: int, unix_path: str) -> list[str]:
    out = site.outside
    connect = "import socket; s = socket.socket({family}); s.settimeout(3); s.connect({where!r})"
    return [
        f"run python3 -c \"open({str(out / 'written')!r}, 'w').write('x')\"",
        "run python3 -c \"" + connect.format(family="", where=("127.0.0.1", port)) + "\"",
        "run python3 -c \"" + connect.format(family="socket.AF_UNIX", where=unix_path) + "\"",
        ("run python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
         f".sendto(b'x', ('127.0.0.1', {port}))\""),
        "run python3 -c \"open('inside.txt', 'w').write('ok')\"",
        "done tried",
    ]


@pytest.mark.parametrize("kind", KINDS)
def test_a_program_still_cannot_write_outside_or_connect(
        tmp_path: Path, kind: str, listener: Listener, unix_listener: UnixListener) -> None:
    site = make_site(tmp_path)
    site.prefix = restricted(kind)
    proc, finished = site.agent(escapes(site, listener.port, unix_listener.path))
    assert proc.returncode == 0, proc.stderr
    assert "sandbox tier landlock" in proc.stderr
    *refused, inside = finished
    assert [r["status"] for r in refused] == ["error"] * 4, refused
    assert "Permission denied" in refused[0]["preview"]
    assert all("PermissionError" in r["preview"] for r in refused[1:]), refused
    assert list(site.outside.iterdir()) == []
    assert (listener.accepted, unix_listener.accepted) == (0, 0)
    assert inside["status"] == "success" and (site.ws / "inside.txt").read_text() == "ok"


@pytest.mark.parametrize(("variable", "where"), [("NORMALIZE_HOME", ".normalize-home"),
                                                 ("NORMALIZE_CONFIG", "conf")])
def test_state_inside_the_workspace_is_refused_in_the_landlock_tier(
        site: Site, variable: str, where: str) -> None:
    site.prefix = restricted("docker")
    proc, finished = site.agent(["run touch ran.txt", "done"],
                                extra_env={variable: str(site.ws / where)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"normalize: error: {variable}: "), proc.stderr
    assert "inside the workspace" in lines[0] and "landlock" in lines[0]
    assert finished == [] and not (site.ws / "ran.txt").exists()


def test_state_outside_the_workspace_runs_in_the_landlock_tier(site: Site) -> None:
    site.prefix = restricted("apparmor")
    proc, finished = site.agent(["run touch ran.txt", "done"])
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "success" and (site.ws / "ran.txt").exists()



def test_a_link_into_a_hidden_directory_gets_no_read_rule(tmp_path: Path) -> None:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / ".ssh" / "id_rsa").write_text("key")
    (tmp_path / "home" / "id").symlink_to(tmp_path / "home" / ".ssh" / "id_rsa")
    hidden = {str(tmp_path / "home" / ".ssh")}
    rules = set(_readable(str(tmp_path / "home"), hidden))
    assert rules == set()  # the link resolves into .ssh, and .ssh itself is hidden


TERMINAL = r'''
import os, sys
for mode in (os.O_WRONLY, os.O_RDONLY):
    try:
        os.write(os.open(sys.argv[1], mode | os.O_NOCTTY), b"fake line\n")
        print("opened")
    except OSError as e:
        print(type(e).__name__)
'''


def test_the_landlock_tier_reaches_no_terminal(tmp_path: Path) -> None:
    master, slave = os.openpty()
    try:
        confinement = confine(SandboxPolicy(), tmp_path, abi=landlock.abi_version(),
                              label="tiers", tier=SandboxTier.LANDLOCK)
        try:
            proc = subprocess.run([sys.executable, "-c", TERMINAL, os.ttyname(slave)],
                                  env=confinement.env, preexec_fn=confinement.preexec,
                                  capture_output=True, text=True, timeout=60, check=False)
        finally:
            confinement.close()
        assert proc.stdout.split() == ["PermissionError", "PermissionError"], proc
        os.set_blocking(master, False)
        with pytest.raises(BlockingIOError):
            os.read(master, 100)  # nothing reached the terminal
    finally:
        os.close(master)
        os.close(slave)


def test_the_write_guards_filter_holds_alone_against_foreign_and_x32_calls() -> None:
    """The full tier installs no other filter: the guard's own kills a foreign architecture
    and refuses x32 (the same calls under other numbers, undecided otherwise)."""
    machine = seccomp.arch()
    if machine is None:
        pytest.skip("no seccomp filter for this machine")
    other = next(name for name in seccomp.ARCHES if name != machine)
    code = ("from normalize.sandbox import seccomp, writeguard\n"
            f"seccomp.installer(writeguard.guard_filter({other!r}))()\n"
            "print('still alive')\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == -signal.SIGSYS, proc
    assert "still alive" not in proc.stdout
    libc = ctypes.CDLL(None, use_errno=True)
    if machine != "x86_64" or libc.syscall(0x40000000 | 39) < 0:  # x32 getpid
        return  # (most kernels are built without x32: nothing to refuse)
    x32 = ("import ctypes, os\nfrom normalize.sandbox import seccomp, writeguard\n"
           "c = ctypes.CDLL(None, use_errno=True)\n"
           "seccomp.installer(writeguard.guard_filter())()\n"
           "print(c.syscall(0x40000000 | 39), ctypes.get_errno())\n")
    proc = subprocess.run([sys.executable, "-c", x32], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stdout.split() == ["-1", str(errno.ENOSYS)], proc
