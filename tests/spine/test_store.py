"""The task store: atomic files, lookups, damaged files, journals, plugin loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from normalize.errors import CorruptTaskError, SchemaVersionError, TaskNotFoundError
from normalize.events import Notice
from normalize.runner import switch_model
from normalize.store import TaskStore, ckptlog
from normalize.store.journal import JournalWriter
from normalize.task import Task, TaskConfig, TaskStatus, Wait


def make(store: TaskStore, task_id: str, goal: str = "g") -> Task:
    task = Task(id=task_id, goal=goal, workspace="/tmp", driver="workflow")
    store.save(task)
    return task


def test_round_trip_and_no_temp_files_left(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    task = make(store, "abc12345")
    task.status = TaskStatus.WAITING
    store.save(task)
    assert store.load("abc12345").status is TaskStatus.WAITING
    # the task file, and the task index with its lock
    assert sorted(p.name for p in store.tasks_dir.iterdir()) == [
        ".index.lock", "abc12345.json", "index.jsonl"]


def test_checkpoints_are_appended_and_folded_into_the_file_every_few(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = make(store, "abc12345")
    lock = store.lock(task.id)
    lock.acquire(epoch=1)
    try:
        store.save(task, lock=lock, full=False)  # a run's first checkpoint rewrites the file
        written = store.task_path(task.id).read_bytes()
        for turn in range(1, 6):
            task.turn = turn
            store.save(task, lock=lock, full=False)
        assert store.task_path(task.id).read_bytes() == written  # not rewritten
        assert store.log_path(task.id).read_bytes().count(b"\n") == 5
        assert store.load(task.id).turn == 5  # the file and the records after it
        for turn in range(6, ckptlog.EVERY + 2):
            task.turn = turn
            store.save(task, lock=lock, full=False)
        assert json.loads(store.task_path(task.id).read_bytes())["turn"] == ckptlog.EVERY + 1
        assert not store.log_path(task.id).exists()  # folded into the rewritten file
        task.turn = 99
        store.save(task, lock=lock)  # the end of a run: the file, whole
        assert json.loads(store.task_path(task.id).read_bytes())["turn"] == 99
    finally:
        lock.release()


def test_records_older_than_the_file_are_ignored(tmp_path: Path) -> None:
    # killed after the file was rewritten and before its log was removed
    store = TaskStore(tmp_path, fsync=False)
    task = make(store, "abc12345")
    lock = store.lock(task.id)
    lock.acquire(epoch=1)
    try:
        store.save(task, lock=lock, full=False)
        task.turn = 1
        store.save(task, lock=lock, full=False)
        stale = store.log_path(task.id).read_bytes()
        task.turn = 2
        store.save(task, lock=lock)
    finally:
        lock.release()
    store.log_path(task.id).write_bytes(stale)
    assert TaskStore(tmp_path).load(task.id).turn == 2


def test_a_torn_record_falls_back_to_the_one_before(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    task = make(store, "abc12345")
    lock = store.lock(task.id)
    lock.acquire(epoch=1)
    try:
        for turn in range(3):
            task.turn = turn
            store.save(task, lock=lock, full=False)
    finally:
        lock.release()
    log = store.log_path(task.id)
    log.write_bytes(log.read_bytes() + b'{"id": "abc12345", "tu')
    reader = TaskStore(tmp_path)
    assert reader.load(task.id).turn == 2
    assert any("checkpoint record was torn" in w for w in reader.warnings)


def test_the_listing_trusts_the_index_only_for_the_file_it_describes(tmp_path: Path) -> None:
    store = TaskStore(tmp_path, fsync=False)
    make(store, "aaaa0001", goal="first")
    make(store, "aaaa0002", goal="second")
    listed, problems = TaskStore(tmp_path).summaries()
    assert sorted(s["goal"] for s in listed) == ["first", "second"] and not problems
    # an edit the index did not see (same inode): the file is read, not the stale summary
    path = store.task_path("aaaa0002")
    data = json.loads(path.read_bytes())
    data["goal"] = "edited by hand"
    path.write_text(json.dumps(data))
    listed, _ = TaskStore(tmp_path).summaries()
    assert sorted(s["goal"] for s in listed) == ["edited by hand", "first"]
    path.write_text("{damaged")
    listed, problems = TaskStore(tmp_path).summaries()
    assert [s["goal"] for s in listed] == ["first"] and len(problems) == 1
    (store.tasks_dir / "index.jsonl").unlink()  # missing: every task read from its file
    listed, _ = TaskStore(tmp_path).summaries()
    assert [s["goal"] for s in listed] == ["first"]


def test_normalize_tasks_reads_no_task_config(tmp_path: Path) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    (work / "flow.toml").write_text('[workflow]\nname = "flow"\n[[workflow.steps]]\n'
                                    'name = "one"\naction = "note hello"\n')
    env = {**os.environ, "NORMALIZE_HOME": str(home)}
    for _ in range(3):
        done = subprocess.run([sys.executable, "-m", "normalize.cli.app", "run", "flow.toml"],
                              cwd=work, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
    tasks = home / "tasks"
    configs = list(tasks.glob("*/config-*.json"))
    assert len(configs) == 3  # each run kept its workflow's spec beside its task file
    for config in configs:
        config.unlink()  # a listing that opened one would report the task as damaged
    listed = subprocess.run([sys.executable, "-m", "normalize.cli.app", "tasks", "--json"],
                            cwd=work, env=env, capture_output=True, text=True, check=False)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert len(rows) == 3 and {r["status"] for r in rows} == {"done"}
    last = subprocess.run([sys.executable, "-m", "normalize.cli.app", "tasks", "show", "last"],
                          cwd=work, env=env, capture_output=True, text=True, check=False)
    assert last.returncode == 0 and last.stderr == "", last.stderr  # nor does `show`
    assert " done" in last.stdout.splitlines()[0]


def test_resolve_ids_prefixes_and_last(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    make(store, "abc11111")
    make(store, "abc22222")
    newest = make(store, "def33333")
    assert store.resolve("def") == "def33333"
    assert store.resolve("abc1") == "abc11111"
    assert store.resolve("last") == newest.id
    with pytest.raises(TaskNotFoundError, match="ambiguous: it matches abc11111, abc22222"):
        store.resolve("abc")
    with pytest.raises(TaskNotFoundError, match="no task matches 'zzz'"):
        store.resolve("zzz")


def test_batch_refs_read_positions_and_ids_even_when_ids_are_all_digits(tmp_path: Path) -> None:
    """`BATCH/N` is item N; `BATCH/ITEM` is that item, even when ITEM is all digits
    (one id in ~40) and so reads like a position the batch does not have."""
    from normalize.homes import batch_item_id

    store = TaskStore(tmp_path)
    make(store, "12345678")  # the batch
    first = Task(id=batch_item_id("12345678", 0), goal="g", workspace="/tmp", driver="workflow",
                 parent="12345678")
    store.save(first)
    stranger = make(store, "87654321")  # all digits, not an item of the batch
    assert store.resolve("12345678/0") == first.id
    assert store.resolve(f"12345678/{first.id}") == first.id
    with pytest.raises(TaskNotFoundError, match="task 87654321 is not an item of batch 12345678"):
        store.resolve(f"12345678/{stranger.id}")
    with pytest.raises(TaskNotFoundError, match="batch 12345678 has no item 7"):
        store.resolve("12345678/7")  # a position the batch does not have, naming no task


def test_a_damaged_file_lists_as_a_problem_and_repair_moves_it_aside(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    make(store, "good0000")
    bad = store.task_path("bad00000")
    bad.write_text('{"id": "bad00000", "work')
    tasks, problems = store.all()
    assert [t.id for t in tasks] == ["good0000"]
    assert len(problems) == 1 and "bad00000.json: damaged task file" in problems[0].message
    assert bad.exists()  # listing is a read
    aside = store.repair("bad00000")
    assert aside is not None and aside.name.startswith("bad00000.json.corrupt-")
    assert not bad.exists()
    assert store.repair("good0000") is None and store.task_path("good0000").exists()
    with pytest.raises(CorruptTaskError, match=f"moved aside to {aside}"):
        store.load("bad00000")  # found still, saying where its file went


def test_truncated_file_error_names_it(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    make(store, "trunc000")
    path = store.task_path("trunc000")
    path.write_bytes(path.read_bytes()[:40])
    with pytest.raises(CorruptTaskError, match=r"trunc000\.json: damaged task file"):
        store.load("trunc000")


def test_a_newer_schema_is_refused_with_a_hint(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    task = make(store, "new00000")
    data = task.to_dict()
    data["schema_version"] = 99
    store.task_path(task.id).write_text(json.dumps(data))
    with pytest.raises(SchemaVersionError, match="upgrade"):
        store.load(task.id)
    assert store.task_path(task.id).exists()  # not moved aside: it is not damaged


def test_journal_skips_a_torn_last_line_with_a_warning(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    task = make(store, "jjj00000")
    writer = JournalWriter(store.journal_path(task.id))
    writer.append(Notice(message="one", task_id=task.id, seq=1))
    writer.append(Notice(message="two", task_id=task.id, seq=2))
    writer.close()
    with open(store.journal_path(task.id), "ab") as fh:
        fh.write(b'{"type":"notice","mess')
    events = list(store.events(task.id))
    assert [e["message"] for e in events] == ["one", "two"]
    assert len(store.warnings) == 1 and "torn last line" in store.warnings[0]
    # a new writer starts on a fresh line, so the next event is whole
    writer = JournalWriter(store.journal_path(task.id))
    writer.append(Notice(message="three", task_id=task.id, seq=3))
    writer.close()
    assert [e["message"] for e in store.events(task.id)] == ["one", "two", "three"]


def test_a_second_owner_is_refused_naming_the_pid(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    make(store, "lock0000")
    code = ("import sys, time\nfrom pathlib import Path\nfrom normalize.store import TaskStore\n"
            f"lock = TaskStore(Path({str(tmp_path)!r})).lock('lock0000')\nlock.acquire(epoch=5)\n"
            "print('held', flush=True)\ntime.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = store.lock("lock0000")
        from normalize.errors import TaskLockedError

        with pytest.raises(TaskLockedError, match=f"running in process {holder.pid}"):
            lock.acquire(epoch=6)
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    lock = store.lock("lock0000")
    lock.acquire(epoch=6)  # taken over after the holder died
    assert store.owner("lock0000") == (os.getpid(), 6)
    lock.release()


def test_a_plugin_that_fails_to_import_is_a_warning(tmp_path: Path) -> None:
    site = tmp_path / "site"
    dist = site / "fakeplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[normalize.drivers]\nbroken = no_such_module_xyz:Driver\n"
        "echo = fakeplug_mod:EchoDriver\n")
    (site / "fakeplug_mod.py").write_text(
        "class EchoDriver:\n    name = 'echo'\n"
        "    @classmethod\n    def from_config(cls, config, services):\n        return cls()\n")
    code = ("from normalize.contract.driver import DRIVERS\n"
            "loaded = DRIVERS.load_all()\n"
            "print(sorted(loaded))\n"
            "print([w for w in DRIVERS.warnings if \"'broken'\" in w][0])\n"
            "print([i.origin for i in DRIVERS.infos() if i.name == 'echo'])\n")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    names, warning, origin = proc.stdout.strip().splitlines()
    assert "echo" in names and "workflow" in names and "broken" not in names
    assert "plugin 'broken' (no_such_module_xyz:Driver) failed to load" in warning
    assert origin == "['plugin:fakeplug']"


def test_a_resumed_config_is_reused_unless_a_value_was_replaced(tmp_path: Path) -> None:
    def saved(store: TaskStore, task: Task) -> str:
        lock = store.lock(task.id)
        lock.acquire(epoch=task.epoch + 1)
        try:
            store.save(task, lock=lock)
        finally:
            lock.release()
        return str(json.loads(store.task_path(task.id).read_bytes())["driver_config_file"])

    store = TaskStore(tmp_path, fsync=False)
    task = Task(id="abc12345", goal="g", workspace="/tmp", driver="workflow",
                config=TaskConfig(spec={"steps": [{"name": "a"}]}, llm={"model": "a"}))
    first = saved(store, task)
    again = TaskStore(tmp_path).load(task.id)
    assert saved(TaskStore(tmp_path), again) == first  # unchanged: the same file
    changed = TaskStore(tmp_path)
    loaded = changed.load(task.id)
    switch_model(loaded, "b")  # as `resume --model` does: a new file
    assert saved(changed, loaded) != first
    assert TaskStore(tmp_path).load(task.id).config.llm == {"model": "b"}


def test_every_field_of_the_plain_data_round_trips_through_json() -> None:
    """A hand-written `to_dict` that forgets a field loses it at the next checkpoint."""
    from normalize.task import Limits, Usage

    limits = Limits(max_turns=3, max_tokens=10, max_cost_usd=0.5, timeout_seconds=9.0,
                    driver="workflow")
    assert Limits.from_dict(json.loads(json.dumps(limits.to_dict()))) == limits
    usage = Usage.from_dict(Usage().to_dict())
    assert usage == Usage()


def test_the_table_shows_the_newest_fifty_and_says_how_to_see_the_rest(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    waiting = make(store, "0waiting")
    waiting.status = TaskStatus.WAITING  # the oldest, but it needs a person: it stays in view
    waiting.pending = Wait(kind="question", question="Which branch?")
    store.save(waiting)
    for n in range(59):
        make(store, f"t{n:07d}")
    env = {**os.environ, "NORMALIZE_HOME": str(tmp_path)}

    def listing(*flags: str) -> list[str]:
        done = subprocess.run([sys.executable, "-m", "normalize.cli.app", "tasks", *flags],
                              env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    table = listing()
    ids = [line.split()[0] for line in table[1:] if line[:1].isalnum()]
    assert len(ids) == 51 and ids[:3] == ["t0000058", "t0000057", "t0000056"]
    assert ids[-1] == "0waiting" and "  ? Which branch?" in "\n".join(table)
    assert table[-1] == "… and 9 older tasks (normalize tasks --all, or --limit N)"
    assert len([line for line in listing("--all") if line.startswith("t0")]) == 59
    assert [line.split()[0] for line in listing("--limit", "2")[1:3]] == ["t0000058",
                                                                       "t0000057"]
    assert len(listing("--json")) == 60  # machine output is whole unless limited


def test_tasks_created_in_the_same_millisecond_list_in_one_order(tmp_path: Path) -> None:
    store = TaskStore(tmp_path)
    for task_id in ("t3", "t1", "t4", "t2"):
        task = Task(id=task_id, goal="g", workspace="/tmp", driver="workflow")
        task.created_at = 1_700_000_000.0004  # one millisecond in the index for all four
        store.save(task)
    first = [row[0] for row in store.rows()[0]]  # read from the files, then sealed
    again = [row[0] for row in TaskStore(tmp_path).rows()[0]]  # served by the index
    assert first == again == ["t4", "t3", "t2", "t1"]
    assert [t.id for t in store.all()[0]] == ["t4", "t3", "t2", "t1"]
