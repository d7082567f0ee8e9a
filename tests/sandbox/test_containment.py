"""What a program can reach beyond files, played as the model would: auto, no person, CI=true.

Nothing it starts outlives its action; it reaches no terminal, no socket
outside the workspace, no other task's temp files and none of normalize's own
state, even where that lives inside the workspace.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import tty
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sandbox_support import FULL_TIER, CountingServer, Site, alive_with, restricted, write_action

from normalize.sandbox import scrub_env
from normalize.sandbox.child import ChildPlan

LOOP = "import sys, time\nwhile True:\n    open({log!r}, 'a').write('x')\n    time.sleep(0.02)\n"

SPAWNER = """\
import os, subprocess, sys, time
token = sys.argv[1]
subprocess.Popen([sys.executable, '-c', {bg!r}, token])
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, '-c', {daemon!r}, token])
    os._exit(0)
os.wait()
deadline = time.monotonic() + 20
while time.monotonic() < deadline and not all(
        os.path.exists(n) and os.path.getsize(n) for n in ('bg.log', 'daemon.log')):
    time.sleep(0.01)
print('both running')
"""


def spawner(log_dir: str = "") -> str:
    return SPAWNER.format(bg=LOOP.format(log=os.path.join(log_dir, "bg.log")),
                          daemon=LOOP.format(log=os.path.join(log_dir, "daemon.log")))


def sizes(*paths: Path) -> list[int]:
    return [p.stat().st_size for p in paths]


def still(paths: list[Path]) -> bool:
    """True when none of `paths` grows over a few of the writers' periods (0.02 s)."""
    before = sizes(*paths)
    time.sleep(0.3)
    return sizes(*paths) == before


def test_a_daemon_and_a_background_child_end_with_their_action(site: Site) -> None:
    token = f"leftover-{site.root.parent.name}-{site.root.name}"
    proc, finished = site.agent([write_action("spawn.py", spawner()),
                                 f"run python3 spawn.py {token}", "done"])
    assert proc.returncode == 0, proc.stderr
    result = finished[1]
    assert result["status"] == "success" and "both running" in result["preview"], result
    assert alive_with(token) == []  # checked by pid, right after normalize exited
    logs = [site.ws / "bg.log", site.ws / "daemon.log"]
    assert all(p.stat().st_size for p in logs)
    assert still(logs)
    assert result["data"]["killed_leftovers"] == 2
    assert "left 2 process(es) running" in result["preview"]  # the model is told


def test_the_subreaper_kills_what_is_left_without_a_namespace(tmp_path: Path) -> None:
    token = f"subreaper-{tmp_path.parent.name}-{tmp_path.name}"
    (tmp_path / "spawn.py").write_text(spawner(str(tmp_path)))
    plan = ChildPlan(pid_namespace=False)  # no unshare: what the Landlock-only tier runs
    try:
        done = subprocess.run([sys.executable, "spawn.py", token], cwd=tmp_path,
                              preexec_fn=plan.preexec(), capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0 and "both running" in done.stdout, done.stderr
        assert plan.leftovers() == 2
    finally:
        plan.close()
    assert alive_with(token) == []
    assert still([tmp_path / "bg.log", tmp_path / "daemon.log"])


def test_the_status_and_signals_pass_through_the_reaper(tmp_path: Path) -> None:
    from normalize.tools.run import run_process

    def sh(command: str) -> tuple[int | None, str | None]:
        outcome = run_process(["/bin/sh", "-c", command], cwd=tmp_path, timeout=30)
        return outcome.exit_code, outcome.signal_name

    assert sh("exit 3") == (3, None)
    assert sh("kill -TERM $$") == (143, "SIGTERM")
    assert sh("kill -KILL $$") == (137, "SIGKILL")
    started = time.monotonic()
    outcome = run_process(["/bin/sh", "-c", "sleep 30"], cwd=tmp_path, timeout=0.5, grace=5)
    assert outcome.timed_out and outcome.signal_name == "SIGTERM"  # relayed, not escalated
    assert time.monotonic() - started < 5


def wait_for(check: Callable[[], object], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.02)


def test_killing_normalize_kills_the_namespace(site: Site) -> None:
    token = f"orphan-{site.root.parent.name}-{site.root.name}"
    (site.ws / "b").mkdir()
    argv = site.argv([write_action("spawn.py", spawner("b") + HOLD),
                      f"run python3 spawn.py {token}", "done"])
    proc = subprocess.Popen(argv, cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: (site.ws / "b" / "held").exists(), 120)
        assert len(alive_with(token)) == 3  # the program, its background child, the daemon
    finally:
        proc.kill()  # SIGKILL: normalize cannot clean up after itself
        proc.wait()
    wait_for(lambda: not alive_with(token), 10)
    assert still([site.ws / "b" / "bg.log", site.ws / "b" / "daemon.log"])


HOLD = "open('b/held', 'w').close()\ntime.sleep(120)\n"


PTY_PROBE = """\
import os
marker = ''.join(map(chr, [70, 65, 75, 69, 45, 68, 79, 78, 69])) + chr(10)
osc = chr(27) + ']52;c;cHduZWQ=' + chr(7) + chr(27) + ']0;owned' + chr(7)
for path in ('/dev/tty', {pts!r}):
    for mode in (os.O_WRONLY, os.O_RDONLY):
        try:
            fd = os.open(path, mode | os.O_NOCTTY | os.O_NONBLOCK)
        except OSError as exc:
            print('refused', path, exc.strerror)
            continue
        print('GOT' + '-IN', path)
        if mode == os.O_WRONLY:
            os.write(fd, (osc + marker).encode())
        else:
            print('READ', os.read(fd, 100))
"""


def test_the_terminal_is_out_of_reach(site: Site) -> None:
    master, slave = os.openpty()
    tty.setraw(slave)
    pts = os.ttyname(slave)
    os.write(master, b"typed-keys")  # what the person typed, waiting to be read
    argv = site.argv([write_action("pty_probe.py", PTY_PROBE.format(pts=pts)),
                      "run python3 pty_probe.py", "done"])
    seen = bytearray()
    proc = subprocess.Popen(argv, cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                            stdout=slave, stderr=slave)
    reader = threading.Thread(target=_drain, args=(master, proc, seen), daemon=True)
    reader.start()
    proc.wait(timeout=300)
    reader.join(timeout=10)
    try:
        assert proc.returncode == 0, bytes(seen)[-2000:]
        assert b"pty_probe" in seen  # normalize itself writes to the terminal
        assert b"refused /dev/tty" in seen and f"refused {pts}".encode() in seen
        assert b"GOT-IN" not in seen
        assert b"FAKE-DONE" not in seen and b"\x1b]52" not in seen and b"\x1b]0;owned" not in seen
        os.set_blocking(slave, False)
        assert os.read(slave, 100) == b"typed-keys"  # no program took the person's keys
    finally:
        os.close(master)
        os.close(slave)


def _drain(master: int, proc: subprocess.Popen[bytes], seen: bytearray) -> None:
    while True:
        ready, _, _ = select.select([master], [], [], 0.05)
        if ready:
            try:
                seen += os.read(master, 65536)
            except OSError:
                return
        elif proc.poll() is not None:
            return


class UnixServer(CountingServer):
    """A pathname Unix socket server (a docker.sock stand-in) counting its connections."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        super().__init__(sock, reply=b"HTTP/1.0 200 OK\r\n\r\ndaemon-secret")


CONNECT = ("run python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); "
           "s.connect('{path}'); print(s.recv(100))\"")


@pytest.mark.parametrize("where", ["outside", "home"])
def test_a_unix_socket_outside_the_workspace_cannot_be_reached(site: Site, where: str) -> None:
    path = {"outside": site.outside / "docker.sock",
            "home": site.home / ".docker" / "run" / "docker.sock"}[where]
    server = UnixServer(path)
    try:
        check = socket.socket(socket.AF_UNIX)  # the stand-in answers outside the sandbox
        check.connect(str(path))
        assert b"daemon-secret" in check.recv(100)
        check.close()
        proc, finished = site.agent([CONNECT.format(path=path), "done"])
    finally:
        server.close()
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "error", finished[0]
    assert "daemon-secret" not in finished[0]["preview"]
    assert server.accepted == 1  # the test's own connection only


@pytest.fixture
def agent_socket(site: Site) -> Iterator[str]:
    if shutil.which("ssh-agent") is None or shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-agent is not installed (.ci/run installs openssh-client)")
    sock = str(site.outside / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(sock), 10)
        key = site.outside / "key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "person@host",
                        "-f", str(key)], check=True)
        env = {**os.environ, "SSH_AUTH_SOCK": sock}
        subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True, capture_output=True)
        listed = subprocess.run(["ssh-add", "-L"], env=env, capture_output=True, text=True)
        assert "person@host" in listed.stdout  # the agent holds the person's key
        yield sock
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)


def test_ssh_add_finds_no_agent(site: Site, agent_socket: str) -> None:
    env = {"SSH_AUTH_SOCK": agent_socket}
    proc, finished = site.agent(["run ssh-add -L", "done"], env_allow=("SSH_AUTH_SOCK",),
                                extra_env=env)  # even passed on, the socket is out of reach
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "error"
    assert "person@host" not in finished[0]["preview"]
    proc, finished = site.agent(["run printenv SSH_AUTH_SOCK", "done"], extra_env=env)
    assert finished[0]["exit_code"] == 1 and agent_socket not in finished[0]["preview"]


def test_agent_variables_are_scrubbed_unless_allowed() -> None:
    env = {"SSH_AUTH_SOCK": "/tmp/a", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/b",
           "DOCKER_HOST": "unix:///run/docker.sock", "DISPLAY": ":0", "TMUX": "/tmp/t,1,0",
           "KRB5CCNAME": "FILE:/tmp/k", "EDITOR": "vi"}
    assert scrub_env(env) == {"EDITOR": "vi"}
    assert scrub_env(env, ["DISPLAY"]) == {"EDITOR": "vi", "DISPLAY": ":0"}


TMP_WRITER = """\
import os, pathlib, time
tmp = os.environ['TMPDIR']
pathlib.Path(tmp, 'secret').write_text('task-a-secret')
print('mode', oct(os.stat(tmp).st_mode & 0o777))
pathlib.Path('tmpdir.txt').write_text(tmp)
deadline = time.monotonic() + 120
while not os.path.exists('release') and time.monotonic() < deadline:
    time.sleep(0.02)
"""


TIERS = {"landlock": restricted("docker"), **({"full": []} if FULL_TIER else {})}


@pytest.mark.parametrize("tier", TIERS)
def test_another_tasks_temp_dir_is_unreadable(site: Site, tier: str) -> None:
    site.prefix = TIERS[tier]  # the landlock tier hides the parent of every task's TMPDIR
    other = Site(site.root, site.root / "ws_b", site.outside, site.home, site.store, site.env,
                 prefix=site.prefix)
    other.ws.mkdir()
    first = subprocess.Popen(site.argv([write_action("w.py", TMP_WRITER), "run python3 w.py",
                                        "done"]),
                             cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: (site.ws / "tmpdir.txt").exists(), 120)
        secret = Path((site.ws / "tmpdir.txt").read_text(), "secret")
        assert secret.read_text() == "task-a-secret"  # there, for task A
        read = (f"run python3 -c \"import os; print(os.listdir('{secret.parent}')); "
                f"print(open('{secret}').read())\"")
        proc, finished = other.agent([read, "done"])
    finally:
        (site.ws / "release").write_text("")
        out, err = first.communicate(timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "error"
    assert "task-a-secret" not in finished[0]["preview"]
    assert "mode 0o700" in out, err


def test_a_data_home_inside_the_workspace_is_out_of_reach(site: Site) -> None:
    home = site.ws / ".normalize-home"
    env = {"NORMALIZE_HOME": str(home)}
    (home / "config").mkdir(parents=True)
    (home / "config" / "config.toml").write_text("")
    write = ("run python3 -c \"open('.normalize-home/config/config.toml', 'w')"
             ".write('[permissions]\\nallow = [\\\"*\\\"]\\nsandbox = \\\"off\\\"\\n')\"")
    read = "run python3 -c \"import os; print(os.listdir('.normalize-home'))\""
    state = "run cat .normalize-home/index.jsonl"
    proc, finished = site.agent([write, read, state, "done"], extra_env=env)
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "error" and finished[2]["status"] == "error", finished
    assert (home / "config" / "config.toml").read_text() == ""
    # each program ran, in a sandbox that hides the data home (a refusal to run any program
    # there hid the hiding's failure once: the config directory inside it could not be covered)
    assert not any("could not be applied" in f["preview"] for f in finished), finished
    assert "config" not in finished[1]["preview"]  # an empty directory, or unreadable
    outside = site.outside / "touched"
    proc, finished = site.agent([f"run touch {outside}", "done"], extra_env=env)
    assert finished[0]["status"] == "error" and not outside.exists()  # still confined


def test_a_venv_under_tmp_stays_runnable_while_tmp_is_emptied(tmp_path: Path) -> None:
    """CI jobs make their venv under /tmp: the programs on PATH stay there, read-only."""
    import os
    import subprocess
    import sys

    from normalize.tools.run import run_process

    assert str(tmp_path).startswith("/tmp/")  # where a program sees nothing of its own
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PATH": f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    code = "import sys; print(sys.prefix); open(sys.prefix + '/x', 'w')"
    out = run_process(["python", "-c", code], cwd=ws, timeout=60, env=env, workspace=ws)
    assert out.exit_code == 1 and out.output.startswith(f"{venv}\n"), out.output
    assert "Permission denied" in out.output or "Read-only" in out.output  # seen, not written
    assert not (venv / "x").exists()


def test_naming_tmp_itself_as_visible_keeps_it_emptied(tmp_path: Path) -> None:
    """A path a program must see is bound back alone; /tmp itself is never kept whole (a
    harness's permission server names normalize's import root, which may be any directory)."""
    import tempfile

    from normalize.tools.run import run_process

    assert str(tmp_path).startswith(tempfile.gettempdir())
    other = tmp_path / "other.txt"  # under /tmp, outside the workspace
    other.write_text("another program's file\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    out = run_process(["cat", str(other)], cwd=ws, timeout=60, workspace=ws,
                      visible=[tempfile.gettempdir()])
    assert out.exit_code != 0 and "another program's file" not in out.output, out.output
