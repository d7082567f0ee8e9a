"""What memory and skills add to the agent's prompts: the 30-turn story of bench/tokens.py.

    python bench/memory_tokens.py
    python bench/memory_tokens.py --turns 12 --strategy conversation

The same scripted 30 replies (bench/tokens.py's review-and-fix of a generated
package) run four times under one context strategy: as today (no memory, no
skills: `--no-memory`), with 3 accepted memory entries that match the goal,
with 20 user skills installed (their catalog in the system prompt), and with
both. Tokens are estimated at 4 characters a token from the requests the
scripted model received; "cached prefix" is the share of the prompt that is
the system prompt (the part marked for prompt caching and byte-identical
from turn to turn), so a larger share is cheaper on a provider that caches.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from tokens import make_repo, script

GOAL = ("Review the shop package: read every module, tidy the docstrings, and check that "
        "each module imports.")
ENTRIES = ("Run the shop package's tests with `python -m pytest -q shop`",
           "Docstrings in the shop package are one line, imperative mood",
           "Each shop module must import on its own: check with `python -c 'import shop.X'`")


def _skills(base: Path, count: int) -> None:
    for n in range(count):
        name = f"team-skill-{n:02d}"
        (base / name).mkdir(parents=True)
        (base / name / "SKILL.md").write_text(
            f"---\nname: {name}\ndescription: Use when the task touches area {n} of our "
            f"services: conventions, commands and checks for it.\n---\n# Area {n}\n"
            "Follow the team's conventions.\n")


def run(variant: str, turns: int, strategy: str, work: Path) -> dict[str, Any]:
    from normalize.contract.driver import DriverServices
    from normalize.memory import MemoryEntry, open_memory
    from normalize.runner import RunOptions, load_spec, run_task, start_task
    from normalize.store import TaskStore
    from normalize.tables import ContextSettings
    from normalize.task import Limits
    from normalize.testing import ScriptedModel

    repo = make_repo(work / variant / "repo")
    home, config = work / variant / "home", work / variant / "config"
    config.mkdir(parents=True)
    memory = "memory" in variant
    if memory:
        store = open_memory(home, repo)
        for text in ENTRIES:
            store.add(MemoryEntry(text=text, state="accepted"))
        store.close()
    if "skills" in variant:
        _skills(config / "skills", 20)
    model = ScriptedModel(script(turns), model="bench")
    options = RunOptions(workspace=repo, approve="yes", fsync=False, memory=memory,
                         store=TaskStore(home, fsync=False),
                         services=DriverServices(model_factory=lambda *_a, **_o: model,
                                                 config_dir=config))
    spec = load_spec("dwim", repo)
    spec.context = ContextSettings(strategy=strategy)
    spec.limits = Limits(max_turns=turns + 5)
    outcome = run_task(start_task(spec, GOAL, options), options)
    if outcome.status.value != "done":
        raise RuntimeError(f"{variant}: ended {outcome.status.value}: {outcome.error}")
    system = [len(r.system) // 4 for r in model.requests]
    prompt = [len(r.system) // 4 + sum(len(str(m["content"])) for m in r.messages) // 4
              for r in model.requests]
    return {"variant": variant, "requests": len(prompt), "first": prompt[0],
            "last": prompt[-1], "total": sum(prompt),
            "cached_share": sum(system) / sum(prompt)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--strategy", default="task_tree")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="normalize-memory-bench-") as tmp:
        for variant in ("today", "memory", "skills", "memory+skills"):
            rows.append(run(variant, args.turns, args.strategy, Path(tmp)))
    base = rows[0]["total"]
    print(f"| {args.strategy}, {args.turns} turns | requests | first | last | total prompt "
          "| vs today | cached prefix |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['requests']} | {r['first']:,} | {r['last']:,} "
              f"| {r['total']:,} | {r['total'] / base:.3f}× | {r['cached_share']:.0%} |")


if __name__ == "__main__":
    main()
