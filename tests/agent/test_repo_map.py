"""The repo map in the agent's cached prefix: there when asked for, stable, refreshed by edits."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import KEYS, Run
from test_prompt_cache import sdk_client

from normalize.testing.servers import FakeModelServer

MODULES = 14

ADD_BUDGET = '''Adding the missing class.
edit core.py <<EOF
<<<<<<< SEARCH
def make_bus() -> EventBus:
=======
class RetryBudget:
    """How many retries are left for one job."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts


def make_bus() -> EventBus:
>>>>>>> REPLACE
EOF'''

SCRIPT = ["Looking.\nview core.py", ADD_BUDGET, "Checking.\nview core.py:1-3", "done added"]


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A workspace whose modules all use core.py's EventBus, and name a RetryBudget not defined."""
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "core.py").write_text(
        'class EventBus:\n    """Routes events to their subscribers."""\n\n'
        "    def publish(self, topic: str, payload: dict[str, object]) -> int:\n"
        "        return len(payload)\n\n\n"
        "def make_bus() -> EventBus:\n    return EventBus()\n")
    for n in range(MODULES):
        (root / f"handler_{n:02}.py").write_text(
            "from core import EventBus, RetryBudget, make_bus\n\n\n"
            f"def handle_shipment_{n:02}(bus: EventBus, budget: RetryBudget, order_id: int, "
            f"warehouse_code: str) -> int:\n"
            f"    return make_bus().publish('shipment-{n}', {{'id': order_id}})\n")
    return root


@pytest.fixture
def anthropic_server(server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
                     ) -> FakeModelServer:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEYS["ANTHROPIC_API_KEY"])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    return server


def systems(server: FakeModelServer) -> list[str]:
    return [r.body["system"][0]["text"] for r in server.requests]


def counts(run: Run) -> Any:
    """How the run's driver got its map (built, read from disk, unchanged)."""
    lent = run.driver.repo_map
    assert lent is not None
    return lent.__self__.counts  # type: ignore[attr-defined]


def run_mapped(run_agent: Callable[..., Run], root: Path, tokens: int | None = 1024,
               **options: Any) -> Run:
    context: dict[str, Any] = {"strategy": "task_tree"}
    if tokens is not None:
        context["repo_map"] = tokens
    return run_agent(root, "add the missing class", context=context,
                     llm={"model": "claude-sonnet-4-5"}, factory=sdk_client, **options)


def test_the_map_is_in_the_cached_prefix_and_changes_only_with_the_code(
        package: Path, anthropic_server: FakeModelServer,
        run_agent: Callable[..., Run]) -> None:
    server = anthropic_server
    server.add(*SCRIPT)
    run = run_mapped(run_agent, package)
    assert run.outcome.status.value == "done"
    first, second, third, fourth = systems(server)
    marker = run.driver.context.marker
    assert "## Repo map" in first
    section = first[first.index("## Repo map"):]
    assert f"<<result {marker}>>\ncore.py:\n  class EventBus:" in section  # ranked first
    assert "class RetryBudget" not in section
    assert second == first  # byte-identical while the files are as they were
    # the edit added a definition fourteen files use: the map (and only the map) changed
    assert third != second and "  class RetryBudget:" in third[third.index("## Repo map"):]
    assert third[:third.index("## Repo map")] == first[:first.index("## Repo map")]
    assert fourth == third  # `view` changed nothing: the same prefix again
    assert counts(run).built == 2 and counts(run).unchanged == 2
    # the prefix is past Sonnet's 1,024 tokens: marked, and read back on the next request
    assert all(r.body["system"][0]["cache_control"] == {"type": "ephemeral"}
               for r in server.requests)
    usage = [(r["cache_read_tokens"], r["cache_write_tokens"]) for r in run.of("model_replied")]
    assert usage[0][0] == 0 and usage[0][1] > 1024
    assert usage[1] == (usage[0][1], 0)
    assert usage[2][0] == 0 and usage[2][1] > 0  # the new map is a new prefix: written
    assert usage[3] == (usage[2][1], 0)


def test_no_map_when_off(package: Path, anthropic_server: FakeModelServer,
                         run_agent: Callable[..., Run]) -> None:
    for tokens in (None, 0):
        anthropic_server.requests.clear()
        anthropic_server.add("done nothing to do")
        run = run_mapped(run_agent, package, tokens)
        assert run.outcome.status.value == "done"
        assert run.driver.repo_map is None
        assert all("## Repo map" not in s and "EventBus" not in s
                   for s in systems(anthropic_server))


def test_an_unchanged_tree_is_read_from_disk_not_parsed_again(
        package: Path, anthropic_server: FakeModelServer, run_agent: Callable[..., Run],
        normalize_home: Path) -> None:
    anthropic_server.add("done one", "done two")
    first = run_mapped(run_agent, package)
    second = run_mapped(run_agent, package)  # a new task (or a resumed one): the same tree
    assert counts(first).built == 1
    assert counts(second).built == 0 and counts(second).from_disk == 1
    one, two = systems(anthropic_server)
    tail = one.index("## Repo map")
    assert one[tail:].replace(first.driver.context.marker, "M") == \
        two[tail:].replace(second.driver.context.marker, "M")
    stored = list((normalize_home / "cache" / "repomap").glob("*.json"))
    assert len(stored) == 1 and json.loads(stored[0].read_text())["tokens"] == 1024
    assert stored[0].stat().st_mode & 0o077 == 0  # owner-only, like the rest of the store


def test_a_resumed_task_reads_its_map_from_disk(
        package: Path, anthropic_server: FakeModelServer,
        run_agent: Callable[..., Run]) -> None:
    anthropic_server.add("Looking.\nview core.py", "done looked")
    stopped = run_mapped(run_agent, package, limits={"max_turns": 1})
    assert stopped.outcome.status.value != "done" and counts(stopped).built == 1
    task = stopped.store.load(stopped.outcome.task.id)
    task.limits.max_turns = 3  # what `resume --max-turns 3` does
    stopped.store.save(task)
    resumed = run_agent(package, task_id=task.id, resume=True, factory=sdk_client)
    assert resumed.outcome.status.value == "done"
    assert counts(resumed).built == 0 and counts(resumed).from_disk == 1
    first, second = systems(anthropic_server)
    assert second == first  # the same prefix after the resume: the cache holds across it


def test_the_map_is_data_inside_the_result_boundary(
        package: Path, anthropic_server: FakeModelServer,
        run_agent: Callable[..., Run]) -> None:
    anthropic_server.add("done looked")
    run = run_mapped(run_agent, package, 256)
    marker = run.driver.context.marker
    (system,) = systems(anthropic_server)
    section = system[system.index("## Repo map"):]
    body = section[section.index(f"<<result {marker}>>"):]
    assert body.rstrip().endswith(f"<<end {marker}>>")
    assert len(body) // 4 <= 256 + 40  # the budget holds (four characters a token)
