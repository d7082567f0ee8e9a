"""Budgets that bind: a child's is carved from its parent's, and what children spend counts.

Scripted usage is priced (`[workflow.llm.prices]` names each script), so each
model request costs about $0.014 here and the figures below are real spending.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from subtasks_support import cli, flow, journal, script, task_state, tasks, workspace

from normalize.engine import NEXT_REQUEST

PRICE = 10.0  # USD per million tokens of every kind: about $0.014 a request
PRICES = dict.fromkeys(("parent", "kid1", "kid2"), PRICE)
WRITES = [f"write a.txt <<EOF\nversion {n}\nEOF" for n in range(1, 9)]


def run(tmp_path: Path, home: Path, parent: list[str], budget: float,
        kids: int = 1) -> dict[str, Any]:
    """Run a priced scripted parent whose children write a.txt eight times; its task."""
    ws = workspace(tmp_path, {"a.txt": "start\n"})
    for number in range(1, kids + 1):
        script(tmp_path / f"kid{number}.json", [*WRITES, "done wrote"])
    model = script(tmp_path / "parent.json", parent)
    wf = flow(tmp_path / "parent.toml", model, budget=budget, prices=PRICES)
    done = cli("run", str(wf), "--goal", "spend", "-w", str(ws), cwd=ws, home=home)
    assert "Traceback" not in done.stderr, done.stderr
    task = next(t for t in tasks(home) if not t.get("parent"))
    return task


def request_costs(home: Path, task_id: str) -> list[float]:
    return [e["cost_usd"] for e in journal(home, task_id) if e["type"] == "model_replied"]


def spawn(tmp_path: Path, kid: int, *flags: str) -> str:
    return " ".join(["spawn", *flags, "--model", f"scripted:{tmp_path}/kid{kid}.json",
                     f'"write a.txt, kid {kid}"'])


def test_a_childs_budget_binds_and_its_spending_counts_against_the_parents(
        tmp_path: Path, normalize_home: Path) -> None:
    parent = run(tmp_path, normalize_home, [spawn(tmp_path, 1, "--isolated", "--budget", "0.04"),
                                            *WRITES, "done"], budget=0.1)
    kid = task_state(normalize_home, parent["children"][0])
    costs = request_costs(normalize_home, kid["id"])
    assert all(0.01 < c < 0.02 for c in costs), costs  # the prices bind scripted usage
    assert kid["status"] == "limit_reached" and "reached the budget" in kid["summary"]
    assert kid["limits"]["max_cost_usd"] == 0.04
    # it stopped before the request that, costing what its requests did, would overrun it
    assert sum(costs) <= 0.04 < sum(costs) + sum(costs) / len(costs)
    assert kid["turn"] < len(WRITES)

    own = sum(request_costs(normalize_home, parent["id"]))
    assert parent["usage"]["children_cost_usd"] == round(sum(costs), 8)
    assert parent["status"] == "limit_reached"
    assert "of it by its sub-tasks" in parent["summary"]
    # the parent stopped because its children's spending counted: alone it had budget left
    assert own < 0.1 <= own + sum(costs)
    assert own + sum(costs) - 0.1 < max(request_costs(normalize_home, parent["id"]))


def test_children_together_get_no_more_than_the_parent_has_left(
        tmp_path: Path, normalize_home: Path) -> None:
    both = "parallel\n" + "\n".join(spawn(tmp_path, n, "--isolated") for n in (1, 2))
    too_dear = spawn(tmp_path, 1, "--budget", "0.05")
    parent = run(tmp_path, normalize_home, [both, too_dear, "done"], budget=0.1, kids=2)
    kids = [task_state(normalize_home, k) for k in parent["children"]]
    first = request_costs(normalize_home, parent["id"])[0]
    budgets = sorted(k["limits"]["max_cost_usd"] for k in kids)
    # each took half of what was left when it was made (the other's budget reserved)
    assert budgets[1] == round((0.1 - first) / 2, 6)
    assert budgets[0] == round((0.1 - first - budgets[1]) / 2, 6)
    assert sum(budgets) <= 0.1 - first
    for kid in kids:
        spent = request_costs(normalize_home, kid["id"])
        assert kid["status"] == "limit_reached"
        # never over its budget, and stopped no earlier than the guess of its next request says
        guess = NEXT_REQUEST * sum(spent) / len(spent)
        assert sum(spent) <= kid["limits"]["max_cost_usd"] < sum(spent) + guess
    # the children together stayed inside what the parent had left when it made them
    assert parent["usage"]["children_cost_usd"] <= 0.1 - first
    refused = [e for e in journal(normalize_home, parent["id"])
               if e["type"] == "action_finished" and e["tool"] == "spawn"][-1]
    assert refused["status"] == "error" and "spawn refused" in refused["error"], refused
    assert len(parent["children"]) == 2  # the third was never made
    assert json.dumps(parent["usage"]).count("children_cost_usd") == 1
    shown = cli("tasks", "show", parent["id"], cwd=tmp_path, home=normalize_home).stdout
    assert f"(+ ${parent['usage']['children_cost_usd']:.4f} by sub-tasks)" in shown
