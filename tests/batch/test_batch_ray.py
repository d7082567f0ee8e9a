"""`normalize batch --executor ray` on a real cluster on this machine: a head and two nodes.

One cluster serves the module (it takes tens of seconds to start on a busy
machine); the node-removal test comes last, as it leaves one node. Each item
runs as a `normalize` process on a Ray worker, tied to it (PR_SET_PDEATHSIG).
The head runs Ray's dashboard (on a free port), which takes `ray job submit`.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_support import (
    PY,
    VENV_BIN,
    batch_id,
    cli,
    edit_items,
    effects,
    in_step,
    needs_sandbox,
    progress,
    runs_of,
    start,
    state,
    wait_for,
)

from normalize.store.ownership import lease_held, pid_alive

pytest.importorskip("ray", reason="ray is not installed (.ci/run installs it with [test])")

pytestmark = [pytest.mark.ray, needs_sandbox]
STORE_MB = 80 * 1024 * 1024  # each node's object store: the jobs pass a few bytes


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    saved = os.environ.get("RAY_USAGE_STATS_ENABLED")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    # free ports for the dashboard and the head's job agent: the agent's default (52365) is
    # fixed, so another cluster on the machine (another suite's) left `ray job submit` with
    # "No available agent" for good
    made = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 0, "include_dashboard": True, "dashboard_host": "127.0.0.1",
        "dashboard_port": _free_port(), "dashboard_agent_listen_port": _free_port(),
        "object_store_memory": STORE_MB})
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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


def test_an_item_is_a_fork_of_a_warm_worker_in_an_actor_and_a_killed_worker_retries_it_once(
        cluster: Any, tmp_path: Path) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 2, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--executor", "ray",
                   "--address", cluster.address, "--json", cwd=tmp_path, home=home,
                   HOME=str(person), NORMALIZE_BATCH_WORKERS="warm")
    try:
        batch = _first_batch(parent)
        item = _waiting_item(home, batch)
        child = json.loads((home / "tasks" / f"{item}.owner").read_text())["pid"]
        worker = _ppid(child)
        assert "normalize.cli.worker" in _cmdline(worker)
        assert "WarmSlot" in _cmdline(_ppid(worker))  # the worker is the actor's
        os.kill(worker, signal.SIGKILL)  # the item's process goes with it
        wait_for(lambda: progress(home, batch)[0]["attempts"] == 2, 120, "a second attempt")
    finally:
        gate.write_text("go")
        out, err = parent.communicate(timeout=300)
    assert parent.returncode == 0, out + err
    assert effects(tmp_path) == {"r00": 1, "r01": 1}  # the edit not repeated
    assert state(home, item)["status"] == "done" and runs_of(home, item) == 2


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_a_batch_run_as_a_ray_job_stopped_then_resubmitted_runs_only_the_rest(
        cluster: Any, tmp_path: Path) -> None:
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 5, gates={1: gate})
    home = tmp_path / "home"
    # `ray job stop` sends SIGTERM, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S: long enough
    # here for the parent to stop its items on a loaded machine
    first, again = (f"{word}-{uuid.uuid4().hex[:8]}" for word in ("batch", "resume"))
    _job(cluster, first, tmp_path, home, person, "batch", "wf.toml", "--items", str(items),
         "--executor", "ray", "--concurrency", "1", wait=False,
         runtime_env={"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "120"}})
    wait_for(lambda: any(home.glob("batches/*/manifest.json")), 180, "the job's batch")
    batch = next(home.glob("batches/*/manifest.json")).parent.name
    wait_for(lambda: progress(home, batch)[1]["stage"] == "submitted", 180, "item 1 submitted")
    item = progress(home, batch)[1]["task_id"]
    wait_for(lambda: in_step(home, item, "1.0"), 180, "item 1 waiting for its gate")
    owner = json.loads((home / "tasks" / f"{item}.owner").read_text())
    stopped = _ray_cli("job", "stop", first, "--address", _dashboard(cluster))
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    wait_for(lambda: _job_status(cluster, first) == "STOPPED", 180, "the job stopped")
    wait_for(lambda: not pid_alive(owner["pid"]), 60, "item 1's process gone with its worker")
    rows = progress(home, batch)
    assert [r["stage"] for r in rows] == ["collected", "submitted"] + ["untouched"] * 3
    assert state(home, batch)["status"] == "interrupted"
    # the parent ended the stopped attempt's lease: the next one need not wait it out
    assert lease_held(home / "tasks", item, owner["epoch"]) is False
    gate.write_text("go")
    resumed = _job(cluster, again, tmp_path, home, person, "resume", batch)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert effects(tmp_path) == {f"r{n:02d}": 1 for n in range(5)}
    after = progress(home, batch)
    assert [r["stage"] for r in after] == ["collected"] * 5
    assert [r["attempts"] for r in after] == [1, 2, 1, 1, 1]
    assert runs_of(home, after[0]["task_id"]) == 1  # collected before: not run again
    assert state(home, item)["status"] == "done" and state(home, batch)["status"] == "done"


@pytest.mark.parametrize("workers", ["fresh", "warm"])
def test_a_node_removed_mid_item_finishes_elsewhere_once_with_a_higher_epoch(
        cluster: Any, tmp_path: Path, workers: str) -> None:
    while len(cluster.list_all_nodes()) < 3:  # a head and two nodes (one was removed before)
        cluster.add_node(num_cpus=1, object_store_memory=STORE_MB)
        cluster.wait_for_nodes()
    person = tmp_path / "person"
    person.mkdir()
    gate = person / "gate"
    items = edit_items(tmp_path, 1, gates={0: gate})
    home = tmp_path / "home"
    parent = start("batch", "wf.toml", "--items", str(items), "--executor", "ray",
                   "--address", cluster.address, "--json", cwd=tmp_path, home=home,
                   HOME=str(person), NORMALIZE_BATCH_WORKERS=workers)
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
    # Ray ran it again by itself (one submission): counted as a second attempt, and shown
    assert progress(home, batch)[0]["attempts"] == 2
    shown = cli("batch", "status", batch, cwd=tmp_path, home=home)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert shown.stdout.splitlines()[2].split()[:4] == ["0", item, "done", "2"]


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


def _dashboard(cluster: Any) -> str:
    return f"http://{cluster.head_node.address_info['webui_url']}"


def _ray_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "NORMALIZE_"))}
    return subprocess.run([os.path.join(VENV_BIN, "ray"), *args], env=env, text=True,
                          capture_output=True, timeout=timeout)


NO_AGENT = "No available agent to submit job"


def _job(cluster: Any, name: str, root: Path, home: Path, person: Path, *argv: str,
         wait: bool = True, runtime_env: dict[str, Any] | None = None,
         ) -> subprocess.CompletedProcess[str]:
    """`ray job submit` of `normalize ARGV` in `root`, its data home `home` (on the command
    line, not in a runtime_env), waiting for its end unless `wait` is False."""
    command = " ".join(shlex.quote(word) for word in (
        "cd", str(root), "&&", "env", f"NORMALIZE_HOME={home}", f"HOME={person}", "CI=true",
        PY, "-m", "normalize.cli.app", *argv)).replace("'&&'", "&&")
    flags = ["--address", _dashboard(cluster), "--submission-id", name]
    if runtime_env is not None:
        flags += ["--runtime-env-json", json.dumps(runtime_env)]
    if not wait:
        flags.append("--no-wait")
    deadline = time.monotonic() + 180
    while True:
        done = _ray_cli("job", "submit", *flags, "--", "sh", "-c", command)
        # the head's job agent registers some seconds after the cluster is up (later on a busy
        # machine); until then Ray refuses the submission and says to try again later
        if NO_AGENT not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert wait or done.returncode == 0, done.stdout + done.stderr
    return done



def _job_status(cluster: Any, name: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(_dashboard(cluster)).get_job_status(name).value)
