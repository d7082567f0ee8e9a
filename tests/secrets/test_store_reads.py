"""Reads are reads; a task that cannot be created leaves nothing; stored state is private.

`normalize tasks`, `tasks show` and completion over a store holding damaged and
config-less tasks change no file (sizes, mtimes and modes compared before and
after). Only `tasks repair` and `resume` move a damaged file aside, under the
task's lock.
"""

from __future__ import annotations

import json
import os
import re
import resource
import stat
from pathlib import Path

from secret_shapes import DSN, KEY, cli

FLOW = """
[workflow]
name = "wait"
[workflow.vars]
dsn = ""
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "ask"
action = "ask Go on?"
[[workflow.steps]]
name = "note"
action = "view notes.txt"
"""


def _waiting(root: Path, home: Path) -> str:
    before = {p.name for p in (home / "tasks").glob("*.json")} if (home / "tasks").exists() \
        else set()
    proc = cli("run", "flow.toml", "--var", f"dsn={DSN}", cwd=root, home=home)
    assert proc.returncode == 4, proc.stderr
    new, = {p.name for p in (home / "tasks").glob("*.json")} - before
    return new[:-5]


def _listing(home: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and directory under `home`: (size, mtime_ns, mode)."""
    out = {}
    for path in sorted([home, *home.rglob("*")]):
        st = path.lstat()
        out[str(path.relative_to(home))] = (st.st_size if path.is_file() else 0,
                                            st.st_mtime_ns, stat.S_IMODE(st.st_mode))
    return out


def _store(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    (root / "flow.toml").write_text(FLOW)
    good, configless, damaged = (_waiting(root, home) for _ in range(3))
    tasks = home / "tasks"
    for config in (tasks / configless).glob("config-*.json"):
        config.unlink()
    (tasks / f"{damaged}.json").write_bytes(b'{"id": "' + damaged.encode() + b'", "wor')
    return root, home, {"good": good, "configless": configless, "damaged": damaged}


def test_listing_showing_and_completing_change_no_file(tmp_path: Path) -> None:
    root, home, ids = _store(tmp_path)
    before = _listing(home)
    listed = cli("tasks", cwd=root, home=home)
    listed_json = cli("tasks", "--json", cwd=root, home=home)
    shows = [cli("tasks", "show", ids[kind], *extra, cwd=root, home=home)
             for kind in ids for extra in ([], ["--json"])]
    completed = cli(cwd=root, home=home, env_extra={
        "_NORMALIZE_COMPLETE": "complete_bash", "COMP_WORDS": "normalize resume ",
        "COMP_CWORD": "2"})
    assert _listing(home) == before  # not a byte, an mtime or a mode changed
    assert listed.returncode == 0 and ids["good"] in listed.stdout
    assert ids["configless"] in listed.stdout  # listed: its state is readable
    warning, = [ln for ln in listed.stderr.splitlines() if ids["damaged"] in ln]
    assert "damaged task file" in warning and f"normalize tasks repair {ids['damaged']}" in warning
    assert {t["id"]: t["status"] for t in map(json.loads, listed_json.stdout.splitlines())} \
        == {ids["good"]: "waiting", ids["configless"]: "waiting", ids["damaged"]: "damaged"}
    assert shows[0].returncode == 0 and "s3cretpw" not in shows[0].stdout + shows[1].stdout
    assert shows[4].returncode == 0 and "damaged task file" in shows[4].stderr  # its journal's
    assert "shown from its journal" in shows[4].stderr and "s3cretpw" not in shows[4].stdout
    assert ids["good"] in completed.stdout


def test_repair_and_resume_move_damaged_files_aside_under_the_lock(tmp_path: Path) -> None:
    root, home, ids = _store(tmp_path)
    tasks = home / "tasks"
    resumed = cli("resume", ids["configless"], "--answer", "yes", cwd=root, home=home)
    assert resumed.returncode == 1
    assert "damaged task file" in resumed.stderr and "moved aside to" in resumed.stderr
    assert not (tasks / f"{ids['configless']}.json").exists()
    repaired = cli("tasks", "repair", cwd=root, home=home)
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout.startswith(f"moved {ids['damaged']}.json aside to ")
    assert sorted(p.name for p in tasks.glob("*.json")) == [f"{ids['good']}.json"]
    again = cli("tasks", "repair", cwd=root, home=home)
    assert again.stdout == "no damaged task files\n"
    done = cli("resume", ids["good"], "--answer", "yes", cwd=root, home=home)
    assert done.returncode == 0, done.stderr


def _no_task_id(text: str) -> bool:
    return re.search(r"\btask [0-9a-f]{8}\b", text) is None


def test_a_run_that_cannot_create_its_task_names_no_id_and_leaves_nothing(
        tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    (root / "flow.toml").write_text(FLOW)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")  # even root cannot make a directory below a file
    proc = cli("run", "flow.toml", cwd=root, home=blocker / "home")
    assert proc.returncode == 2  # NORMALIZE_HOME is misconfigured: a usage error, named
    line, *_ = proc.stderr.splitlines()
    assert line == (f"normalize: error: NORMALIZE_HOME={blocker / 'home'}: {blocker / 'home'} "
                    f"cannot be created ({blocker} is not a directory); point NORMALIZE_HOME "
                    "at a directory you can write"), proc.stderr
    assert _no_task_id(proc.stderr + proc.stdout)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "ws"]


def test_a_full_disk_at_creation_names_no_id_and_leaves_nothing(tmp_path: Path) -> None:
    # Simulated: RLIMIT_FSIZE fails every write past 256 bytes (EFBIG) as a full disk does.
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "flow.toml").write_text(FLOW)

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (256, 256))

    proc = cli("run", "flow.toml", cwd=root, home=home, preexec_fn=small_disk)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0].startswith(
        f"normalize: error: cannot create a task in {home / 'tasks'}: File too large")
    assert _no_task_id(proc.stderr + proc.stdout)
    assert not home.exists()  # no task file, no lock, no directory


def test_a_shared_task_store_is_warned_about_at_start(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    (root / "flow.toml").write_text(FLOW)
    (home / "tasks").mkdir(parents=True)
    os.chmod(home / "tasks", 0o755)
    proc = cli("run", "flow.toml", "--var", f"dsn={KEY}", "--json", cwd=root, home=home)
    assert proc.returncode == 4, proc.stderr
    notices = [json.loads(ln) for ln in proc.stdout.splitlines()
               if '"type":"notice"' in ln]
    warning, = [n["message"] for n in notices if "other users can read" in n["message"]]
    assert f"{home / 'tasks'} (mode 0755)" in warning and "\n" not in warning
    os.chmod(home / "tasks", 0o700)
    again = cli("resume", "last", "--answer", "yes", "--json", cwd=root, home=home)
    assert again.returncode == 0, again.stderr
    assert "other users can read" not in again.stdout


def test_a_new_store_is_private(tmp_path: Path) -> None:
    root, home = tmp_path / "ws", tmp_path / "home"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n" * 100)
    (root / "flow.toml").write_text(FLOW)
    task_id = _waiting(root, home)
    assert cli("resume", task_id, "--answer", "yes", cwd=root, home=home).returncode == 0
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {mode:04o}"
