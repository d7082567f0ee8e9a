"""The permission layers: each key narrows from an untrusted file and widens from a trusted one."""

from __future__ import annotations

from pathlib import Path

import pytest

from normalize.errors import ConfigError
from normalize.permissions import Permissions, load_user_config, task_permissions
from normalize.runner import RunOptions, load_spec, sandbox_policy, start_task
from normalize.sandbox import SandboxMode

BASE = Permissions(mode="auto", allow=("pytest*",), sandbox="workspace")

NARROWER = [({"mode": "ask"}, "mode", "ask"), ({"mode": "never"}, "mode", "never"),
            ({"deny": ["rm *"]}, "deny", ("rm *",)), ({"sandbox": "read-only"}, "sandbox",
                                                     "read-only"),
            ({"allow_shell": False}, "allow_shell", False), ({"network": False}, "network", False)]
WIDER = [({"mode": "yes"}, "mode", "yes"), ({"allow": ["*"]}, "allow", ("pytest*", "*")),
         ({"allow_shell": True}, "allow_shell", True), ({"network": True}, "network", True),
         ({"sandbox": "off"}, "sandbox", "off"), ({"env_allow": ["AWS_*"]}, "env_allow",
                                                  ("AWS_*",))]


@pytest.mark.parametrize(("table", "key", "value"), NARROWER, ids=[str(t) for t, _, _ in NARROWER])
def test_an_untrusted_table_narrows(table: dict[str, object], key: str, value: object) -> None:
    out = BASE.overlay(table, "w.toml", trusted=False)
    assert getattr(out, key) == value and out.notes == ()


@pytest.mark.parametrize(("table", "key", "value"), WIDER, ids=[str(t) for t, _, _ in WIDER])
def test_an_untrusted_table_cannot_widen_but_a_trusted_one_can(
        table: dict[str, object], key: str, value: object) -> None:
    ignored = BASE.overlay(table, "w.toml", trusted=False)
    assert getattr(ignored, key) == getattr(BASE, key)
    assert len(ignored.notes) == 1 and ignored.notes[0].startswith(f"ignored {key} = ")
    assert "w.toml: untrusted workspace file" in ignored.notes[0]
    assert getattr(BASE.overlay(table, "w.toml"), key) == value


def test_an_allow_already_given_below_is_no_widening() -> None:
    out = BASE.overlay({"allow": ["pytest*"], "mode": "auto"}, "w.toml", trusted=False)
    assert out == BASE and out.notes == ()


def test_bad_values_are_errors_naming_the_place(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"w.toml: unknown permission 'moed'"):
        Permissions().overlay({"moed": "yes"}, "w.toml")
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\nmode = "auto"\nnetwork = "yes"\n')
    with pytest.raises(ConfigError, match=rf"^{config}:3: network must be true, false or a list"):
        load_user_config(config)
    config.write_text("[permisions]\n")
    with pytest.raises(ConfigError, match=rf"^{config}:1: unknown table 'permisions'"):
        load_user_config(config)
    config.write_text("[permissions\n")
    with pytest.raises(ConfigError, match=rf"^{config}:1:\d+: invalid TOML"):
        load_user_config(config)


def test_the_command_line_tops_the_record_and_gives_the_sandbox_policy(tmp_path: Path) -> None:
    flow = tmp_path / "f.toml"
    flow.write_text('[workflow]\nname = "f"\n[workflow.permissions]\nsandbox = "read-only"\n'
                    '[[workflow.steps]]\nname = "a"\naction = "note hi"\n')
    options = RunOptions(workspace=tmp_path, fsync=False)
    task = start_task(load_spec(str(flow), tmp_path), "g", options)
    assert task.config.permissions["sandbox"] == "read-only"
    assert sandbox_policy(options, task.config.permissions).mode is \
        SandboxMode.READ_ONLY
    later = RunOptions(workspace=tmp_path, sandbox="off", network=True, approve="never")
    policy = sandbox_policy(later, task.config.permissions)
    assert policy.mode is SandboxMode.OFF and policy.network
    assert task_permissions(task, later.flags()).mode == "never"


def test_a_bare_name_never_means_a_file_of_that_name_here(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "dwim").write_text('[workflow]\nname = "planted"\n[workflow.llm]\n')
    monkeypatch.chdir(tmp_path)
    spec = load_spec("dwim", tmp_path)
    assert spec.origin == "builtin" and spec.name == "dwim"


def test_a_users_own_workflow_is_trusted(normalize_home: Path, tmp_path: Path) -> None:
    user = normalize_home / "config" / "workflows"
    user.mkdir(parents=True)
    (user / "mine.toml").write_text('[workflow]\nname = "mine"\n[workflow.permissions]\n'
                                    'mode = "yes"\n[[workflow.steps]]\nname = "a"\n'
                                    'action = "note hi"\n')
    spec = load_spec("mine", tmp_path)
    assert spec.origin == "user"
    task = start_task(spec, "g", RunOptions(workspace=tmp_path, fsync=False))
    assert task.config.permissions["mode"] == "yes"


def test_the_tools_cannot_write_the_users_config_even_inside_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from normalize.intents import parse_command
    from normalize.runner import tool_context
    from normalize.tools import default_tools

    monkeypatch.setenv("NORMALIZE_CONFIG", str(tmp_path / "cfg"))
    flow = tmp_path / "f.toml"
    flow.write_text('[workflow]\nname = "f"\n[[workflow.steps]]\nname = "a"\naction = "note"\n')
    options = RunOptions(workspace=tmp_path, fsync=False)
    task = start_task(load_spec(str(flow), tmp_path), "g", options)
    ctx = tool_context(task, options)
    action = parse_command("write cfg/config.toml <<EOF\n[trust]\nEOF")
    result = default_tools().execute(action, ctx)
    assert result.status.value == "blocked" and "protected" in (result.error or "")
    assert not (tmp_path / "cfg" / "config.toml").exists()
