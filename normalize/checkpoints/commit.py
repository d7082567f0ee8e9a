"""A task's net change as one commit on a branch of the person's own repository.

Unlike the shadow store, this is the person's git, used as their own commit
would use it: their config, identity (`user.name`/`user.email`, the `GIT_AUTHOR_*`
variables) and hooks. git starts through normalize's door for programs
(`normalize.programs`): found by the trusted rule (never from a `PATH` entry
inside the workspace), with the scrubbed environment (less what signing and
pushing need: the ssh and gpg agents, and for a push the GitHub token), its
hooks killed with it, under a time limit: `NORMALIZE_GIT_TIMEOUT` (default
600 s, a `pre-commit` hook may run tests) and `NORMALIZE_PUSH_TIMEOUT` for
the push (default 300 s).

How: the files the task changed are checked first (see `check`); then a
temporary worktree is added at HEAD on the new branch, the task's final
entries are written into its index (the objects copied from the shadow store,
so binary files, links and modes are exact) and checked out there, and
`git commit` runs in it, so the person's `pre-commit`, `prepare-commit-msg`,
`commit-msg` and `post-commit` hooks run as for any commit of theirs, on the
files of that commit (`no_verify` skips `pre-commit` and `commit-msg`, as
`git commit --no-verify` does; `post-checkout` runs when the worktree is
made, as for any `git worktree add`). The temporary worktree is removed after; the person's
working tree, index and current branch are never touched. A commit a hook
refused leaves no branch behind. A commit killed outright (SIGKILL while a
hook runs) cannot clean up: its temporary directory holds a note of the
process and the branch (`LEFTOVER`), and the next `commit` in that
repository removes the worktree of a process that is gone, and its branch
when that commit had made it and it still points where it started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from normalize import artefacts
from normalize.checkpoints.changes import TaskChanges
from normalize.checkpoints.restore import entry_state, state_of
from normalize.checkpoints.shadow import CheckpointError, Entry, shown
from normalize.errors import UsageError
from normalize.programs import Finished, run, time_limit, trusted_program
from normalize.redact import Redactor
from normalize.store import TaskStore
from normalize.task import Task

TRAILER = "Normalize-Task"
TMP_PREFIX = "normalize-commit-"
LEFTOVER = "commit.json"
"""Beside a temporary worktree: the process making it, its branch, whether that existed."""
SCRUBBED = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_PREFIX", "GIT_COMMON_DIR",
            "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")
"""Set by a surrounding git (normalize started from a hook): they would aim at another repo."""
AGENTS = ("SSH_AUTH_SOCK", "SSH_AGENT_PID", "GPG_AGENT_INFO", "XDG_RUNTIME_DIR", "DISPLAY",
          "WAYLAND_DISPLAY")
"""What the scrub would take that signing a commit (gpg's agent and its pinentry) or pushing
over ssh needs: `normalize commit` is the person's own command, at their terminal."""
TOKENS = ("GH_TOKEN", "GITHUB_TOKEN")
"""What a push's credential helper may need besides."""
GIT_TIMEOUT, PUSH_TIMEOUT = 600.0, 300.0


@dataclass
class CommitResult:
    """The branch made, its commit, the files in it, and where it was pushed."""

    branch: str
    commit: str
    base: str
    files: list[str] = field(default_factory=list)
    pushed: str | None = None


@dataclass
class PersonGit:
    """The person's git in one repository, with their environment (less a parent git's aim)."""

    git: str
    top: Path
    untrusted: tuple[Path, ...] = ()  # the workspace and the data home

    def run(self, *args: str, cwd: Path | None = None, input: bytes | None = None,
            check: bool = True) -> Finished:
        push = args[0] == "push"
        limit = time_limit("push", PUSH_TIMEOUT) if push else time_limit("git", GIT_TIMEOUT)
        proc = run([self.git, "--literal-pathspecs", *args], timeout=limit,
                   untrusted=self.untrusted, cwd=cwd or self.top, input=input,
                   env=dict.fromkeys(SCRUBBED), allow=AGENTS + TOKENS if push else AGENTS)
        if check and proc.code != 0:
            raise CheckpointError(f"git {args[0]} failed: {_last_lines(proc)}")
        return proc

    def out(self, *args: str, cwd: Path | None = None) -> str:
        return self.run(*args, cwd=cwd).stdout.decode().strip()

    def ref(self, name: str) -> str | None:
        proc = self.run("rev-parse", "-q", "--verify", f"{name}^{{commit}}", check=False)
        return proc.stdout.decode().strip() or None

    def entries(self, *args: str) -> dict[str, str]:
        """`path -> "MODE SHA"` from `ls-tree -z` or `ls-files -s -z` output."""
        out: dict[str, str] = {}
        for record in self.run(*args).stdout.split(b"\0"):
            if record:
                meta, path = record.split(b"\t", 1)
                parts = meta.decode().split()
                mode, sha = (parts[0], parts[2]) if parts[1] in ("blob", "commit") else parts[:2]
                out[os.fsdecode(path)] = f"{mode} {sha}"
        return out


def _last_lines(proc: Finished, count: int = 5) -> str:
    if proc.timed_out:
        return proc.why()
    text = proc.stderr.decode(errors="replace").strip() or \
        proc.stdout.decode(errors="replace").strip()
    return " | ".join(text.splitlines()[-count:]) or f"exit status {proc.code}"


def person_git(workspace: Path, home: Path) -> tuple[PersonGit, str]:
    """The person's repository holding `workspace`, and the workspace's path inside it."""
    git = trusted_program("git", (workspace, home))
    if git is None:
        raise UsageError("git is not installed (in a system directory or a PATH entry outside "
                         "the workspace)")
    untrusted = (workspace, home)
    probe = PersonGit(git, workspace, untrusted)
    proc = probe.run("rev-parse", "--show-toplevel", check=False)
    if proc.code != 0:
        raise UsageError(f"{workspace}: the task's workspace is not in a git repository")
    top = Path(proc.stdout.decode().strip()).resolve()
    prefix = os.path.relpath(workspace.resolve(), top)
    inside = "" if prefix == "." else prefix.replace(os.sep, "/") + "/"
    return PersonGit(git, top, untrusted), inside


def _encode(entry: Entry | None) -> str:
    return "" if entry is None else f"{entry.mode} {entry.sha}"


def check(pg: PersonGit, prefix: str, workspace: Path, before: dict[str, Entry | None],
          after: dict[str, Entry | None]) -> None:
    """Refuse when a file the task changed holds changes that are not the task's.

    HEAD must hold each file as the task found it; the index and the working
    tree may hold it as HEAD has it or as the task left it, nothing else.
    """
    paths = list(after)
    full = [prefix + p for p in paths]
    head = pg.entries("ls-tree", "-z", "HEAD", "--", *full)
    index = pg.entries("ls-files", "-s", "-z", "--", *full)
    if all(head.get(prefix + p, "") == _encode(after[p]) for p in paths):
        raise UsageError("nothing to commit: HEAD already holds the task's change")
    moved = [p for p in paths if head.get(prefix + p, "") != _encode(before[p])]
    if moved:
        raise UsageError("refused: HEAD changed since the task started, in "
                         f"{', '.join(map(shown, moved))}")
    unrelated = []
    for rel in paths:
        ok_entries = {head.get(prefix + rel, ""), _encode(after[rel])}
        ok_states = {entry_state(before[rel]), entry_state(after[rel])}
        if index.get(prefix + rel, "") not in ok_entries or \
                state_of(workspace, rel) not in ok_states:
            unrelated.append(rel)
    if unrelated:
        raise UsageError("refused: uncommitted changes that are not the task's in "
                         f"{', '.join(map(shown, unrelated))} (commit or set them aside first)")


def _copy_objects(pg: PersonGit, changes: TaskChanges, after: dict[str, Entry | None]) -> None:
    """Write the task's final blobs into the person's object store."""
    shas = sorted({e.sha for e in after.values() if e is not None})
    for sha, data in changes.repo.blobs(shas).items():
        made = pg.run("hash-object", "-w", "--no-filters", "--stdin",
                      input=data).stdout.decode().strip()
        if made != sha:
            raise CheckpointError(f"the repository names objects differently ({made} for "
                                  f"{sha}): a SHA-256 repository is not supported")


def branch_base(pg: PersonGit, name: str, head: str) -> bool:
    """Whether `name` already exists (pointing at HEAD); refuse one that points elsewhere."""
    if pg.run("check-ref-format", "--branch", name, check=False).code != 0:
        raise UsageError(f"--branch {name!r}: not a valid branch name")
    existing = pg.ref(f"refs/heads/{name}")
    if existing is not None and existing != head:
        raise UsageError(f"branch {name} already exists with other commits (choose another "
                         "with --branch, or delete it)")
    return existing is not None


def message_of(task: Task, message: str | None, *, summary_is_prose: bool = True) -> str:
    """The commit message: the given one, or a subject and a body made from the task.

    A model's summary ("f returns 2 now") is the subject, the goal below it; a workflow's
    summary is the run's status line ("its one step finished"), so the goal (else the
    workflow's name) is the subject and the status goes below (`summary_is_prose=False`).
    It is written through the artefact door, redacted (a commit leaves the machine when it
    is pushed; the exact summary stays in the task store)."""
    if message and message.strip():
        return f"{message.strip()}\n\n{TRAILER}: {task.id}\n"
    summary, goal = task.summary.strip(), task.goal.strip()
    name = str(task.config.spec_table.get("name") or "")
    first = summary if summary_is_prose else goal or (f"{name} workflow" if name else "")
    first = first or summary or goal or f"normalize task {task.id}"
    lines = first.splitlines()
    subject = lines[0] if len(lines[0]) <= 72 else lines[0][:71].rstrip() + "…"
    rest = [*lines[1:], *(t for t in (goal, summary) if t and t not in first)]
    body = "\n".join(rest).strip()
    return f"{subject}\n\n{body + chr(10) + chr(10) if body else ''}{TRAILER}: {task.id}\n"


def commit_task(store: TaskStore, task: Task, *, branch: str | None = None,
                message: str | None = None, push: str | None = None,
                no_verify: bool = False, summary_is_prose: bool = True) -> CommitResult:
    """Make branch `branch` (default `normalize/ID8`) holding the task's net change."""
    time_limit("git", GIT_TIMEOUT)  # a bad setting is said before anything is made
    if push is not None:
        time_limit("push", PUSH_TIMEOUT)
    changes = TaskChanges.open(store, task)
    before, after = changes.net_entries()
    after = {p: e for p, e in after.items() if _encode(e) != _encode(before[p])}
    if not after:
        raise UsageError(f"task {task.id} has no net change to commit")
    workspace = Path(task.workspace)
    pg, prefix = person_git(workspace, store.home)
    sweep_leftovers(pg)
    head = pg.ref("HEAD")
    if head is None:
        raise UsageError(f"{pg.top}: the repository has no commit yet to branch from")
    name = artefacts.branch_name(branch or f"normalize/{task.id[:8]}")
    existed = branch_base(pg, name, head)
    check(pg, prefix, workspace, before, after)
    _copy_objects(pg, changes, after)
    text = message_of(task, message, summary_is_prose=summary_is_prose)
    sha = _commit_in_worktree(pg, prefix, name, head, after, text,
                              existed=existed, no_verify=no_verify,
                              redactor=Redactor.for_workspace(task.workspace))
    result = CommitResult(branch=name, commit=sha, base=head, files=list(after))
    if push is not None:
        proc = pg.run("push", "--porcelain", "--", push, f"refs/heads/{name}:refs/heads/{name}",
                      check=False)
        if proc.code != 0:
            raise CheckpointError(f"branch {name} made ({sha[:12]}) but not pushed to {push}: "
                                  f"{_last_lines(proc)}")
        result.pushed = push
    return result


def _commit_in_worktree(pg: PersonGit, prefix: str, name: str, head: str,
                        after: dict[str, Entry | None], message: str, *, existed: bool,
                        no_verify: bool, redactor: Redactor) -> str:
    """`git commit` in a temporary worktree on `name`; the branch is put back if it fails."""
    tmp = Path(tempfile.mkdtemp(prefix=TMP_PREFIX))
    wt = tmp / "wt"
    _note(tmp, name, head, existed=existed)
    try:
        pg.run("worktree", "add", "-q", "-B" if existed else "-b", name, str(wt), head)
        lines = "".join(f"{e.mode} {e.sha}\t{prefix}{p}\0" if e is not None else
                        f"0 {'0' * 40}\t{prefix}{p}\0" for p, e in after.items())
        pg.run("update-index", "-z", "--index-info", cwd=wt, input=lines.encode())
        for rel, entry in after.items():
            target = wt / (prefix + rel)
            if entry is None and (target.exists() or target.is_symlink()):
                target.unlink()
        kept = [prefix + p for p, e in after.items() if e is not None]
        if kept:
            pg.run("checkout-index", "-f", "-q", "--", *kept, cwd=wt)
        artefacts.write_text(tmp / "MSG", message, redactor)
        verify = ["--no-verify"] if no_verify else []
        proc = pg.run("commit", "-q", "--cleanup=whitespace", "-F", str(tmp / "MSG"), *verify,
                      cwd=wt, check=False)
        if proc.code != 0:
            raise UsageError(f"git commit refused (a hook, or the repository's set-up): "
                             f"{_last_lines(proc)}")
        return pg.out("rev-parse", "HEAD", cwd=wt)
    except BaseException:
        _put_back(pg, name, head, existed=existed, wt=wt)
        raise
    finally:
        pg.run("worktree", "remove", "--force", str(wt), check=False)
        pg.run("worktree", "prune", check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def _put_back(pg: PersonGit, name: str, head: str, *, existed: bool, wt: Path) -> None:
    """Leave the branch as it was before a failed commit (absent, or at HEAD)."""
    pg.run("worktree", "remove", "--force", str(wt), check=False)
    if existed:
        pg.run("update-ref", f"refs/heads/{name}", head, check=False)
    else:
        pg.run("update-ref", "-d", f"refs/heads/{name}", check=False)


def sweep_leftovers(pg: PersonGit) -> list[str]:
    """Remove the temporary worktrees of killed commits (their process is gone); which."""
    listed = pg.run("worktree", "list", "--porcelain", check=False).stdout.decode(
        errors="surrogateescape")
    removed = []
    for line in listed.splitlines():
        if not line.startswith("worktree "):
            continue
        wt = Path(line.removeprefix("worktree "))
        note = _leftover(wt)
        pid = note.get("pid") if note is not None else None
        if note is None or not isinstance(pid, int) or _alive(pid):
            continue
        pg.run("worktree", "remove", "--force", str(wt), check=False)
        branch, head = str(note.get("branch", "")), str(note.get("head", ""))
        if branch and head and not note.get("existed") and pg.ref(f"refs/heads/{branch}") == head:
            pg.run("update-ref", "-d", f"refs/heads/{branch}", head, check=False)
        shutil.rmtree(wt.parent, ignore_errors=True)
        removed.append(str(wt))
    if removed:
        pg.run("worktree", "prune", check=False)
    return removed


def _note(tmp: Path, branch: str, head: str, *, existed: bool) -> None:
    """Say beside the temporary worktree who makes it, so a next commit can sweep it."""
    (tmp / LEFTOVER).write_text(json.dumps({"pid": os.getpid(), "branch": branch, "head": head,
                                            "existed": existed}))


def _leftover(wt: Path) -> dict[str, object] | None:
    """The note beside a temporary worktree of `commit` (None: not one of ours)."""
    if wt.name != "wt" or not wt.parent.name.startswith(TMP_PREFIX):
        return None
    try:
        note = json.loads((wt.parent / LEFTOVER).read_text())
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):  # a zombie (killed, not yet reaped) is gone too
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    return True
