"""The sandbox tier's verdict is kept between runs, and tried again when what decides it changed."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from normalize.sandbox import tiers, verdict

MARK = "kept by an earlier run (marked by the test)"


@pytest.fixture(autouse=True)
def fresh_process() -> Iterator[None]:
    """Each test starts as a new process does: no verdict found in this process yet."""
    tiers._probe.cache_clear()
    yield
    tiers._probe.cache_clear()


def kept() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(verdict.path().read_bytes())
    return data


def mark(change: dict[str, Any] | None = None) -> None:
    """Mark the kept verdict (so a use of it shows), and change its key as `change` says."""
    data = kept()
    data["verdict"]["reason"] = MARK
    data["key"].update(change or {})
    verdict.path().write_text(json.dumps(data))
    tiers._probe.cache_clear()  # the next probe is a new process's


def test_the_verdict_is_kept_owner_only_and_used_by_the_next_process() -> None:
    first = tiers.probe()
    assert verdict.path().stat().st_mode & 0o777 == 0o600
    assert kept()["verdict"]["tier"] == first.tier.value
    mark()
    again = tiers.probe()
    assert again.reason == MARK  # no trial: the kept verdict
    assert (again.tier, again.enforced, again.not_enforced) == \
        (first.tier, first.enforced, first.not_enforced)


@pytest.mark.parametrize("change", [
    {"release": "0.0.1-another-kernel"}, {"build": "#2 another build"}, {"uid": 12345},
    {"landlock": 0}, {"arch": "sparc"}, {"normalize": "0.0.0"}, {"code": []},
    {"sysctl": ["0", "0", "1", "another boot"]}, {"ns": [1, 2]},
])
def test_a_changed_environment_is_probed_again(change: dict[str, Any]) -> None:
    first = tiers.probe()
    mark(change)
    again = tiers.probe()
    assert again.reason != MARK and again == first  # tried again: the verdict of a trial
    assert kept()["key"] == verdict.key(first.landlock_abi, kept()["key"]["arch"])
    assert kept()["verdict"]["reason"] != MARK  # and kept afresh


@pytest.mark.parametrize("damage", [b"", b"{", b'{"key": 1}', b'{"key": {}, "verdict": 3}'])
def test_a_damaged_kept_verdict_is_tried_again(damage: bytes) -> None:
    first = tiers.probe()
    verdict.path().write_bytes(damage)
    tiers._probe.cache_clear()
    assert tiers.probe() == first
    assert kept()["verdict"]["tier"] == first.tier.value


def test_sandbox_check_tries_afresh(normalize_home: Path) -> None:
    tiers.probe()
    mark()
    out = subprocess.run([sys.executable, "-m", "normalize.cli.app", "sandbox", "check",
                          "--json"], capture_output=True, text=True, check=False, timeout=60)
    assert MARK not in out.stdout and out.stdout.strip(), out.stderr
    assert kept()["verdict"]["reason"] != MARK
