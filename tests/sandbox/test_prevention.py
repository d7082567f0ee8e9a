"""Protected paths are refused at the write, in both tiers, and nothing outlives its action.

Played as the model would misbehave: a scripted model in `auto`, non-interactive,
CI=true, through the real CLI, in the full tier (where this machine gives it)
and in the landlock tier as `tests/sandbox/restricted.py docker|apparmor` makes
it. The person's repositories are compared byte for byte (every file under
each `.git`) before and after.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import FULL_TIER, Site, alive_with, restricted, write_action

TIERS = {"docker": restricted("docker"), "apparmor": restricted("apparmor")}
if FULL_TIER:
    TIERS = {"full": [], **TIERS}

ATTACKS = {
    "objects": "shutil.rmtree('.git/objects')",
    "refs": "shutil.rmtree('.git/refs')",
    "logs": "shutil.rmtree('.git/logs')",
    "config": "open('.git/config', 'a').write('[core]\\n\\tfsmonitor = touch /tmp/owned\\n')",
    "hook": "open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\\ntouch /tmp/owned\\n');"
            " os.chmod('.git/hooks/pre-commit', 0o755)",
    "sub": "open('sub/.git/config', 'a').write('[core]\\n\\tfsmonitor = true\\n')",
    "new": "os.makedirs('made/.git'); open('made/.git/config', 'w').write('[core]\\n')",
    "spelled": "os.makedirs('.GIT/hooks'); open('.Git', 'w').write('gitdir: elsewhere')",
    "moved": "os.rename('sub', 'sub-moved')",
    "unhooked": "os.rename('sub/.git', 'loose')",
    "gitfile": "os.makedirs('w', exist_ok=True); open('w/.git', 'w').write('gitdir: ../.git\\n')",
    "linked": "os.link('.git/config', 'cfg'); open('cfg', 'a').write('x')",
    "through_link": "os.symlink('.git', 'g'); open('g/config', 'a').write('x')",
}
ATTACKER = ("import os, shutil\n"
            "for name, attack in {attacks!r}.items():\n"
            "    try:\n"
            "        exec(attack)\n"
            "        print(name, 'done')\n"
            "    except OSError as exc:\n"
            "        print(name, 'refused', exc.errno)\n")


def repositories(ws: Path) -> dict[str, str]:
    """A hash of every file (and the list of every entry) under each `.git` in `ws`."""
    found: dict[str, str] = {}
    for path in sorted(ws.rglob("*")):
        rel = path.relative_to(ws)
        if not any(part.lower() in (".git", ".normalize") for part in rel.parts):
            continue
        if path.is_symlink() or not path.is_file():
            found[str(rel)] = "dir" if path.is_dir() else "other"
        else:
            found[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _tier(site: Site, tier: str) -> Site:
    site.prefix = TIERS[tier]
    return site


def _result(finished: list[dict[str, Any]], needle: str) -> dict[str, Any]:
    return next(r for r in finished if needle in (r.get("command") or ""))


@pytest.mark.parametrize("tier", TIERS)
def test_every_write_into_a_repository_is_refused_and_nothing_changes(site: Site,
                                                                     tier: str) -> None:
    before = repositories(site.ws)
    assert any(k.startswith(".git/logs") for k in before) and "sub/.git/config" in before
    script = ATTACKER.format(attacks=ATTACKS)
    proc, finished = _tier(site, tier).agent([write_action("attack.py", script),
                                              "run python3 attack.py", "done"])
    assert proc.returncode == 0, proc.stderr
    result = _result(finished, "run python3 attack.py")
    lines = dict(line.split(" ", 1) for line in result["preview"].splitlines() if " " in line)
    # both tiers: the write guard refuses each at the call, with EACCES, and says so (in the
    # full tier the read-only binds would hold what exists, never a repository made or moved)
    assert all(lines[name] == "refused 13" for name in ATTACKS), result["preview"]
    assert result["status"] == "success", result
    refused = result["data"]["refused_writes"]
    assert ".git/config" in refused and "sub/.git/config" in refused, refused
    assert "the sandbox refused changing" in result["preview"]
    after = repositories(site.ws)
    assert not (site.ws / "made" / ".git").exists() and not (site.ws / ".GIT").exists()
    assert not (site.ws / ".Git").exists() and not (site.ws / "sub-moved").exists()
    assert not (site.ws / "loose").exists() and not (site.ws / "w" / ".git").exists()
    assert (site.ws / "sub" / ".git").is_dir()
    assert after == before


@pytest.mark.parametrize("tier", TIERS)
def test_two_tasks_in_one_workspace_never_write_each_others_changes_back(site: Site,
                                                                       tier: str) -> None:
    before = repositories(site.ws)
    # A plants while B's action starts (B's "before" would hold A's change), and B's action
    # ends after A's: a repair would have B write A's change back
    plant = ("import os, time\nopen('a-running', 'w').close()\n"
             "end = time.monotonic() + 3\nwhile time.monotonic() < end:\n"
             "    try:\n"
             "        open('.git/config', 'a').write('[core]\\n\\tfsmonitor = touch /tmp/x\\n')\n"
             "    except OSError:\n        pass\n    time.sleep(0.01)\n"
             "open('a-done', 'w').close()\nprint('planting over')\n")
    wait = ("import os, time\nend = time.monotonic() + 60\n"
            "for name in ('a-running', 'a-done'):\n"
            "    while not os.path.exists(name) and time.monotonic() < end:\n"
            "        time.sleep(0.01)\n"
            "time.sleep(3)\nopen('b.txt', 'w').write('b')\n")
    _tier(site, tier)
    first = subprocess.Popen(site.argv([write_action("plant.py", plant), "run python3 plant.py",
                                        "done"]),
                             cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    second, finished_b = site.agent([write_action("wait.py", wait), "run python3 wait.py",
                                     "done"])
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0 and second.returncode == 0, (err, second.stderr)
    finished_a = [e for e in map(json.loads, (ln for ln in out.splitlines() if ln[:1] == "{"))
                  if e.get("type") == "action_finished"]
    assert _result(finished_b, "run python3 wait.py")["status"] == "success"  # nothing to undo
    assert "planting over" in _result(finished_a, "run python3 plant.py")["preview"]
    assert repositories(site.ws) == before
    assert (site.ws / "b.txt").read_text() == "b"


DAEMON = ("import os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
          "fds = []\nfor path in ('.git/config', 'kept.txt'):\n"
          "    try:\n"
          "        fds.append(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))\n"
          "    except OSError:\n        pass\n"
          "while True:\n    time.sleep(0.1)\n"
          "    for fd in fds:\n        os.write(fd, b'later\\n')\n")
STUBBORN = ("import os, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        os.execv(sys.executable, [sys.executable, 'daemon.py', sys.argv[1]])\n"
            "    os._exit(0)\n"
            "while not os.path.exists('kept.txt') or not os.path.getsize('kept.txt'):\n"
            "    time.sleep(0.01)\nprint('daemon writing', flush=True)\n"
            "while True:\n    time.sleep(1)\n")


@pytest.mark.parametrize("tier", TIERS)
def test_a_timeout_leaves_no_daemon_and_no_later_write(site: Site, tier: str) -> None:
    token = f"stubborn-{site.root.parent.name}-{site.root.name}-{tier}"
    config = (site.ws / ".git" / "config").read_bytes()
    proc, finished = _tier(site, tier).agent([
        write_action("daemon.py", DAEMON), write_action("stubborn.py", STUBBORN),
        f"run --timeout 2 python3 stubborn.py {token}", "done"])
    assert proc.returncode == 0, proc.stderr
    result = _result(finished, "run --timeout")
    assert result["status"] == "error" and "timed out" in result["error"], json.dumps(result)
    assert "daemon writing" in result["preview"]
    assert alive_with(token) == []
    kept = site.ws / "kept.txt"
    size = kept.stat().st_size
    time.sleep(1.0)  # ten of the daemon's periods
    assert kept.stat().st_size == size
    assert (site.ws / ".git" / "config").read_bytes() == config


@pytest.mark.parametrize("tier", TIERS)
def test_the_persons_own_change_meanwhile_is_left_as_they_made_it(site: Site, tier: str) -> None:
    # no program can change .git here: what changed meanwhile is someone else's, never undone
    hold = ("import os, time\nopen('started', 'w').close()\nend = time.monotonic() + 60\n"
            "while not os.path.exists('release') and time.monotonic() < end:\n"
            "    time.sleep(0.01)\n")
    _tier(site, tier)
    run = subprocess.Popen(site.argv([write_action("hold.py", hold), "run python3 hold.py",
                                      "done"]),
                           cwd=site.ws, env=site.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (site.ws / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    config = site.ws / ".git" / "config"
    with config.open("a") as fh:  # the person, meanwhile: `git config user.name me`
        fh.write("[user]\n\tname = me\n")
    mine = config.read_bytes()
    (site.ws / "release").write_text("")
    out, err = run.communicate(timeout=300)
    assert run.returncode == 0, err
    finished = [e for e in map(json.loads, (ln for ln in out.splitlines() if ln[:1] == "{"))
                if e.get("type") == "action_finished"]
    assert _result(finished, "run python3 hold.py")["status"] == "success"
    assert config.read_bytes() == mine
    assert "left as found" in out + err
