"""Best-of-N: several isolated children try one goal; a pick command judges; the best lands.

`spawn --attempts N [--pick COMMAND] [--model A,B,C] GOAL` (and `normalize
agent --attempts N`) makes N isolated children of the same goal, the models
taken in turn, each with an equal share of the budget, and runs them side by
side. When they are at rest, COMMAND runs in each finished child's copy under
the sandbox; `children.best_attempt` picks one by `children.PICK_RULE` and its
diff is applied to the parent's workspace (all or nothing, as any child's).
Every copy is kept for inspection (`normalize tasks clean` removes them).
An attempt cannot bend its own judge: one whose change touches what the pick
reads (`bent`: a file the pick command names or shadows, a test runner's
configuration, a test file the base already had) is disqualified before its
pick runs, and said so in the comparison.
Each attempt is a `child_collected` event with its pick exit and diff stat,
so `tasks show` and the report compare them side by side.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from normalize.errors import ToolError
from normalize.events import ChildCollected
from normalize.subtasks.children import (
    Attempt,
    ChildOutcome,
    SpawnRequest,
    best_attempt,
    child_id_for,
)
from normalize.task import TaskStatus

if TYPE_CHECKING:
    from collections.abc import Callable

    from normalize.checkpoints.isolate import Changes
    from normalize.events import Event
    from normalize.task import Task

    Record = Callable[[Event], None]


class Spawner(Protocol):
    """What best-of-N needs of the spawner that runs one task's children (`subtasks.spawner`)."""

    task: Task
    judge: Callable[[str, str], int] | None

    @property
    def max_children(self) -> int: ...
    def left(self) -> float | None: ...
    def make(self, request: SpawnRequest, record: Record) -> str: ...
    def run(self, child_id: str) -> bool: ...
    def load(self, child_id: str) -> Task | None: ...
    def changes(self, child: Task) -> Changes | None: ...
    def apply(self, changes: Changes, copy_dir: Path) -> list[str]: ...
    def copy_of(self, child_id: str) -> str: ...
    def count_spending(self) -> None: ...
    def collected_before(self, child_id: str) -> bool: ...


def attempt_requests(spawner: Spawner, request: SpawnRequest) -> list[SpawnRequest]:
    """The children a best-of-N spawn asks for: isolated, merged by the pick, kept."""
    named = [m.strip() for m in (request.model or "").split(",") if m.strip()]
    models: list[str | None] = [*named] or [None]
    budget = request.budget_usd or _share(spawner, request.attempts)
    return [replace(request, key=f"{request.key}#{n}", model=models[(n - 1) % len(models)],
                    attempts=1, pick="", isolated=True, merge="none",
                    budget_usd=budget)
            for n in range(1, request.attempts + 1)]


def _share(spawner: Spawner, attempts: int) -> float | None:
    """An equal share of what the parent has left for children (None: no budget)."""
    left = spawner.left()
    if left is None:
        return None
    if left <= 0:
        raise ToolError("spawn refused: the task's budget is spent or promised to its "
                        "children already")
    return math.floor(left / attempts * 1e6) / 1e6


def best_of(spawner: Spawner, request: SpawnRequest, record: Record) -> ChildOutcome:
    """Run the attempts side by side, judge them, apply the best; the outcome compares all."""
    from concurrent.futures import ThreadPoolExecutor  # (with its logging: not at every start)

    if request.pick and spawner.judge is None:
        raise ToolError("spawn --pick is not available in this run")
    asks = attempt_requests(spawner, request)
    _check_room(spawner, asks)
    ids = [spawner.make(ask, record) for ask in asks]
    with ThreadPoolExecutor(len(ids), thread_name_prefix="attempt") as pool:
        stopped = list(pool.map(spawner.run, ids))
    if any(stopped):
        return ChildOutcome(ids[0], "interrupted",
                            error="stopped with its parent; `resume` the parent to continue")
    judged = [_judge(spawner, n, child_id, request.pick) for n, child_id in enumerate(ids, 1)]
    attempts = [attempt for attempt, _ in judged]
    best = best_attempt(attempts)
    outcome = _outcome(spawner, attempts, best)
    if best is not None:
        best.picked = True
        changes = judged[best.number - 1][1]
        if request.merge == "apply" and changes is not None and not changes.empty:
            from normalize.checkpoints.landing import MergeError  # (isolated children only)

            try:
                outcome.conflicts = spawner.apply(changes, Path(spawner.copy_of(best.child_id)))
            except MergeError as exc:  # nothing written: the copies stay, as they do anyway
                outcome.unmerged = str(exc)
            outcome.applied = not outcome.conflicts and not outcome.unmerged
    spawner.count_spending()
    for attempt in attempts:
        _record(spawner, record, request.key, attempt, outcome)
    return outcome


def _check_room(spawner: Spawner, asks: list[SpawnRequest]) -> None:
    """Refuse before any attempt is made when they would not all fit the children's limit."""
    new = [a for a in asks if spawner.load(child_id_for(spawner.task.id, a)) is None]
    most = spawner.max_children
    if new and len(spawner.task.children) + len(new) > most:
        raise ToolError(f"spawn refused: {len(asks)} attempts would take this task past its "
                        f"{most} children ({len(spawner.task.children)} started already)")


def _judge(spawner: Spawner, number: int, child_id: str,
           pick: str) -> tuple[Attempt, Changes | None]:
    """One attempt as compared: its status, cost, diff and (if it ended done) its pick exit."""
    child = spawner.load(child_id)
    if child is None:
        return Attempt(number, child_id, "failed"), None
    attempt = Attempt(number, child_id, child.status.value, child.usage.total_cost_usd)
    changes = spawner.changes(child)
    if changes is not None:
        attempt.diff_stat, attempt.diff_lines = changes.stat, _lines(changes.patch)
    if pick and changes is not None:
        attempt.disqualified = bent(changed_paths(changes.patch), pick)
    if pick and child.status is TaskStatus.DONE and spawner.judge is not None \
            and not attempt.disqualified:
        attempt.pick_exit = spawner.judge(child.workspace, pick)
    return attempt, changes


JUDGE_FILES = frozenset({
    "conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "noxfile.py",
    "Makefile", "makefile", "GNUmakefile", "package.json", "sitecustomize.py",
    "usercustomize.py", ".pytest.ini", "jest.config.js", "vitest.config.ts",
})
"""Files that configure how tests and checks run: no attempt may change them."""


def changed_paths(patch: bytes) -> dict[str, bool]:
    """The paths a binary-safe git patch touches, each with whether it is new."""
    found: dict[str, bool] = {}
    current = ""
    for raw in patch.splitlines():
        line = raw.decode("utf-8", errors="replace")
        if line.startswith("diff --git a/"):
            rest = line[len("diff --git a/"):]
            half = (len(rest) - 3) // 2  # "X b/X": the same path twice
            current = rest[:half] if rest[half:half + 3] == " b/" else rest.split(" b/")[0]
            found[current] = False
        elif line.startswith("new file mode") and current:
            found[current] = True
    return found


def _is_test(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    parts = path.split("/")[:-1]
    return (name.startswith("test_") or name.endswith(("_test.py", ".test.js", ".test.ts"))
            or any(part in ("tests", "test", "__tests__") for part in parts))


def bent(paths: dict[str, bool], pick: str) -> str:
    """The first path in `paths` that could bend the pick command (empty: none)."""
    import shlex

    try:
        words = shlex.split(pick)
    except ValueError:
        words = pick.split()
    named = {w.removeprefix("./") for w in words if not w.startswith("-")}
    stems = {w.rsplit("/", 1)[-1].split(".")[0] for w in named}  # `-m pytest`: pytest.py
    for path, new in paths.items():
        name = path.rsplit("/", 1)[-1]
        module = path.removesuffix("/__init__.py").removesuffix(".py")  # shadows a program
        if path in named or name in JUDGE_FILES or (_is_test(path) and not new) \
                or ("/" not in module and module in stems):
            return path
    return ""


def _lines(patch: bytes) -> int:
    """Lines added and removed in a patch."""
    return sum(1 for line in patch.splitlines()
               if line[:1] in (b"+", b"-") and not line.startswith((b"+++ ", b"--- ")))


def _outcome(spawner: Spawner, attempts: list[Attempt], best: Attempt | None) -> ChildOutcome:
    """The spawn's outcome: the best attempt's, with the cost of all and every row."""
    cost = round(sum(a.cost_usd for a in attempts), 8)
    if best is None:
        return ChildOutcome("", "failed", cost_usd=cost, attempts=attempts,
                            error="no attempt passed (see the comparison)")
    child = spawner.load(best.child_id)
    return ChildOutcome(best.child_id, best.status, child.summary if child else "", cost,
                        child.turn if child else 0, diff_stat=best.diff_stat,
                        attempts=attempts)


def _record(spawner: Spawner, record: Record, key: str, attempt: Attempt,
            outcome: ChildOutcome) -> None:
    """One attempt's `child_collected` (not again when a re-run after a crash collects it)."""
    if spawner.collected_before(attempt.child_id):
        return
    child = spawner.load(attempt.child_id)
    record(ChildCollected(key=f"{key}#{attempt.number}", child_id=attempt.child_id,
                          status=attempt.status, summary=child.summary if child else "",
                          cost_usd=attempt.cost_usd, applied=attempt.picked and outcome.applied,
                          conflicts=outcome.conflicts if attempt.picked else [],
                          attempt=attempt.number, pick_exit=attempt.pick_exit,
                          diff_stat=attempt.diff_stat, picked=attempt.picked))
