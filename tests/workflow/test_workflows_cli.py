"""`normalize workflows list|show|validate`, `normalize plugins`, `run --dry-run`, `run NAME`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from helpers import REPO, cli, json_lines, make_sample_repo

BUILTINS = ["check", "dwim", "health", "outline", "review", "validate-fix"]


def test_workflows_list_shows_project_user_and_builtin(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    project = tmp_path / "proj"
    (project / ".normalize" / "workflows").mkdir(parents=True)
    (project / ".normalize" / "workflows" / "health.toml").write_text(
        '[workflow]\nname = "health"\ndescription = "the project\'s own"\n'
        '[[workflow.steps]]\naction = "test"\n')
    (project / ".normalize" / "workflows" / "broken.toml").write_text("[workflow\n")
    user = normalize_home / "config" / "workflows"
    user.mkdir(parents=True)
    (user / "mine.toml").write_text('[workflow]\nname = "mine"\n[[steps]]\naction = "test"\n')
    proc = cli("workflows", "list", "--json", cwd=project, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    rows: dict[str, dict[str, Any]] = {}
    for row in json_lines(proc.stdout):  # the first of a name: the project's
        rows.setdefault(row["name"], row)
    assert set(rows) == {*BUILTINS, "broken", "mine"}
    assert rows["health"]["origin"] == "project"
    assert rows["health"]["description"] == "the project's own"
    assert rows["health"]["trust"] == "shadowed"  # untrusted: the built-in health runs
    assert rows["mine"]["origin"] == "user"
    assert rows["validate-fix"]["origin"] == "builtin"
    assert rows["validate-fix"]["driver"] == "state_machine"
    assert rows["broken"]["error"].startswith(str(project / ".normalize" / "workflows" /
                                                  "broken.toml") + ":1:")
    text = cli("workflows", "list", cwd=project, home=normalize_home).stdout
    assert "invalid: run `normalize workflows validate" in text
    assert text.splitlines()[0].split() == ["NAME", "ORIGIN", "DRIVER", "DESCRIPTION"]


def test_workflows_show_prints_the_resolved_spec(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("workflows", "show", "health", "--var", "target=src", cwd=tmp_path,
               home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert "  1. analyze: analyze src --health" in proc.stdout
    data = json.loads(cli("workflows", "show", "outline", "--json", cwd=tmp_path,
                          home=normalize_home).stdout)
    assert data["name"] == "outline" and data["steps"][0]["parallel"] is True
    missing = cli("workflows", "show", "nope", cwd=tmp_path, home=normalize_home)
    assert missing.returncode == 2
    assert missing.stderr.startswith("normalize: error: nope: no such workflow file or name")


def test_workflows_validate_passes_the_builtins(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("workflows", "validate", *BUILTINS, cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert len(proc.stdout.splitlines()) == len(BUILTINS)
    assert all(": ok (" in line for line in proc.stdout.splitlines())


def test_dry_run_prints_the_plan_and_runs_nothing(tmp_path: Path, normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    proc = cli("run", "outline", "--dry-run", "--var", "output=docs/map.md", cwd=repo,
               home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"workflow outline (workflow) from {REPO / 'workflows' / 'outline.toml'}"
    assert ("  1. outline [for each {file} in code:. (2 items now) in parallel (at most 8 at "
            "once)]: skeleton {file}  (→ {outlines}; transform format:## {file}\n") \
        in proc.stdout + "\n" or any(line.startswith("  1. outline [for each {file} in code:. "
                                                     "(2 items now) in parallel")
                                     for line in lines)
    assert any(line.startswith("  2. write: write docs/map.md <<EOF") for line in lines)
    assert "  3. summary: done wrote the outline of . to docs/map.md" in lines
    assert not (repo / "docs").exists()
    assert not (normalize_home / "tasks").exists() or \
        not any((normalize_home / "tasks").iterdir())
    states = cli("run", "validate-fix", "--dry-run", cwd=repo, home=normalize_home).stdout
    assert "  checking: test .  (→ {report})" in states
    assert "    on visits:4 → gave_up" in states
    assert '  fixing: llm-decide — "The tests fail.' in states


def test_run_finds_workflows_by_name_from_any_directory(tmp_path: Path,
                                                        normalize_home: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for ref in ("dwim.toml", "dwim", "health"):
        proc = cli("run", ref, "--dry-run", cwd=elsewhere, home=normalize_home)
        assert proc.returncode == 0, (ref, proc.stderr)
    proc = cli("run", "health", "--quiet", cwd=elsewhere, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    (elsewhere / ".normalize" / "workflows").mkdir(parents=True)
    (elsewhere / ".normalize" / "workflows" / "mine.toml").write_text(
        '[workflow]\nname = "mine"\n[[steps]]\naction = "done mine ran"\n')
    proc = cli("run", "mine", "--quiet", cwd=elsewhere, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert "mine ran" in proc.stdout
    unknown = cli("run", "nosuch", cwd=elsewhere, home=normalize_home)
    assert unknown.returncode == 2
    assert "known names:" in unknown.stderr and "validate-fix" in unknown.stderr


def test_outline_writes_every_source_file_in_parallel(tmp_path: Path,
                                                      normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    proc = cli("run", "outline", "--json", cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)
    fanned = [e for e in events if e["type"] == "decision_made" and e["parallel"]]
    assert len(fanned) == 1 and len(fanned[0]["actions"]) == 2
    outline = (repo / "OUTLINE.md").read_text()
    assert outline.startswith("# Outline of .\n")
    assert "## calc.py" in outline and "def add(a: int, b: int) -> int:" in outline
    assert "## tests/test_calc.py" in outline


def _plugin_dist(root: Path) -> Path:
    """An installed distribution (on PYTHONPATH) with one good and one broken plugin."""
    dist = root / "demo_plugins-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: demo-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[normalize.sources]\nusers = demo_plugins:users\n\n"
        "[normalize.conditions]\nflaky = no_such_module_for_normalize:check\n")
    (root / "demo_plugins.py").write_text(
        "def users(argument, workspace, variables):\n    return ['ann', 'bob']\n")
    return root


def test_plugins_lists_everything_and_warns_about_broken_ones(tmp_path: Path,
                                                              normalize_home: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(_plugin_dist(tmp_path / "site")),
                                          os.environ.get("PYTHONPATH", "")])}
    proc = cli("plugins", "--json", cwd=tmp_path, home=normalize_home, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {(r["group"], r["name"]): r for r in json_lines(proc.stdout)}
    assert rows[("steps", "llm-decide")]["origin"] == "builtin"
    assert rows[("drivers", "workflow")]["target"] == "normalize.drivers.workflow:WorkflowDriver"
    assert rows[("sources", "users")]["origin"] == "plugin:demo-plugins"
    assert rows[("conditions", "flaky")]["target"] == "no_such_module_for_normalize:check"
    assert {g for g, _ in rows} >= {"drivers", "steps", "conditions", "sources", "providers",
                                    "tools"}
    assert ("normalize: warning: normalize.conditions: plugin 'flaky' "
            "(no_such_module_for_normalize:check) failed to load: No module named "
            "'no_such_module_for_normalize'") in proc.stderr.splitlines()
    table = cli("plugins", cwd=tmp_path, home=normalize_home, env=env).stdout
    assert table.splitlines()[0].split() == ["GROUP", "NAME", "ORIGIN", "TARGET"]


def test_a_plugin_source_works_in_a_workflow(tmp_path: Path, normalize_home: Path) -> None:
    env = {"PYTHONPATH": os.pathsep.join([str(_plugin_dist(tmp_path / "site")),
                                          os.environ.get("PYTHONPATH", "")])}
    wf = tmp_path / "greet.toml"
    wf.write_text('[workflow]\nname = "greet"\n[[steps]]\nfor_each = "users:all"\n'
                  'action = "note hello {item}"\n')
    proc = cli("run", str(wf), "--json", cwd=tmp_path, home=normalize_home, env=env)
    assert proc.returncode == 0, proc.stderr
    commands = [e["command"] for e in json_lines(proc.stdout) if e["type"] == "action_finished"]
    assert commands == ["note hello ann", "note hello bob"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[workflow]\nname = "bad"\n[[steps]]\naction = "test"\n'
                   '[[steps]]\ncondition = "flaky"\naction = "test"\n')
    proc = cli("workflows", "validate", str(bad), cwd=tmp_path, home=normalize_home, env=env)
    assert proc.returncode == 2
    assert proc.stderr == (f"{bad}:6:1: condition 'flaky': plugin 'flaky' "
                           f"(no_such_module_for_normalize:check) failed to load: No module "
                           f"named 'no_such_module_for_normalize'\n")
