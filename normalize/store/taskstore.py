"""The task store: a JSON file per task, an append-only journal, a lock per task.

Layout under the data home (`NORMALIZE_HOME` or the platform's user data dir):

    tasks/ID.json        the state, rewritten atomically every few checkpoints and at the end
    tasks/ID.ckpt        the checkpoints since, appended (normalize/store/ckptlog.py)
    tasks/ID.jsonl       the journal: every event, appended
    tasks/ID.lock        the ownership lock (flock; released when its process dies)
    tasks/ID.owner       pid and epoch of the current owner
    tasks/ID/cache/      persistent result cache
    tasks/ID/config-*.json  the driver config (a workflow's spec), written once per run
    cache/repomap/       the agent's repo maps, by workspace and size (tools/code/mapcache.py)

Two kinds of data, kept apart: what resume executes (the task file and the
driver config beside it: vars, answers, pending actions) is written exactly as
it is, and only the owner may read it (directories 0700, files 0600; `check_private`
says when a store is looser). What is shown (the journal, events, `tasks show`)
goes through `redact`.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.errors import (
    ConfigError,
    CorruptTaskError,
    SchemaVersionError,
    StoreError,
    TaskNotFoundError,
)
from normalize.fsutil import json_bytes, private_dirs
from normalize.homes import batch_item_id, data_home
from normalize.statuses import SCHEMA_VERSION
from normalize.store import ckptlog, index, results, salvage
from normalize.store.journal import (
    JournalWriter,
    read_events,
    read_journal,
    tail_events,
    write_hint,
)
from normalize.store.migrations import migrate
from normalize.store.ownership import TaskLock, atomic_write_bytes, pid_alive
from normalize.store.places import Places, hidden_from

if TYPE_CHECKING:  # the task model is loaded where a task is read or written, not to list
    from normalize.events import Event
    from normalize.store.record import RunRecord
    from normalize.task import Task

__all__ = ["StoreProblem", "TaskLock", "TaskStore", "atomic_write_bytes", "pid_alive"]

Redact = Callable[[Any], Any]

DIR_MODE = 0o700
KEPT = "$kept"  # a checkpoint's reference to a value kept beside it
FILE_MODE = 0o600


def blocking_file(path: Path) -> Path:
    """The nearest of `path` and its parents that exists (a file, where a directory goes)."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def not_a_directory(home: Path, file: Path) -> str:
    if file == home:
        return f"the data home {home} is a file, not a directory"
    return f"the data home {home} cannot be made: {file} is a file"


@dataclass
class StoreProblem:
    """A task file that could not be read while listing."""

    path: Path
    message: str


def _digest(data: bytes) -> str:
    """The name part of a content-addressed file (hashlib loaded by writes only)."""
    import hashlib

    return hashlib.sha256(data).hexdigest()[:16]


def config_changed(task: Task) -> None:
    """Mark `task`'s config as changed in place, so its next save writes it anew.

    Saving a resumed task does not re-encode its config (a long workflow's
    whole spec) to see whether it changed. A config replaced as a whole
    (`dataclasses.replace`) is seen by identity; whoever changes one of its
    tables in place says so with this.
    """
    task.config = replace(task.config)


class TaskStore:
    """Reads and writes tasks under a data home."""

    def __init__(
        self,
        home: Path | None = None,
        *,
        fsync: bool = True,
        redact: Redact | None = None,
    ) -> None:
        self.home = home or data_home()
        self.tasks_dir = self.home / "tasks"
        self.fsync = fsync
        self.redact = redact
        self.warnings: list[str] = []
        self.announced = 0  # how many of the warnings a run has shown already
        self._configs: dict[str, tuple[tuple[int, int], str]] = {}
        # the config file `load` read and the dict it became (unchanged while it is that dict)
        self._loaded: dict[str, tuple[str, Any]] = {}
        self._shown: dict[str, Redact] = {}  # a redactor per workspace, for `shown`
        self._logs: dict[str, ckptlog.LogState] = {}  # the checkpoint logs this process writes
        self._kept: dict[int, tuple[Any, str]] = {}  # kept values written, by identity
        # the store of record this process keeps its runs in too (`normalize.store.record`)
        self.record_url = os.environ.get("NORMALIZE_RECORD", "")
        self._records: dict[str, RunRecord] = {}  # the runs taken there, by task

    # -- paths -----------------------------------------------------------

    def task_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.json"

    def log_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.ckpt"

    def journal_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.jsonl"

    def results_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.results"

    def cache_dir(self, task_id: str) -> Path:
        return self.tasks_dir / task_id / "cache"

    def shared_cache_dir(self, name: str) -> Path:
        """A cache every task of this store shares (`cache/NAME/`: the repo maps, say)."""
        return self.home / "cache" / name

    def places(self, task_id: str, workspace: Path) -> Places:
        """A run's paths here: its cache, the repo maps, and what its programs may not see."""
        return Places(cache=self.cache_dir(task_id), repo_maps=self.shared_cache_dir("repomap"),
                      private=self.hidden_from(workspace))

    def hidden_from(self, workspace: Path) -> tuple[Path, ...]:
        """normalize's data and config, as no program working in `workspace` may read them."""
        return hidden_from(self.home, workspace)

    def journal_of(self, ref: str) -> Path:
        """The journal of the task `ref` names (`replay:TASKID`)."""
        return self.journal_path(self.resolve(ref))

    def ensure(self) -> None:
        """Create the data home and `tasks/` (owner-only) if they are missing."""
        try:
            if not self.tasks_dir.is_dir():
                if not self.home.is_dir():
                    private_dirs(self.home)
                self.tasks_dir.mkdir(mode=DIR_MODE, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:  # a file where a directory goes
            raise ConfigError(not_a_directory(self.home, blocking_file(self.tasks_dir)),
                              hint="point NORMALIZE_HOME at a directory") from exc
        except OSError as exc:
            raise StoreError(f"cannot create the task store {self.tasks_dir}: {exc.strerror}",
                             hint=write_hint(exc)) from exc

    # -- writing ---------------------------------------------------------

    def save(self, task: Task, *, lock: TaskLock | None = None, full: bool = True) -> int:
        """Checkpoint `task`; returns the bytes written.

        `full=False` (a run's checkpoint between two others) appends one record
        to the task's checkpoint log instead of rewriting its file; every
        `ckptlog.EVERY` records, and at the first checkpoint of a run, the file
        is rewritten whole. With a `lock`, the write is refused if another
        process took the task over since (its epoch is newer than ours). A
        failed write (full disk, read-only directory) raises `StoreError` and
        leaves the previous checkpoint.
        """
        if lock is not None:
            lock.verify()
        task.updated_at = time.time()
        data: Any = task.to_dict()
        if lock is not None:  # a run: the driver config is written once, beside the task
            data["driver_config_file"] = self._config_file(task, lock)
            del data["driver_config"]
        encode = self._encoder(task.id)
        log = self._logs.get(task.id)
        if not full and lock is not None and log is not None and log.epoch == lock.epoch \
                and log.records < ckptlog.EVERY:
            data["log_gen"] = log.gen
            record = encode(data)
            try:
                ckptlog.append_record(self.log_path(task.id), log, record + b"\n",
                                      fsync=self.fsync)
            except OSError as exc:
                raise StoreError(
                    f"cannot save task {task.id} to {self.log_path(task.id)}: "
                    f"{exc.strerror or exc}; the previous checkpoint is intact",
                    hint=write_hint(exc)) from exc
            self._recorded(task.id, record)
            return len(record)
        if log is not None:
            log.close()
        gen = time.time_ns()
        data["log_gen"] = gen
        # exactly as it is, never redacted: this is what resume executes
        payload = encode(data)
        try:
            self.ensure()
            atomic_write_bytes(self.task_path(task.id), payload, fsync=self.fsync,
                               crash="checkpoint_write", owned=lock is not None)
            ckptlog.remove(self.log_path(task.id))  # its records are older than the file now
        except OSError as exc:
            raise StoreError(
                f"cannot save task {task.id} to {self.task_path(task.id)}: "
                f"{exc.strerror or exc}; the previous checkpoint is intact",
                hint=write_hint(exc),
            ) from exc
        if lock is not None:
            self._logs[task.id] = ckptlog.LogState(gen=gen, epoch=lock.epoch)
        else:
            self._logs.pop(task.id, None)
        index.note(self.tasks_dir, task.id, index.summary_of(data))
        self._recorded(task.id, payload)
        return len(payload)

    def _recorded(self, task_id: str, state: bytes) -> None:
        """A checkpoint of a run taken in the store of record: made there too."""
        run = self._records.get(task_id)
        if run is not None:
            run.checkpoint(state, self.tasks_dir / task_id)

    def take_record(self, task_id: str, epoch: int) -> int:
        """Take the task in the store of record (if this process keeps one); the epoch."""
        if not self.record_url:
            return epoch
        from normalize.store.record import RunRecord

        run = RunRecord.open(self.record_url, task_id)
        taken = run.take(epoch)
        self._records[task_id] = run
        return taken

    def drop_record(self, task_id: str) -> None:
        run = self._records.pop(task_id, None)
        if run is not None:
            run.release()

    def _encoder(self, task_id: str) -> Callable[[Any], bytes]:
        """JSON for a task's state, each `Kept` value written once beside it and named.

        msgspec's encoder writes the record a checkpoint appends (about a tenth of
        `json.dumps`' time: bench/serial.py); a lone surrogate (a file name) is
        written with ASCII escapes by `json_bytes`, as before.
        """
        import msgspec

        from normalize.task import Kept

        def default(obj: Any) -> Any:
            if not isinstance(obj, Kept):
                raise TypeError(f"{type(obj).__name__} is not JSON")
            return {KEPT: self._kept_file(task_id, obj.value)}

        encoder = msgspec.json.Encoder(enc_hook=default)

        def encode(data: Any) -> bytes:
            try:
                return encoder.encode(data)
            except UnicodeEncodeError:
                return json_bytes(data, default=default)

        return encode

    def _kept_file(self, task_id: str, value: Any) -> str:
        """Write a kept value once (named by its content); the name. Cached by identity."""
        cached = self._kept.get(id(value))
        if cached is not None and cached[0] is value:
            return cached[1]
        text = json_bytes(value)
        name = f"kept-{_digest(text)}.json"
        path = self.tasks_dir / task_id / name
        try:
            if not path.exists():
                path.parent.mkdir(mode=DIR_MODE, exist_ok=True)
                atomic_write_bytes(path, text, fsync=self.fsync, crash="kept_write")
        except OSError as exc:
            raise StoreError(f"cannot save task {task_id}'s loop items or variables to {path}: "
                             f"{exc.strerror or exc}; the previous checkpoint is intact",
                             hint=write_hint(exc)) from exc
        self._kept[id(value)] = (value, name)
        return name

    def _unkeep(self, task_id: str, obj: Any) -> Any:
        """`obj` with each kept-value reference replaced by the value its file holds."""
        if isinstance(obj, dict):
            if len(obj) == 1 and KEPT in obj:
                name = obj[KEPT]
                if not isinstance(name, str) or not name.startswith("kept-") or "/" in name:
                    raise ValueError(f"bad kept value name {name!r}")
                try:
                    return json.loads((self.tasks_dir / task_id / name).read_bytes())
                except FileNotFoundError:
                    raise ValueError(f"its loop items {task_id}/{name} are missing") from None
            return {key: self._unkeep(task_id, value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self._unkeep(task_id, value) for value in obj]
        return obj

    def close_log(self, task_id: str) -> None:
        """Close the checkpoint log this process appends to for `task_id` (the run ended)."""
        log = self._logs.pop(task_id, None)
        if log is not None:
            log.close()

    def _config_file(self, task: Task, lock: TaskLock) -> str:
        """Write the task's driver config once per run; the name the task file refers to.

        A driver config (a workflow's whole spec) is fixed while the task runs,
        so checkpoints leave it out: rewriting it at every step made a step's
        cost grow with the size of the workflow. The file is named by its
        content and written before the task file that names it. A resumed
        task whose config is still the dict `load` made reuses the file it
        came from without encoding it (`config_changed` gives it a new dict).
        """
        key = (lock.epoch, id(task.config))
        cached = self._configs.get(task.id)
        if cached is not None and cached[0] == key:
            return cached[1]
        loaded = self._loaded.pop(task.id, None)
        if loaded is not None and loaded[1] is task.config:  # resumed, not changed
            self._configs[task.id] = (key, loaded[0])
            return str(loaded[0])
        text = json_bytes(task.config.to_dict())
        name = f"config-{_digest(text)}.json"
        path = self.tasks_dir / task.id / name
        try:
            if not path.exists():
                path.parent.mkdir(mode=DIR_MODE, exist_ok=True)
                atomic_write_bytes(path, text, fsync=self.fsync)
        except OSError as exc:
            raise StoreError(f"cannot save task {task.id}'s driver config to {path}: "
                             f"{exc.strerror or exc}; the previous checkpoint is intact",
                             hint=write_hint(exc)) from exc
        self._configs[task.id] = (key, name)
        return name

    def _read_config(self, task_id: str, name: Any) -> Any:
        """The driver config a task file names (ValueError when it is missing or damaged)."""
        if not isinstance(name, str) or not name.startswith("config-") or "/" in name:
            raise ValueError(f"bad driver_config_file {name!r}")
        try:
            raw = (self.tasks_dir / task_id / name).read_bytes()
        except FileNotFoundError:
            raise ValueError(f"its driver config {task_id}/{name} is missing") from None
        return json.loads(raw)

    def sweep(self, task_id: str) -> None:
        """Remove temporary files a killed writer of this task left (call with the lock held)."""
        beside = self.tasks_dir / task_id  # a kept value's or config's half-written file
        for tmp in (*self.tasks_dir.glob(f".{task_id}.json*.tmp"), *beside.glob(".*.tmp")):
            with contextlib.suppress(OSError):
                tmp.unlink()

    def journal(self, task_id: str, *, redact: bool = True) -> JournalWriter:
        """The task's journal writer; `redact=False` when events come redacted already.

        When the journal is first opened (as a run starts) the store checks that
        the task's files are private, and adds a warning if they are not.
        """
        self.ensure()
        writer = JournalWriter(self.journal_path(task_id), fsync=self.fsync,
                               redact=self.redact if redact else None,
                               warn=self.warnings.append)
        writer.on_open = lambda: self._warn_if_shared(task_id)
        run = self._records.get(task_id)
        if run is not None:
            writer.mirror = run.line
        return writer

    def private_problems(self, task_id: str | None = None) -> list[str]:
        """Paths of the store (and of `task_id`) that others may read: `PATH (mode 0755)`.

        The data home itself is not checked: everything secret is below `tasks/`,
        so a private `tasks/` is enough.
        """
        paths = [self.tasks_dir]
        if task_id is not None:
            paths += [self.task_path(task_id), self.log_path(task_id), self.journal_path(task_id),
                      self.tasks_dir / task_id, self.cache_dir(task_id)]
        loose: list[str] = []
        for path in paths:
            try:
                mode = stat.S_IMODE(path.stat().st_mode)
            except OSError:
                continue
            if mode & 0o077:
                loose.append(f"{path} (mode {mode:04o})")
        return loose

    def _warn_if_shared(self, task_id: str) -> None:
        loose = self.private_problems(task_id)
        if loose:
            shown = ", ".join(loose[:3]) + (" …" if len(loose) > 3 else "")
            self.warnings.append(
                f"other users can read this task's stored state (workflow vars, answers and "
                f"pending actions are kept unredacted there): {shown}; "
                f"run `chmod -R go-rwx {self.tasks_dir}`")

    def lock(self, task_id: str) -> TaskLock:
        self.ensure()
        return TaskLock(self, task_id)

    def owner(self, task_id: str) -> tuple[int, int] | None:
        """(pid, epoch) of the task's last owner, if recorded."""
        try:
            data = json.loads((self.tasks_dir / f"{task_id}.owner").read_bytes())
            return int(data["pid"]), int(data["epoch"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def remove(self, task_id: str) -> None:
        """Delete a task's files; refuses while another process runs it."""
        lock = self.lock(task_id)
        lock.acquire(epoch=-1)
        try:
            for suffix in (".json", ".ckpt", ".jsonl", ".owner", ".results"):
                with contextlib.suppress(FileNotFoundError):
                    (self.tasks_dir / f"{task_id}{suffix}").unlink()
            import shutil

            shutil.rmtree(self.tasks_dir / task_id, ignore_errors=True)
            index.note(self.tasks_dir, task_id, None)
        finally:
            lock.release()
            with contextlib.suppress(FileNotFoundError):
                (self.tasks_dir / f"{task_id}.lock").unlink()

    # -- reading ---------------------------------------------------------

    def load(self, task_id: str, *, with_config: bool = True, repair: bool = False) -> Task:
        """The task with this exact id; a damaged file is a `CorruptTaskError` naming it.

        Loading changes nothing, unless `repair` (resume does): then a damaged
        file is moved aside under the task's lock first. `with_config=False`
        leaves out a driver config kept beside the task file (a long workflow's
        spec), for callers that only look at the task's state.
        """
        try:
            return self._parse(task_id, with_config=with_config)
        except CorruptTaskError as exc:
            if not self.task_path(task_id).exists():
                raise  # moved aside already: the message names where
            if not repair:
                raise CorruptTaskError(f"{exc}; `normalize tasks repair {task_id}` "
                                       "moves it aside") from None
            aside = self.repair(task_id)
            where = f"moved aside to {aside.name}" if aside is not None else \
                "could not move it aside (the directory is not writable)"
            raise CorruptTaskError(f"{exc}; {where}") from None

    def state(self, task_id: str) -> dict[str, Any]:
        """The task's stored state as JSON: its file, or the newer record in its checkpoint log.

        Raises `TaskNotFoundError`, `StoreError`, or ValueError for a damaged file.
        """
        path = self.task_path(task_id)
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            aside = salvage.aside_of(self.tasks_dir, task_id)
            if aside is not None:
                raise CorruptTaskError(f"{path}: damaged task file, moved aside to {aside}; "
                                       f"its journal is {self.journal_path(task_id)}") from None
            raise TaskNotFoundError(f"no task {task_id!r} in {self.tasks_dir}") from None
        except OSError as exc:
            raise StoreError(f"{path}: cannot read: {exc.strerror}") from exc
        data: dict[str, Any] = json.loads(raw)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        newer = ckptlog.latest(self.log_path(task_id), data.get("log_gen"),
                               warn=self.warnings.append)
        if newer is not None:
            data = newer
        data.pop("log_gen", None)
        return data

    def decode(self, task_id: str, data: dict[str, Any], *, source: str) -> Task:
        """A state saved for `task_id` (a workspace checkpoint's copy of its file) as a Task.

        Its driver config and kept values are read from beside the task's file.
        """
        data = dict(data)
        data.pop("log_gen", None)
        name = data.pop("driver_config_file", None)
        if name is not None:
            data["driver_config"] = self._read_config(task_id, name)
        if "driver_states" in data:
            data["driver_states"] = self._unkeep(task_id, data["driver_states"])
        from normalize.task import Task

        return Task.from_dict(migrate(data, source=source))

    def _parse(self, task_id: str, *, with_config: bool = True) -> Task:
        from normalize.task import Task

        path = self.task_path(task_id)
        try:
            data = self.state(task_id)
            name = None
            if "driver_config_file" in data:
                name = data.pop("driver_config_file")
                if with_config:
                    data["driver_config"] = self._read_config(task_id, name)
            if with_config and "driver_states" in data:
                data["driver_states"] = self._unkeep(task_id, data["driver_states"])
            current = data.get("schema_version") == SCHEMA_VERSION
            data = migrate(data, source=str(path))
            task = Task.from_dict(data)
            if with_config and isinstance(name, str) and current:  # (a migrated one: rewritten)
                self._loaded[task_id] = (name, task.config)
            return task
        except SchemaVersionError:
            raise
        except (ValueError, KeyError, TypeError) as exc:
            why = str(exc) or type(exc).__name__
            raise CorruptTaskError(f"{path}: damaged task file ({why})") from None

    def repair(self, task_id: str) -> Path | None:
        """Move a damaged task file aside under the task's lock; where it went.

        None when it is not damaged (any more), or could not be moved. Refuses
        (`TaskLockedError`) while another process runs the task.
        """
        lock = self.lock(task_id)
        lock.acquire(epoch=-1)
        try:
            try:
                self._parse(task_id)
            except CorruptTaskError:
                return self._move_aside(self.task_path(task_id))
            except (TaskNotFoundError, SchemaVersionError):
                return None
            return None
        finally:
            lock.release()

    def create(self, task: Task) -> None:
        """Save a new task for the first time; on failure nothing of it is left behind.

        The error names the store, not the task: a task that was never saved
        has no id anyone could resume.
        """
        made = [p for p in (self.home, self.tasks_dir) if not p.exists()]
        task.updated_at = time.time()
        data = task.to_dict()
        try:
            self.ensure()
            payload = self._encoder(task.id)(data)
            atomic_write_bytes(self.task_path(task.id), payload, fsync=self.fsync)
        except (OSError, StoreError) as exc:
            for path in reversed(made):
                with contextlib.suppress(OSError):
                    path.rmdir()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot create a task in {self.tasks_dir}: "
                             f"{exc.strerror or exc}", hint=write_hint(exc)) from exc
        self._keep_index()
        index.note(self.tasks_dir, task.id, index.summary_of(data))

    def _keep_index(self) -> None:
        """Rebuild the task index when it is missing, compact it when mostly superseded."""
        path = self.tasks_dir / index.NAME
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            size = -1
        except OSError:
            return
        if 0 <= size < index.COMPACT_BYTES:
            return
        found = index.read(self.tasks_dir)
        if size >= 0 and found.lines <= 2 * len(found.entries) + 64:
            return
        listed, _ = self.summaries()
        stamps = {s["id"]: index.stamp(self.task_path(s["id"])) for s in listed}
        index.rewrite(self.tasks_dir, [(s["id"], s, stamps[s["id"]]) for s in listed])

    def shown(self, task: Task, *, deep: bool = True) -> Task:
        """A copy of `task` fit to show: its strings redacted and inert (the stored task is exact).

        Without a store-wide `redact`, each workspace's own redactor is used
        (it knows that workspace's `.env*` values); `deep=False` skips reading
        the workspace (shapes and the environment only: a fast listing).
        """
        redact = self.redact
        if redact is None:
            key = task.workspace if deep else ""
            redact = self._shown.get(key)
            if redact is None:
                from normalize.redact import Redactor

                redact = self._shown[key] = Redactor.for_workspace(task.workspace) if deep \
                    else Redactor.for_workspace(task.workspace, walk=False)
        from normalize.redact import inert_obj

        return type(task).from_dict(inert_obj(redact(task.to_dict())))

    def _move_aside(self, path: Path) -> Path | None:
        """Rename a damaged file to `NAME.corrupt-TIMESTAMP` (never over an earlier one)."""
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        number = 1
        while aside.exists():
            number += 1
            aside = path.with_name(f"{path.name}.corrupt-{stamp}-{number}")
        try:
            os.replace(path, aside)
        except OSError:
            return None
        return aside

    def ids(self) -> list[str]:
        try:
            return sorted(p.name[:-5] for p in self.tasks_dir.glob("*.json"))
        except OSError:
            return []

    def all(self) -> tuple[list[Task], list[StoreProblem]]:
        """Every readable task (newest first) and the files that could not be read.

        A read: nothing is moved or written (`repair` does that, under a lock).
        """
        tasks: list[Task] = []
        problems: list[StoreProblem] = []
        for task_id in self.ids():
            try:
                tasks.append(self.load(task_id, with_config=False))
            except StoreError as exc:
                problems.append(StoreProblem(self.task_path(task_id), str(exc)))
        tasks.sort(key=lambda t: (t.created_at, t.id), reverse=True)
        return tasks, problems

    def summaries(self) -> tuple[list[index.Summary], list[StoreProblem]]:
        """A summary of every readable task (newest first) and the files that could not be read."""
        rows, problems = self.rows()
        return [dict(zip(index.FIELDS, row, strict=False)) for row in rows], problems

    def rows(self) -> tuple[list[index.Row], list[StoreProblem]]:
        """`summaries` as rows (values in `index.FIELDS` order, perhaps a stamp after them).

        The task index supplies the summaries it still vouches for; only the
        other tasks' files are read, and never a driver config. Nothing is
        written but the index: the lines of the tasks read, and its seal.
        """
        checked = index.listing(self.tasks_dir)
        rows = list(checked.trusted)
        problems: list[StoreProblem] = []
        read: dict[str, index.Summary] = {}
        for task_id in checked.unread:
            try:
                task = self.load(task_id, with_config=False)
            except StoreError as exc:
                problems.append(StoreProblem(self.task_path(task_id), str(exc)))
                continue
            summary = read[task_id] = index.summary_of(task.to_dict())
            rows.append([summary[name] for name in index.FIELDS])
        if checked.dir_mtime is not None:  # every file was checked: seal the index
            index.seal(self.tasks_dir, checked, read)
        rows.extend(self._salvaged_rows(problems))
        # ties (the index keeps milliseconds) broken by id, so the order never depends on the read
        rows.sort(key=lambda row: (row[index.CREATED] or 0.0, row[index.ID]), reverse=True)
        return rows, problems

    def salvage(self, task_id: str) -> Task | None:
        """The task as its journal tells it, for showing one whose file is damaged."""
        return salvage.from_journal(task_id, self.events(task_id))

    def _salvaged_rows(self, problems: list[StoreProblem]) -> list[index.Row]:
        """Rows (status `damaged`) for tasks whose file is damaged or moved aside, from their
        journals, so the listing still finds them; each moved-aside one is a problem too."""
        damaged = [p.path.name[:-5] for p in problems if p.path.name.endswith(".json")]
        for task_id, aside, message in salvage.moved_aside(self.tasks_dir):
            problems.append(StoreProblem(aside, message))
            damaged.append(task_id)
        return salvage.rows(damaged, self.salvage)

    def resolve(self, ref: str) -> str:
        """The id a user means by an id, a unique prefix, or `last`."""
        if ref == "last":
            newest = self._sealed_newest()
            if newest is not None:
                return newest
            rows, problems = self.rows()
            if not rows:
                raise TaskNotFoundError(f"no readable tasks in {self.tasks_dir}" if problems
                                        else f"no tasks yet in {self.tasks_dir}")
            return str(max(rows, key=lambda row: row[index.UPDATED] or 0.0)[index.ID])
        if "/" not in ref and not ref.startswith(".") and self.task_path(ref).is_file():
            return ref  # an exact id: its file, without listing the store
        head, slash, tail = ref.partition("/")
        if slash and head and tail:  # BATCH/N (an item's position) or BATCH/ITEM
            return self._resolve_item(self.resolve(head), tail)
        ids = self.ids() + salvage.aside_ids(self.tasks_dir)  # a damaged one is still found
        matches = [i for i in ids if i.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise TaskNotFoundError(f"no task matches {ref!r} (see `normalize tasks`)")
        shown = ", ".join(matches[:5]) + (" …" if len(matches) > 5 else "")
        raise TaskNotFoundError(f"{ref!r} is ambiguous: it matches {shown}")

    def _resolve_item(self, batch: str, tail: str) -> str:
        """Item `tail` of `batch`: its position, or its id even when that is all digits."""
        if tail.isdigit():  # a position, unless the batch has none there and it names a task
            position = batch_item_id(batch, int(tail))
            if self.task_path(position).is_file():
                return position
            if not self._names_a_task(tail):
                try:
                    return self.resolve(position)  # (one moved aside is still found)
                except TaskNotFoundError:
                    raise TaskNotFoundError(f"batch {batch} has no item {tail}") from None
        found = self.resolve(tail)
        if self.state(found).get("parent") != batch:
            raise TaskNotFoundError(f"task {found} is not an item of batch {batch}")
        return found

    def _names_a_task(self, ref: str) -> bool:
        """Whether `ref` is a task's id or the prefix of one (an all-digit id is one in ~40)."""
        return any(i.startswith(ref) for i in self.ids())

    def _sealed_newest(self) -> str | None:
        """The newest task by the index's seal and the files it says to read, or None."""
        sealed = index.sealed_newest(self.tasks_dir)
        if sealed is None:
            return None
        best = (sealed.updated_at, sealed.task_id) if sealed.task_id is not None else None
        for task_id in sealed.read:  # each with a checkpoint log: its state may have moved on
            try:
                state = self.state(task_id)
            except (StoreError, TaskNotFoundError, ValueError):
                continue  # damaged or gone: the listing reports it
            candidate = (float(state.get("updated_at") or 0.0), task_id)
            best = candidate if best is None else max(best, candidate)
        return None if best is None else best[1]

    def events(self, task_id: str) -> Iterator[dict[str, Any]]:
        """The task's journal, oldest first; damaged lines are skipped with a warning."""
        return read_journal(self.journal_path(task_id), warn=self.warnings.append)

    def events_since(self, task: Task) -> Iterator[dict[str, Any]]:
        """The journal's events written after the task's last checkpoint."""
        return read_journal(self.journal_path(task.id), offset=task.journal_offset,
                            warn=self.warnings.append)

    def typed_events_since(self, task: Task) -> list[Event]:
        """`events_since` as typed events, the journal decoded in one call (resume reads it)."""
        return read_events(self.journal_path(task.id), offset=task.journal_offset,
                           warn=self.warnings.append)

    def keep_result(self, task_id: str, key: str, seq: int, result: dict[str, Any]) -> None:
        """Keep an action's whole result for recovery (`normalize.store.results`)."""
        try:
            results.keep(self.results_path(task_id), key, seq, result, fsync=self.fsync)
        except OSError as exc:
            raise StoreError(f"cannot keep a result of task {task_id} in "
                             f"{self.results_path(task_id)}: {exc.strerror or exc}",
                             hint=write_hint(exc)) from exc

    def kept_results(self, task: Task) -> dict[str, dict[str, Any]]:
        """The whole results kept since the task's last checkpoint, by action key."""
        return results.since(self.results_path(task.id), task.seq)

    def clear_results(self, task_id: str) -> None:
        results.clear(self.results_path(task_id))

    def last_seq(self, task: Task) -> int:
        """The highest event seq written for `task`, read from the journal's tail."""
        tail = tail_events(self.journal_path(task.id), limit=1)
        return max(task.seq, int(tail[-1].get("seq", 0)) if tail else 0)

    def tail(self, task_id: str, limit: int = 50) -> list[dict[str, Any]]:
        return tail_events(self.journal_path(task_id), limit)
