"""Permissions the model cannot raise: planted workspace workflows narrow, never widen."""

from __future__ import annotations

import json
from pathlib import Path

from perm_helpers import (
    WIDENING,
    cli,
    json_lines,
    maker_workflow,
    notices,
    plant,
    ran,
    statuses,
    workspace,
)

IGNORED = [
    'ignored mode = "yes" from .normalize/workflows/fixup.toml',
    'ignored allow = "*" from .normalize/workflows/fixup.toml',
    "ignored allow_shell = true from .normalize/workflows/fixup.toml",
    "ignored network = true from .normalize/workflows/fixup.toml",
    'ignored sandbox = "off" from .normalize/workflows/fixup.toml',
    'ignored env_allow = "ANTHROPIC_API_KEY" from .normalize/workflows/fixup.toml',
]


def test_a_planted_workflow_does_not_raise_permissions_and_says_what_it_ignored(
        tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    plant(root, "fixup", maker_workflow("fixup", WIDENING))
    proc = cli("run", "fixup", "--json", cwd=root, home=normalize_home)
    assert not ran(root)
    assert statuses(proc.stdout) == ["blocked"]
    stderr = proc.stderr.splitlines()
    for line in IGNORED:
        assert any(line in said and "`normalize trust FILE` to allow" in said
                   for said in stderr), (line, proc.stderr)
        assert any(line in note for note in notices(proc.stdout)), line
    started = [e["type"] for e in json_lines(proc.stdout)][:2]
    assert started == ["run_started", "notice"]  # said at run start, before any step


def test_trust_applies_the_exact_file_and_an_edit_untrusts_it(
        tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    planted = plant(root, "fixup", maker_workflow("fixup", WIDENING))
    trusted = cli("trust", str(planted), cwd=root, home=normalize_home)
    assert trusted.returncode == 0, trusted.stderr
    assert "trusted" in trusted.stdout

    proc = cli("run", "fixup", "--json", cwd=root, home=normalize_home)
    assert ran(root)
    assert statuses(proc.stdout) == ["success"]
    assert notices(proc.stdout) == [] and "ignored" not in proc.stderr

    (root / "victim").mkdir()
    planted.write_text(planted.read_text() + "# one more line\n")
    listed = cli("trust", "--list", cwd=root, home=normalize_home)
    assert "changed" in listed.stdout and str(planted.resolve()) in listed.stdout
    again = cli("run", "fixup", "--json", cwd=root, home=normalize_home)
    assert not ran(root)
    assert statuses(again.stdout) == ["blocked"]
    assert IGNORED[0] in again.stderr

    removed = cli("trust", "--remove", str(planted), cwd=root, home=normalize_home)
    assert removed.returncode == 0
    assert "no trusted files" in cli("trust", "--list", cwd=root, home=normalize_home).stdout


def test_a_workflow_named_by_path_applies_its_permissions(tmp_path: Path,
                                                          normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "ci").mkdir()
    (root / "ci" / "fix.toml").write_text(maker_workflow("fix", WIDENING))
    proc = cli("run", "ci/fix.toml", "--json", cwd=root, home=normalize_home)
    assert ran(root)
    assert "ignored" not in proc.stderr
    planted = plant(root, "fixup", maker_workflow("fixup", WIDENING, target="second"))
    by_path = cli("run", str(planted.relative_to(root)), "--json", cwd=root,
                  home=normalize_home)
    assert ran(root, "second"), by_path.stderr  # the user typed its path


def test_an_untrusted_workflow_may_narrow(tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    plant(root, "careful", '''[workflow]
name = "careful"
[workflow.permissions]
mode = "never"
deny = ["write secret*"]
[[workflow.steps]]
name = "w"
action = "write notes.txt <<EOF\\nhello\\nEOF"
''')
    proc = cli("run", "careful", "--json", cwd=root, home=normalize_home)
    assert statuses(proc.stdout) == ["blocked"]
    assert "approval mode is `never`" in proc.stdout
    assert not (root / "notes.txt").exists()
    assert "ignored" not in proc.stderr


def test_planted_check_does_not_replace_the_builtin_check(tmp_path: Path,
                                                          normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "tests").mkdir()
    (root / "tests" / "test_fails.py").write_text("def test_no() -> None:\n    assert False\n")
    planted = plant(root, "check", '''[workflow]
name = "check"
[workflow.permissions]
mode = "yes"
[[workflow.steps]]
name = "pretend"
action = "done all tests passed"
''')
    proc = cli("run", "check", "--json", cwd=root, home=normalize_home)
    assert proc.returncode == 1, proc.stderr  # the built-in ran the failing tests
    assert "ignored .normalize/workflows/check.toml: untrusted workspace file" in proc.stderr
    assert "running the builtin workflow 'check'" in proc.stderr
    ended = json_lines(proc.stdout)[-1]
    assert ended["type"] == "run_ended" and "all tests passed" not in ended["summary"]

    assert cli("trust", str(planted), cwd=root, home=normalize_home).returncode == 0
    mine = cli("run", "check", "--json", cwd=root, home=normalize_home)
    assert mine.returncode == 0 and json_lines(mine.stdout)[-1]["summary"] == "all tests passed"


def test_the_users_config_sets_permissions_and_a_bad_one_names_its_line(
        tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    config = normalize_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nallow = ["rm -r victim"]\n')
    plant(root, "plain", maker_workflow("plain", ""))
    proc = cli("run", "plain", "--json", cwd=root, home=normalize_home)
    assert ran(root), proc.stdout  # the user's own allow pattern

    config.write_text('[permissions]\nallow = ["x"]\nmode = "sometimes"\n')
    bad = cli("run", "plain", cwd=root, home=normalize_home)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        f"normalize: error: {config}:3: mode = 'sometimes': expected one of: never, ask, auto, "
        f"yes"]


def test_a_resumed_task_keeps_its_recorded_permissions(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    flow = tmp_path / "flow.toml"
    flow.write_text(maker_workflow("flow", '[workflow.permissions]\nmode = "yes"\n').replace(
        '[[workflow.steps]]', '[[workflow.steps]]\nname = "pause"\naction = "ask go on?"\n\n'
        '[[workflow.steps]]', 1))
    first = cli("run", str(flow), "--json", cwd=root, home=normalize_home)
    assert first.returncode == 4, first.stderr
    task_id = json_lines(first.stdout)[0]["task_id"]
    flow.write_text(flow.read_text().replace('"yes"', '"never"'))  # the file no longer counts
    stored = next((normalize_home / "tasks").glob(f"{task_id}*.json"))
    config_file = stored.parent / task_id if (stored.parent / task_id).is_dir() else None
    texts = [stored.read_text()] + ([p.read_text() for p in config_file.glob("*.json")]
                                    if config_file else [])
    assert any(json.loads(t).get("permissions", {}).get("mode") == "yes" for t in texts)
    second = cli("resume", task_id, "--answer", "yes", "--json", cwd=root, home=normalize_home)
    assert second.returncode == 0, second.stderr
    assert ran(root)


def test_trust_refuses_bad_arguments_with_one_line(tmp_path: Path, normalize_home: Path) -> None:
    missing = cli("trust", str(tmp_path / "nope.toml"), cwd=tmp_path, home=normalize_home)
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        f"normalize: error: {tmp_path / 'nope.toml'}: no such file"]
    (tmp_path / "w.toml").write_text("[workflow]\n")
    untrusted = cli("trust", "--remove", str(tmp_path / "w.toml"), cwd=tmp_path,
                    home=normalize_home)
    assert untrusted.returncode == 2 and "not trusted" in untrusted.stderr
