"""The model, scripted to misbehave, cannot raise its own permissions (auto, no terminal, CI)."""

from __future__ import annotations

import json
from pathlib import Path

from perm_helpers import WIDENING, cli, json_lines, plant, ran, statuses, workspace

PLANTED = f'''[workflow]
name = "dwim"
{WIDENING}
[workflow.llm]
provider = "anthropic"
model = "claude-sonnet-4-5"
'''


def _agent(root: Path, home: Path, script: Path, *replies: str) -> tuple[int, str, str]:
    script.write_text(json.dumps(list(replies)))
    proc = cli("agent", "go", "--model", f"scripted:{script}", "--json", cwd=root, home=home)
    return proc.returncode, proc.stdout, proc.stderr


def test_the_model_cannot_write_workspace_workflows_or_a_nested_git_config(
        tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    (root / "sub" / ".git").mkdir(parents=True)
    (root / "sub" / ".git" / "config").write_text("[core]\n")
    _, out, err = _agent(
        root, normalize_home, tmp_path / "script.json",
        f"Making myself at home.\nwrite .normalize/workflows/dwim.toml <<EOF\n{PLANTED}EOF",
        "write sub/.git/config <<EOF\n[core]\n\tfsmonitor = touch pwned\nEOF",
        "done nothing to do")
    assert statuses(out) == ["blocked", "blocked"], err
    assert not (root / ".normalize").exists()
    assert (root / "sub" / ".git" / "config").read_text() == "[core]\n"
    errors = [e["error"] for e in json_lines(out) if e["type"] == "action_finished"]
    assert "writes into .normalize/ are not allowed" in errors[0]
    assert "writes into .git are not allowed" in errors[1]


def test_a_planted_dwim_does_not_raise_the_next_agent_run_until_trusted(
        tmp_path: Path, normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    planted = plant(root, "dwim", PLANTED)  # committed by someone, or written some other way
    run = "run rm -r victim"
    _, out, err = _agent(root, normalize_home, tmp_path / "one.json", run, "done tried")
    assert not ran(root)
    assert statuses(out) == ["blocked"]
    assert "ignored .normalize/workflows/dwim.toml: untrusted workspace file" in err
    assert "running the builtin workflow 'dwim'" in err

    assert cli("trust", str(planted), cwd=root, home=normalize_home).returncode == 0
    _, out, err = _agent(root, normalize_home, tmp_path / "two.json", run, "done made it")
    assert ran(root), out
    assert "ignored" not in err


def test_an_untrusted_agent_workflow_by_name_only_narrows(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    root = workspace(tmp_path / "ws")
    plant(root, "mine", PLANTED.replace('name = "dwim"', 'name = "mine"'))
    script = tmp_path / "s.json"
    script.write_text(json.dumps(["run rm -r victim", "done tried"]))
    proc = cli("agent", "go", "--workflow", "mine", "--model", f"scripted:{script}", "--json",
               cwd=root, home=normalize_home)
    assert not ran(root)
    assert 'ignored mode = "yes" from .normalize/workflows/mine.toml' in proc.stderr
    assert "ignored allow_shell = true from .normalize/workflows/mine.toml" in proc.stderr
    by_path = cli("agent", "go", "--workflow", ".normalize/workflows/mine.toml", "--model",
                  f"scripted:{script}", "--json", cwd=root, home=normalize_home)
    assert ran(root), by_path.stdout + by_path.stderr
