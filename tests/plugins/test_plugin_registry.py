"""The driver registry: injected entry points, import failures named, the contract's shape."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from normalize.contract.builtin import BUILTIN_DRIVERS
from normalize.contract.driver import DRIVERS, Driver, DriverServices, RunContext, create_driver
from normalize.errors import UsageError
from normalize.plugins import (
    PluginGroup,
    advertised_names,
    installed_entry_points,
    load_target,
    use_entry_points,
)

HERE = __name__  # the name pytest imported this module under


class TinyDriver:
    """A driver that ends at once (a target for injected entry points)."""

    name = "tiny"

    def __init__(self, config: dict[str, object]) -> None:
        self.config = config

    @classmethod
    def from_config(cls, config: dict[str, object], services: DriverServices) -> TinyDriver:
        del services
        return cls(config)

    def decide(self, task: object, ctx: object) -> None:
        del task, ctx

    def on_result(self, task: object, action: object, result: object) -> None:
        del task, action, result

    def snapshot(self) -> dict[str, object]:
        return {}

    def restore(self, state: dict[str, object]) -> None:
        del state


class NoFactory:
    name = "nofactory"


def test_the_session_runs_with_a_strangers_plugin_installed(foreign_plugin: Path) -> None:
    assert "stranger" in DRIVERS.names()  # in-process
    code = "from normalize.contract.driver import DRIVERS; print(DRIVERS.names())"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, env=dict(os.environ))
    assert "'stranger'" in proc.stdout, proc.stderr  # and in the programs tests start
    assert str(foreign_plugin) in os.environ["PYTHONPATH"]


def test_injected_entry_points_replace_the_environments() -> None:
    with use_entry_points({"normalize.drivers": {"tiny": f"{HERE}:TinyDriver"}}):
        assert DRIVERS.names() == sorted([*BUILTIN_DRIVERS, "tiny"])  # no stranger
        assert [i.origin for i in DRIVERS.infos() if i.name == "tiny"] == ["plugin:injected"]
        driver = create_driver("tiny", {"spec": {"name": "x"}}, DriverServices())
        assert isinstance(driver, TinyDriver) and driver.config == {"spec": {"name": "x"}}
        assert isinstance(driver, Driver)
        assert advertised_names("normalize.drivers") == ["tiny"]
    assert "stranger" in DRIVERS.names() and "tiny" not in DRIVERS.names()


def test_a_plugin_that_fails_to_import_is_named_with_its_error() -> None:
    table = {"normalize.drivers": {"broken": "no_such_module_for_normalize:Driver",
                                   "tiny": f"{HERE}:TinyDriver"}}
    with use_entry_points(table, dist="fakeplug"):
        with pytest.raises(UsageError) as caught:
            create_driver("broken", {}, DriverServices())
        assert str(caught.value) == (
            "unknown driver 'broken': the plugin no_such_module_for_normalize:Driver "
            "(plugin:fakeplug) failed to load: ModuleNotFoundError: No module named "
            "'no_such_module_for_normalize' (known: acp, aider, claude, codex, llm, "
            "state_machine, tiny, user, workflow)")
        with pytest.raises(UsageError) as caught:
            create_driver("robot", {}, DriverServices())
        assert str(caught.value).startswith(
            "unknown driver 'robot' (plugins that failed to load: broken "
            "(no_such_module_for_normalize:Driver): ModuleNotFoundError: No module named")
        assert "failed to load" in DRIVERS.warnings[0]


def test_a_driver_without_from_config_is_a_usage_error() -> None:
    with use_entry_points({"normalize.drivers": {"nofactory": f"{HERE}:NoFactory"}}):
        with pytest.raises(UsageError, match=r"driver 'nofactory' \(.*NoFactory\) has no "
                                             r"from_config\(config, services\)"):
            create_driver("nofactory", {}, DriverServices())


def test_the_cheap_scan_agrees_with_importlib_metadata() -> None:
    from importlib.metadata import entry_points

    groups = set(entry_points().groups)
    assert "normalize.drivers" in groups and len(groups) > 5  # this environment's, all of them
    for group in [*sorted(groups), "normalize.stranger-group"]:
        expected = sorted((ep.name, ep.value, ep.dist.name if ep.dist else "?")
                          for ep in entry_points(group=group))
        assert sorted(installed_entry_points(group)) == expected, group
        assert advertised_names(group) == sorted({name for name, _, _ in expected})
    assert "stranger" in advertised_names("normalize.drivers")


def test_runtime_registrations_survive_a_reset() -> None:
    group: PluginGroup[object] = PluginGroup("normalize.test-only", dict)
    group.register("thing", 42)
    with use_entry_points({"normalize.test-only": {"other": "json:dumps"}}):
        assert group.names() == ["other", "thing"] and group.get("thing") == 42
    assert group.names() == ["thing"]


def test_every_builtin_driver_implements_the_whole_contract() -> None:
    members = ("name", "from_config", "decide", "on_result", "snapshot", "restore")
    for name, target in BUILTIN_DRIVERS.items():
        cls = load_target(target)
        assert all(hasattr(cls, m) for m in members), name
        assert cls.name == name  # type: ignore[attr-defined]


def test_drivers_are_not_lent_the_tools() -> None:
    assert [f.name for f in dataclasses.fields(RunContext)] == [
        "task", "workspace", "emit", "cancel", "interactive", "request_context", "compact_veto"]


def test_a_workflow_naming_a_broken_driver_says_why_before_running(tmp_path: Path) -> None:
    from normalize import RunOptions, load_spec, run_task, start_task

    (tmp_path / "wf.toml").write_text('[workflow]\nname = "wf"\ndriver = "broken"\n')
    table = {"normalize.drivers": {"broken": "no_such_module_for_normalize:Driver"}}
    with use_entry_points(table, dist="fakeplug"):
        options = RunOptions(workspace=tmp_path)
        task = start_task(load_spec(str(tmp_path / "wf.toml"), tmp_path), "", options)
        with pytest.raises(UsageError, match=r"^unknown driver 'broken': the plugin "
                                             r"no_such_module_for_normalize:Driver "
                                             r"\(plugin:fakeplug\) failed to load: "
                                             r"ModuleNotFoundError"):
            run_task(task, options)
