"""Damaged state: corrupt task files, torn journals, schema versions, unwritable stores."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
from pathlib import Path

import pytest
from durability_support import (
    append_action,
    cli,
    json_lines,
    log_lines,
    only_task,
    steps_workflow,
    task_file,
)

from normalize.store.migrations import MIGRATIONS, migrate
from normalize.task import SCHEMA_VERSION, Task, TaskStatus

FIXTURES = Path(__file__).parents[1] / "fixtures" / "tasks"


def waiting_task(tmp_path: Path, home: Path) -> str:
    flow = steps_workflow(tmp_path / "flow.toml", [
        ("first", append_action("first")), ("ask", "ask Go on?"),
        ("last", append_action("last"))])
    proc = cli("run", str(flow), cwd=tmp_path, home=home)
    assert proc.returncode == 4, proc.stderr
    return only_task(home)


# -- schema versions --------------------------------------------------------


def test_every_schema_version_has_a_fixture_and_a_migration() -> None:
    for version in range(1, SCHEMA_VERSION + 1):
        assert (FIXTURES / f"v{version}.json").is_file(), f"add tests/fixtures/tasks/v{version}"
    assert sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION))


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_each_fixture_loads_as_the_current_schema(tmp_path: Path, version: int) -> None:
    data = json.loads((FIXTURES / f"v{version}.json").read_text())
    assert data["schema_version"] == version
    task = Task.from_dict(migrate(data, source=f"v{version}.json"))
    assert task.status is TaskStatus.WAITING
    assert task.pending is not None and task.pending.question == "Write the result file?"
    assert task.driver == "workflow" and task.driver_state["frames"][0]["pc"] == 1
    round_trip = task.to_dict()
    assert round_trip["schema_version"] == SCHEMA_VERSION
    assert Task.from_dict(round_trip).to_dict() == round_trip


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION + 1))
def test_a_task_from_each_schema_resumes_and_is_saved_in_the_current_one(
        tmp_path: Path, normalize_home: Path, version: int) -> None:
    data = json.loads((FIXTURES / f"v{version}.json").read_text())
    data["workspace"] = str(tmp_path)
    tasks = normalize_home / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    (tasks / f"{data['id']}.json").write_text(json.dumps(data))
    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert "? Write the result file?" in listed.stdout, listed.stderr
    done = cli("resume", data["id"], "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "result.txt").read_text().strip() == "The user answered: yes"
    saved = task_file(normalize_home, data["id"])
    assert saved["schema_version"] == SCHEMA_VERSION and "driver_states" in saved


def test_a_task_file_from_a_newer_schema_is_refused_with_an_upgrade_hint(
        tmp_path: Path, normalize_home: Path) -> None:
    task_id = waiting_task(tmp_path, normalize_home)
    path = normalize_home / "tasks" / f"{task_id}.json"
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    path.write_text(json.dumps(data))
    before = path.read_bytes()
    proc = cli("resume", task_id, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 1
    first = proc.stderr.splitlines()[0]
    assert f"{task_id}.json: written by a newer normalize (task schema {SCHEMA_VERSION + 1}" \
        in first and "pip install -U normalize" in first
    assert "Traceback" not in proc.stderr
    assert path.read_bytes() == before  # refused, not moved aside, not rewritten
    assert log_lines(tmp_path) == ["first"]


# -- damaged files ------------------------------------------------------------


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_a_damaged_task_file_is_reported_the_others_still_list_and_repair_moves_it(
        tmp_path: Path, normalize_home: Path, damage: str) -> None:
    good = waiting_task(tmp_path, normalize_home)
    tasks = normalize_home / "tasks"
    bad = tasks / "badbad00.json"
    content = (tasks / f"{good}.json").read_bytes()
    bad.write_bytes({"truncated": content[: len(content) // 2], "garbage": b"\x00\xffnot json",
                     "empty": b""}[damage])
    listed = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert listed.returncode == 0
    assert good in listed.stdout and "badbad00" not in listed.stdout
    warning, = [ln for ln in listed.stderr.splitlines() if "badbad00" in ln]
    assert "badbad00.json: damaged task file" in warning
    assert "`normalize tasks repair badbad00` moves it aside" in warning
    assert bad.exists()  # a listing changes nothing
    repaired = cli("tasks", "repair", cwd=tmp_path, home=normalize_home)
    assert repaired.returncode == 0, repaired.stderr
    assert "moved badbad00.json aside to badbad00.json.corrupt-" in repaired.stdout
    assert not bad.exists() and len(list(tasks.glob("badbad00.json.corrupt-*"))) == 1
    again = cli("resume", "badbad00", cwd=tmp_path, home=normalize_home)
    assert again.returncode == 2 and "no task matches 'badbad00'" in again.stderr


def test_resuming_a_damaged_task_names_the_file_in_one_line(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    task_id = waiting_task(tmp_path, normalize_home)
    path = normalize_home / "tasks" / f"{task_id}.json"
    path.write_bytes(path.read_bytes()[:100])
    proc = cli("resume", task_id, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{task_id}.json: damaged task file" in lines[0]
    assert list(path.parent.glob(f"{task_id}.json.corrupt-*"))


def test_a_torn_last_journal_line_loses_only_that_line(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    task_id = waiting_task(tmp_path, normalize_home)
    journal = normalize_home / "tasks" / f"{task_id}.jsonl"
    whole = journal.read_text().splitlines()
    with journal.open("a") as fh:
        fh.write('{"type":"notice","task_id":"' + task_id + '","seq":999,"mess')
    shown = cli("tasks", "show", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert len(json.loads(shown.stdout)["events"]) == len(whole)  # only the torn line is lost
    assert "skipped an unreadable journal line (a torn last line)" in shown.stderr
    done = cli("resume", task_id, "--answer", "yes", "--json", cwd=tmp_path,
               home=normalize_home)
    assert done.returncode == 0, done.stderr
    warnings = [e["message"] for e in json_lines(done.stdout)
                if e["type"] == "notice" and e["level"] == "warning"]
    assert any("the last line was torn" in w for w in warnings)
    after = journal.read_text().splitlines()
    assert after[: len(whole)] == whole
    readable = [ln for ln in after if ln.startswith("{") and ln.endswith("}")]
    assert len(readable) == len(after) - 1  # every line whole but the one torn before
    assert log_lines(tmp_path) == ["first", "last"]


# -- unwritable stores -----------------------------------------------------------


def _as_unprivileged() -> list[str]:
    """A command prefix that drops root's power to write anywhere (a user namespace)."""
    if os.geteuid() != 0:
        return []
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("running as root without `unshare`: cannot make a directory read-only")
    probe = subprocess.run([unshare, "--user", "--map-user=1000", "--map-group=1000", "true"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("running as root and user namespaces are unavailable")
    return [unshare, "--user", "--map-user=1000", "--map-group=1000"]


def _read_only(path: Path) -> None:
    for entry in [path, *path.rglob("*")]:
        mode = stat.S_IMODE(entry.stat().st_mode)
        entry.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(path: Path) -> None:
    for entry in [path, *path.rglob("*")]:
        entry.chmod(stat.S_IMODE(entry.stat().st_mode) | stat.S_IWUSR)


def _snapshot(tasks: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(tasks.iterdir()) if p.is_file()}


def test_a_read_only_data_directory_is_one_clear_error_and_changes_nothing(
        tmp_path: Path, normalize_home: Path) -> None:
    task_id = waiting_task(tmp_path, normalize_home)
    tasks = normalize_home / "tasks"
    before = _snapshot(tasks)
    prefix = _as_unprivileged()
    _read_only(normalize_home)
    try:
        proc = cli("resume", task_id, "--answer", "yes", cwd=tmp_path, home=normalize_home,
                   prefix=prefix)
        fresh = cli("run", str(tmp_path / "flow.toml"), cwd=tmp_path, home=normalize_home,
                    prefix=prefix)
        listed = cli("tasks", cwd=tmp_path, home=normalize_home, prefix=prefix)
    finally:
        _writable(normalize_home)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (f"normalize: error: cannot lock task {task_id}: "
                                           f"{tasks}: Permission denied")
    assert "make the data directory writable" in proc.stderr
    assert "Traceback" not in proc.stderr + fresh.stderr
    assert fresh.returncode == 1 and "Permission denied" in fresh.stderr
    assert listed.returncode == 0 and task_id in listed.stdout  # reading still works
    assert _snapshot(tasks) == before
    assert log_lines(tmp_path) == ["first"]


def test_a_full_disk_is_one_clear_error_and_leaves_the_previous_state(
        tmp_path: Path, normalize_home: Path) -> None:
    # Simulated: RLIMIT_FSIZE makes every write past 512 bytes fail (EFBIG, "File too
    # large") the way a full disk fails writes (ENOSPC); the small owner file still fits.
    task_id = waiting_task(tmp_path, normalize_home)
    tasks = normalize_home / "tasks"
    before = _snapshot(tasks)
    del before[f"{task_id}.owner"]  # the new owner records itself: pid and epoch

    def small_disk() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))

    proc = cli("resume", task_id, "--answer", "yes", "--json", cwd=tmp_path,
               home=normalize_home, preexec_fn=small_disk)
    assert proc.returncode == 1
    assert proc.returncode != -signal.SIGXFSZ
    ended = json_lines(proc.stdout)[-1]
    assert ended["type"] == "run_ended" and ended["status"] == "failed"
    assert ended["error"].startswith(f"cannot write the journal {tasks / task_id}.jsonl: "
                                     "File too large")
    assert "the previous checkpoint is intact" in ended["error"]
    after = _snapshot(tasks)
    del after[f"{task_id}.owner"]
    assert after == before
    assert task_file(normalize_home, task_id)["status"] == "waiting"
    assert log_lines(tmp_path) == ["first"]
    done = cli("resume", task_id, "--answer", "yes", cwd=tmp_path, home=normalize_home)
    assert done.returncode == 0, done.stderr  # with room again, it goes on
    assert log_lines(tmp_path) == ["first", "last"]
