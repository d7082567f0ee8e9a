"""The landlock tier's write guard, program by program: what a build does still works, and
neither a race on the path nor a detour through /proc, a link or a filter of the program's
own reaches a protected place. Real programs, confined as `run_process` confines them."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import FULL_TIER, git

from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock


def confined(ws: Path, code: str, *args: str,
             tier: SandboxTier = SandboxTier.LANDLOCK) -> tuple[dict[str, Any], list[str]]:
    """Run `code` with python3 in `tier`; its JSON, and the refused paths."""
    confinement = confine(SandboxPolicy(), ws, abi=landlock.abi_version(), label="guard",
                          tier=tier)
    try:
        proc = subprocess.run([sys.executable, "-c", code, *args], cwd=ws,
                              env=confinement.env, preexec_fn=confinement.preexec,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120, check=False)
    finally:
        confinement.close()
    assert proc.returncode == 0, proc.stderr
    assert confinement.guard is not None
    return json.loads(proc.stdout.splitlines()[-1]), confinement.guard.refused


def tree_hash(path: Path) -> str:
    digest = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        digest.update(str(item.relative_to(path)).encode())
        if item.is_file() and not item.is_symlink():
            digest.update(item.read_bytes())
    return digest.hexdigest()


def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    return ws


BUILD = r'''
import errno, json, os, stat, subprocess, sys, tarfile, threading
out = {}
def err(f):
    try:
        f()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
os.umask(0o077)
open("private.txt", "w").write("x")
os.mkdir("private.d", 0o777)
out["modes"] = [oct(os.stat(p).st_mode & 0o777) for p in ("private.txt", "private.d")]
os.umask(0o022)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b"anonymous")
os.link(f"/proc/self/fd/{fd}", "from-tmpfile.txt", follow_symlinks=True)
open("a", "w").write("a"); open("b", "w").write("b")
os.replace("a", "c")
os.symlink("c", "to-c"); open("to-c", "a").write("+")
os.truncate("b", 0); os.chmod("b", 0o600); os.utime("b", (1, 2))
os.mkfifo("pipe")
reader = threading.Thread(target=lambda: out.setdefault("fifo", open("pipe").read()))
reader.start(); open("pipe", "w").write("through a fifo"); reader.join()
with tarfile.open(sys.argv[1]) as tar:
    tar.extractall("unpacked")
out["tar"] = sorted(os.listdir("unpacked/pkg"))
out["stdout"] = open("/dev/stdout", "w").write("to the pipe\n")
open(os.path.join(os.environ["TMPDIR"], "scratch"), "w").write("t")
out["files"] = {n: open(n).read() for n in ("from-tmpfile.txt", "c", "b")}
out["slash"] = [err(lambda: open("nd/", "w")), err(lambda: os.unlink("b/"))]
out["exist_ok"] = [err(lambda: os.makedirs(p, exist_ok=True))
                   for p in (os.path.expanduser("~"), "/usr/bin", ".git/objects")]
print(json.dumps(out))
'''


def test_what_a_build_does_still_works(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for i in range(50):
        (pkg / "sub" / f"m{i}.py").write_text(str(i))
    (pkg / "link").symlink_to("sub/m1.py")
    with tarfile.open(tmp_path / "pkg.tar", "w") as tar:
        tar.add(pkg, "pkg")
    before = tree_hash(ws / ".git")
    seen, refused = confined(ws, BUILD, str(tmp_path / "pkg.tar"))
    assert seen["modes"] == ["0o600", "0o700"]  # the program's umask, not normalize's
    assert seen["fifo"] == "through a fifo" and seen["tar"] == ["link", "sub"]
    assert seen["files"] == {"from-tmpfile.txt": "anonymous", "c": "a+", "b": ""}
    assert seen["slash"] == ["EISDIR", "ENOTDIR"]  # "name/" is a directory, as the kernel says
    assert seen["exist_ok"] == ["ok"] * 3  # EEXIST first, as the kernel answers it
    assert len(os.listdir(ws / "unpacked" / "pkg" / "sub")) == 50
    assert refused == [] and tree_hash(ws / ".git") == before


ESCAPES = r'''
import ctypes, errno, json, os, threading, time
out = {}
def attempt(name, f):
    try:
        f(); out[name] = "done"
    except OSError as exc:
        out[name] = errno.errorcode[exc.errno]
libc = ctypes.CDLL(None, use_errno=True)
# the path flips between a harmless name and .git/config while opens go on
buf = ctypes.create_string_buffer(b"harmless.txt\0" + b"\0" * 16)
stop = []
def flip():
    while not stop:
        ctypes.memmove(buf, b".git/config\0", 12)
        ctypes.memmove(buf, b"harmless.txt\0", 13)
t = threading.Thread(target=flip); t.start()
for _ in range(3000):
    fd = libc.open(buf, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    if fd >= 0:
        os.write(fd, b"flip\n"); os.close(fd)
stop.append(1); t.join()
# a symlink swapped under the name being opened
open("plain", "w").close()
def swap():
    while not stop[1:]:
        try:
            os.symlink(".git/config", "swap.tmp"); os.replace("swap.tmp", "x")
            open("plain.tmp", "w").close(); os.replace("plain.tmp", "x")
        except OSError:
            pass
stop.clear(); t = threading.Thread(target=swap); t.start()
for _ in range(2000):
    try:
        with open("x", "a") as fh:
            fh.write("swap\n")
    except OSError:
        pass
stop.extend([1, 1]); t.join()
ro = os.open(".git/config", os.O_RDONLY)
attempt("proc_fd_reopen", lambda: open(f"/proc/self/fd/{ro}", "a").write("x"))
attempt("dev_fd_reopen", lambda: open(f"/dev/fd/{ro}", "a").write("x"))
attempt("fchmod", lambda: os.chmod(ro, 0o777))
attempt("link_fd", lambda: os.link(f"/proc/self/fd/{ro}", "hard", follow_symlinks=True))
attempt("proc_cwd", lambda: open("/proc/self/cwd/.git/config", "a").write("x"))
nr = {"x86_64": (437, 317, 316), "aarch64": (437, 277, 276)}[os.uname().machine]
def call(*args):
    if libc.syscall(*args) < 0:
        raise OSError(ctypes.get_errno(), "")
attempt("exchange", lambda: call(nr[2], -100, b"plain", -100, b".git", 2))
attempt("openat2", lambda: call(nr[0], -100, b"y", 0, 0))
prog = (ctypes.c_ubyte * 8)(0x06, 0, 0, 0, 0, 0, 0xFF, 0x7F)  # ret ALLOW
fprog = ctypes.create_string_buffer(ctypes.sizeof(ctypes.c_ushort) + 6 + 8)
ctypes.memmove(fprog, (ctypes.c_ushort * 1)(1), 2)
ctypes.memmove(ctypes.addressof(fprog) + 8, ctypes.byref(ctypes.c_void_p(ctypes.addressof(prog))),
               8)
attempt("own_listener", lambda: call(nr[1], 1, 1 << 3, fprog))
print(json.dumps(out))
'''


def test_no_race_or_detour_reaches_a_protected_place(tmp_path: Path) -> None:
    ws = repo(tmp_path)
    before = tree_hash(ws / ".git")
    seen, refused = confined(ws, ESCAPES)
    assert tree_hash(ws / ".git") == before
    for name in ("proc_fd_reopen", "dev_fd_reopen", "fchmod", "link_fd", "proc_cwd",
                 "exchange"):
        assert seen[name] == "EACCES", (name, seen)
    assert seen["openat2"] == "ENOSYS"  # the C library falls back to openat, decided
    assert seen["own_listener"] == "EPERM"  # its listener would be asked before ours
    assert ".git/config" in refused
    assert (ws / "harmless.txt").read_text().count("flip") > 0


ATTRIBUTES = r'''
import errno, fcntl, json, os, struct
out = {}
def err(f):
    try:
        f()
        return "ok"
    except OSError as exc:
        return errno.errorcode[exc.errno]
def by_fd(path, f):
    fd = os.open(path, os.O_RDONLY)  # reading a protected file is allowed; changing it, not
    try:
        f(fd)
    finally:
        os.close(fd)
flags = lambda fd: fcntl.ioctl(fd, 0x40086602, struct.pack("l", 0))
for where in (".git/config", "mine.txt"):
    out[where] = {
        "own": err(lambda: os.chown(where, os.getuid(), os.getgid())),  # no change: unasked
        "chown": err(lambda: os.chown(where, 65534, -1)),
        "lchown": err(lambda: os.lchown(where, -1, 65534)),
        "fchown": err(lambda: by_fd(where, lambda fd: os.fchown(fd, 65534, os.getgid()))),
        "xattr": err(lambda: os.setxattr(where, "user.mark", b"1")),
        "fxattr": err(lambda: by_fd(where, lambda fd: os.setxattr(fd, "user.mark", b"2"))),
        "rmxattr": err(lambda: os.removexattr(where, "user.mark")),
        "acl": err(lambda: os.setxattr(where, "security.capability", b"\x00" * 20)),
        "utime": err(lambda: os.utime(where, (1, 1))),
        "futimens": err(lambda: by_fd(where, lambda fd: os.utime(fd, (2, 2)))),
        "chattr": err(lambda: by_fd(where, flags)),
    }
print(json.dumps(out))
'''


def _attributes(path: Path) -> tuple[object, ...]:
    info = path.stat()
    return (info.st_mode, info.st_uid, info.st_gid, info.st_mtime_ns, os.listxattr(path))


@pytest.mark.parametrize("tier", [SandboxTier.LANDLOCK, SandboxTier.FULL])
def test_owner_attributes_times_and_flags_of_a_repository_are_refused(tmp_path: Path,
                                                                      tier: SandboxTier) -> None:
    if tier is SandboxTier.FULL and not FULL_TIER:
        pytest.skip("no full tier here")
    ws = repo(tmp_path)
    (ws / "mine.txt").write_text("x")
    before = _attributes(ws / ".git" / "config")
    out, refused = confined(ws, ATTRIBUTES, tier=tier)
    theirs = out[".git/config"]
    assert theirs.pop("chattr") == "EPERM", out  # refused by the filter, whatever the file
    # a chown to one's own ids changes no owner: let through unasked (the full tier's
    # read-only bind still says no to it)
    assert theirs.pop("own") == ("ok" if tier is SandboxTier.LANDLOCK else "EROFS"), out
    assert set(theirs.values()) == {"EACCES"}, out
    assert ".git/config" in refused
    assert _attributes(ws / ".git" / "config") == before
    mine = out["mine.txt"]  # the workspace's own files: each change made (or the kernel's no)
    made = ("own", "utime", "futimens")
    assert {k: mine[k] for k in made} == dict.fromkeys(made, "ok"), mine
    given = "ok" if os.geteuid() == 0 else "EPERM"  # to another uid: the kernel's answer
    assert {mine[k] for k in ("chown", "lchown", "fchown")} == {given}, mine
    assert mine["acl"] == mine["chattr"] == "EPERM", mine
    if mine["xattr"] == "ok":  # (a file system with user attributes)
        assert mine["fxattr"] == mine["rmxattr"] == "ok", mine
