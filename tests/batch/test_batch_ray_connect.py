"""A Ray cluster that refuses the batch's parent: one line naming the cause, exit 2, at once.

A cluster with token authentication (on because its machine had a token; here
`RAY_AUTH_MODE=token`) refuses a parent without the token; an address where no
cluster answers refuses everyone. Either way the batch is left as it was, and
`resume BATCH` runs it once the cause is fixed. A token on the parent's machine
against a cluster without authentication is no refusal. The token cluster runs
in a process of its own (Ray reads its mode once per process).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from batch_support import PY, batch_id, cli, edit_items, effects, needs_sandbox, state

pytest.importorskip("ray", reason="ray is not installed (.ci/run installs it with [test])")

pytestmark = [pytest.mark.ray, needs_sandbox]
TOKEN = "0123456789abcdef0123456789abcdef"
CLUSTER = """
import sys
from ray.cluster_utils import Cluster
made = Cluster(initialize_head=True, head_node_args={
    "num_cpus": 1, "object_store_memory": 80 * 1024 * 1024})
print(made.address, flush=True)
sys.stdin.read()
made.shutdown()
"""


def _cluster(tmp: Path, **env: str) -> Iterator[str]:
    """A one-node cluster in a process of its own, with `env`; its address."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    full.update(RAY_USAGE_STATS_ENABLED="0", HOME=str(tmp), **env)
    proc = subprocess.Popen([PY, "-c", CLUSTER], env=full, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        address = proc.stdout.readline().strip()
        assert address, "the cluster started"
        yield address
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


@pytest.fixture(scope="module")
def token_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A cluster with token authentication, and the file with its token."""
    tmp = tmp_path_factory.mktemp("token-cluster")
    token = tmp / "token"
    token.write_text(TOKEN)
    for address in _cluster(tmp, RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token)):
        yield address, token


@pytest.fixture(scope="module")
def open_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A cluster without authentication."""
    yield from _cluster(tmp_path_factory.mktemp("open-cluster"), RAY_AUTH_MODE="disabled")


def _person(tmp_path: Path, token: bool) -> Path:
    person = tmp_path / "person"
    (person / ".ray").mkdir(parents=True)
    if token:
        (person / ".ray" / "auth_token").write_text(TOKEN)
    return person


def _refused(done: subprocess.CompletedProcess[str], took: float) -> str:
    """The one line a refused batch ends with (after its id), checked."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
    assert took < 15, f"refused after {took:.1f} s"
    return lines[0]


def test_a_cluster_with_token_auth_refuses_a_parent_without_the_token_in_one_line(
        token_cluster: tuple[str, Path], tmp_path: Path) -> None:
    address, token = token_cluster
    items = edit_items(tmp_path, 1)
    home = tmp_path / "home"
    person = _person(tmp_path, token=False)
    started = time.monotonic()
    done = cli("batch", "wf.toml", "--items", str(items), "--executor", "ray", "--address",
               address, cwd=tmp_path, home=home, HOME=str(person))
    line = _refused(done, time.monotonic() - started)
    assert address in line and "token authentication" in line
    assert "RAY_AUTH_MODE" in line and "auth_token" in line
    batch = batch_id(done.stdout)
    assert state(home, batch)["status"] == "pending" and effects(tmp_path) == {"r00": 0}
    # the token given, the same batch runs
    again = cli("resume", batch, cwd=tmp_path, home=home, HOME=str(person),
                RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    assert again.returncode == 0, again.stdout + again.stderr
    assert effects(tmp_path) == {"r00": 1} and state(home, batch)["status"] == "done"


def test_a_wrong_token_is_named_as_not_the_clusters(
        token_cluster: tuple[str, Path], tmp_path: Path) -> None:
    address, _token = token_cluster
    items = edit_items(tmp_path, 1)
    wrong = tmp_path / "wrong"
    wrong.write_text("f" * 32)
    started = time.monotonic()
    done = cli("batch", "wf.toml", "--items", str(items), "--executor", "ray", "--address",
               address, cwd=tmp_path, home=tmp_path / "home", HOME=str(_person(tmp_path, False)),
               RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(wrong))
    line = _refused(done, time.monotonic() - started)
    assert str(wrong) in line and "not the cluster's" in line


def test_an_address_where_no_cluster_answers_is_refused_at_once(tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    items = edit_items(tmp_path, 1)
    home = tmp_path / "home"
    started = time.monotonic()
    done = cli("batch", "wf.toml", "--items", str(items), "--executor", "ray", "--address",
               f"127.0.0.1:{port}", cwd=tmp_path, home=home)
    line = _refused(done, time.monotonic() - started)
    assert f"--address 127.0.0.1:{port}" in line and "no Ray cluster answers" in line
    assert state(home, batch_id(done.stdout))["status"] == "pending"


def test_a_token_on_the_parents_machine_against_a_cluster_without_auth_runs(
        open_cluster: str, tmp_path: Path) -> None:
    items = edit_items(tmp_path, 1)
    done = cli("batch", "wf.toml", "--items", str(items), "--executor", "ray", "--address",
               open_cluster, cwd=tmp_path, home=tmp_path / "home",
               HOME=str(_person(tmp_path, token=True)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert effects(tmp_path) == {"r00": 1}


def test_no_address_says_a_local_cluster_is_started_before_starting_it(tmp_path: Path) -> None:
    items = edit_items(tmp_path, 1)
    blocked = tmp_path / "a-file"  # a temp root below a file: the local cluster fails at once
    blocked.write_text("")
    done = cli("batch", "wf.toml", "--items", str(items), "--executor", "ray", cwd=tmp_path,
               home=tmp_path / "home", RAY_ADDRESS="", RAY_TMPDIR=str(blocked / "ray"))
    assert done.returncode == 2, done.stdout + done.stderr
    notice = [line for line in done.stderr.splitlines() if "notice:" in line]
    assert notice == ["normalize: notice: --executor ray with no --address (nor RAY_ADDRESS): "
                      "starting a local Ray cluster on this machine"]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr
