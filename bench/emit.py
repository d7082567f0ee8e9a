"""A step's five events through the one emitter, in CPU time: this tree beside another (#43).

    python bench/emit.py --base /tmp/old-tree     # e.g. `git archive main | tar -x -C DIR`
    python bench/emit.py --base DIR --rounds 5 --steps 4000

Each figure is one fresh process emitting the events of N no-op steps
(`step_started`, `decision_made`, `action_started`, `action_finished`,
`checkpoint_saved`) through `Emitter.emit` with the redactor a run uses: stamped,
redacted, written to a journal (no fsync). Figures are CPU time (the process's
own, steadier than wall time on a shared machine), best of 5 passes, median of
the rounds; the trees' processes alternate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one(steps: int) -> float:
    """µs of CPU per step of five events (best of 5 passes), in this process."""
    from normalize.events import (
        ActionFinished,
        ActionStarted,
        DecisionMade,
        Emitter,
        StepStarted,
        TaskSaved,
    )
    from normalize.redact import Redactor
    from normalize.store.journal import JournalWriter

    with tempfile.TemporaryDirectory(prefix="nemit-") as tmp:
        emitter = Emitter("0a1b2c3d", journal=JournalWriter(Path(tmp) / "j.jsonl", fsync=False),
                          redact=Redactor.for_workspace(tmp, walk=False))

        def step(i: int) -> None:
            command = f"note --turns 1 step {i}"
            action = {"tool": "note", "params": {"args": ["--turns", "1", "step", str(i)],
                                                 "body": None},
                      "text": command, "key": f"{i}.0", "idempotency": ""}
            emitter.emit(StepStarted(name=f"s{i}", index=i, total=steps))
            emitter.emit(DecisionMade(turn=i, actions=[action]))
            emitter.emit(ActionStarted(turn=i, key=f"{i}.0", tool="note", command=command,
                                       action=action))
            emitter.emit(ActionFinished(turn=i, key=f"{i}.0", tool="note", command=command,
                                        status="success", duration=0.0001, preview="noted"))
            emitter.emit(TaskSaved(turn=i, bytes=1500))

        for i in range(200):
            step(i)
        best = float("inf")
        for _ in range(5):
            start = time.process_time()
            for i in range(steps):
                step(i)
            best = min(best, (time.process_time() - start) / steps * 1e6)
        return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another normalize source tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(one(args.steps))
        return 0
    trees = {"this tree": None, **({"base": args.base} if args.base else {})}
    got: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            env = {**os.environ, **({"PYTHONPATH": str(tree)} if tree else {})}
            out = subprocess.run([sys.executable, str(Path(__file__)), "--one", "--steps",
                                  str(args.steps)], env=env, capture_output=True, text=True,
                                 check=True)
            got[name].append(float(out.stdout))
    now = statistics.median(got["this tree"])
    print(f"this tree: {now:.1f} µs of CPU a step (five events)")
    if args.base:
        was = statistics.median(got["base"])
        print(f"base ({args.base}): {was:.1f} µs; this tree ÷ base {now / was:.2f}×")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
