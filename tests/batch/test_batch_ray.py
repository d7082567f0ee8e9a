"""`normalize batch --executor ray` on a real cluster on this machine: a head and two nodes.

One cluster serves the module (it takes tens of seconds to start on a busy
machine); the node-removal test comes last, as it leaves one node. Each item
runs as a `normalize` process on a Ray worker, tied to it (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    batch_id,
    cli,
    edit_items,
    effects,
    in_step,
    needs_sandbox,
    progress,
    start,
    state,
    wait_for,
)

pytest.importorskip("ray", reason="ray is not installed (.ci/run installs it with [test])")

pytestmark = [pytest.mark.ray, needs_sandbox]
STORE_MB = 80 * 1024 * 1024  # each node's object store: the jobs pass a few bytes


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    saved = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    made = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": False, "object_store_memory": STORE_MB})
    try:
        for _ in range(2):
            made.add_node(num_cpus=1, object_store_memory=STORE_MB)
        made.wait_for_nodes()
        yield made
    finally:
        import ray

        if ray.is_initialized():  # this process looked at the nodes (`_nodes`)
            ray.shutdown()
        made.shutdown()
        if saved is None:
            os.environ.pop("RAY_USAGE_STATS_ENABLED", None)
        else:
            os.environ["RAY_USAGE_STATS_ENABLED"] = saved


def results(root: Path, home: Path, batch: str) -> list[tuple[str, str, str]]:
    """Each item's status, its summary and its repository's file, in order."""
    out = []
    for row in progress(home, batch):
        task = state(home, row["task_id"])
        out.append((task["status"], task["summary"],
                    (Path(task["workspace"]) / "f.txt").read_text()))
    assert all(Path(state(home, r["task_id"])["workspace"]).is_relative_to(root)
               for r in progress(home, batch))
    return out


def test_forty_repositories_give_the_same_result_on_ray_as_locally(
        cluster: Any, tmp_path: Path) -> None:
    outcomes = {}
    for executor in ("local", "ray"):
        root = tmp_path / executor
        root.mkdir()
        items = edit_items(root, 40)
        home = root / "home"
        done = cli("batch", "wf.toml", "--items", str(items), "--executor", executor,
                   "--address", cluster.address, "--concurrency", "2", cwd=root, home=home)
        assert done.returncode == 0, done.stdout + done.stderr
        batch = batch_id(done.stdout)
        assert effects(root) == {f"r{n:02d}": 1 for n in range(40)}
        outcomes[executor] = results(root, home, batch)
        if executor == "ray":  # spread over both nodes, each a node id from the cluster
            nodes = {r["node"] for r in progress(home, batch)}
            alive = {n["NodeID"] for n in _nodes(cluster)}
            assert len(nodes) == 2 and nodes <= alive
    assert outcomes["ray"] == outcomes["local"]
    assert outcomes["ray"][7] == ("done", "all 3 steps finished", "repo 7\nword7\n")


def test_an_item_process_killed_on_a_worker_is_retried_and_finishes_once(
        cluster: Any, tmp_path: Path) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 1, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--executor", "ray",
                   "--address", cluster.address, "--json", cwd=tmp_path, home=home,
                   HOME=str(person))
    try:
        batch = _first_batch(parent)
        item = _waiting_item(home, batch)
        pid = json.loads((home / "tasks" / f"{item}.owner").read_text())["pid"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: progress(home, batch)[0]["attempts"] == 2, 120, "a second attempt")
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    assert effects(tmp_path) == {"r00": 1} and state(home, item)["status"] == "done"


def test_a_node_removed_mid_item_finishes_elsewhere_once_with_a_higher_epoch(
        cluster: Any, tmp_path: Path) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 1, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--executor", "ray",
                   "--address", cluster.address, "--json", cwd=tmp_path, home=home,
                   HOME=str(person))
    try:
        batch = _first_batch(parent)
        item = _waiting_item(home, batch)
        first_epoch = json.loads((home / "tasks" / f"{item}.owner").read_text())["epoch"]
        where = home / "tasks" / item / "node"
        first = where.read_text()
        doomed = [n for n in cluster.list_all_nodes() if n.node_id == first]
        assert doomed, "the item runs on a worker node of the cluster"
        cluster.remove_node(doomed[0])  # its raylet and workers die, the item's process too
        wait_for(lambda: where.read_text() != first, 120, "the item again, on another node")
        wait_for(lambda: in_step(home, item, "wait", run=2), 120, "its wait step again")
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    assert effects(tmp_path) == {"r00": 1}  # the edit ran once: the retry resumed after it
    task = state(home, item)
    assert task["status"] == "done"
    assert json.loads((home / "tasks" / f"{item}.owner").read_text())["epoch"] > first_epoch
    assert progress(home, batch)[0]["node"] not in ("", first)


def _first_batch(parent: Any) -> str:
    assert parent.stdout is not None
    line = parent.stdout.readline()
    assert line, parent.stderr.read() if parent.stderr else ""
    batch: str = json.loads(line)["batch"]
    return batch


def _waiting_item(home: Path, batch: str) -> str:
    """The item's id once its effect is done and it waits for its gate."""
    wait_for(lambda: progress(home, batch)[0]["stage"] == "submitted", 120, "submitted")
    item: str = progress(home, batch)[0]["task_id"]
    wait_for(lambda: in_step(home, item, "1.0"), 180, "the item waiting for its gate")
    return item


def _nodes(cluster: Any) -> list[dict[str, Any]]:
    import ray

    if not ray.is_initialized():
        ray.init(address=cluster.address, log_to_driver=False, include_dashboard=False)
    return [n for n in ray.nodes() if n["Alive"]]
