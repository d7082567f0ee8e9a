"""The GitHub Action (`action.yml`): its steps run as GitHub runs a composite action's steps.

`run` steps go to `bash --noprofile --norc -eo pipefail` with `${{ … }}` replaced
by their values first, each with its own GITHUB_OUTPUT, GITHUB_STEP_SUMMARY and
GITHUB_ENV files; `uses` steps are recorded (they are other actions). The install
step is checked, not run: it would install this checkout over the test's own
environment, where normalize is already installed from it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml", reason="pyyaml (the [test] extras) reads action.yml")

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = str(Path(sys.executable).parent)
EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
OUTPUT = re.compile(r"^([\w-]+)<<(\S+)\n(.*?)\n\2$|^([\w-]+)=([^\n]*)$", re.S | re.M)
ISOLATED = {"GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@dataclass
class Ran:
    """What a run of the Action left: outputs, summary, env lines, the steps' statuses."""

    outputs: dict[str, str]
    summary: str
    env_lines: list[str]
    statuses: dict[str, int] = field(default_factory=dict)
    uses: list[dict[str, Any]] = field(default_factory=list)
    step_outputs: dict[str, dict[str, str]] = field(default_factory=dict)


def parse_outputs(text: str) -> dict[str, str]:
    return {m[0] or m[3]: (m[2] if m[0] else m[4]) for m in OUTPUT.findall(text)}


class Runner:
    """Runs action.yml's steps the way the GitHub runner does, for one set of inputs."""

    def __init__(self, tmp: Path, workspace: Path, given: dict[str, str]) -> None:
        self.spec = yaml.safe_load((ROOT / "action.yml").read_text())
        defaults = {k: str(v.get("default", "")) for k, v in self.spec["inputs"].items()}
        unknown = set(given) - set(defaults)
        assert not unknown, f"not inputs of the Action: {unknown}"
        self.inputs = {**defaults, **given}
        self.tmp, self.workspace = tmp, workspace
        self.temp = tmp / "runner-temp"
        self.temp.mkdir()
        self.steps: dict[str, dict[str, str]] = {}
        self.failed = False

    def value(self, expr: str) -> str:
        parts = expr.split(".")
        if parts[0] == "inputs" and len(parts) == 2:
            return self.inputs[parts[1]]
        if expr == "github.action_path":
            return str(ROOT)
        if expr == "runner.temp":
            return str(self.temp)
        if parts[0] == "steps" and parts[2] == "outputs":
            return self.steps.get(parts[1], {}).get(parts[3], "")
        raise AssertionError(f"an expression this runner does not know: {expr}")

    def sub(self, text: str) -> str:
        return EXPR.sub(lambda m: self.value(m.group(1)), str(text))

    def condition(self, cond: str | None) -> bool:
        if cond is None:
            return not self.failed
        terms = [t.strip() for t in cond.split("&&")]
        ok = True
        for term in terms:
            if term == "always()":
                continue
            match = re.fullmatch(r"inputs\.([\w-]+) (==|!=) '(.*)'", term)
            assert match, f"a condition this runner does not know: {term}"
            equal = self.inputs[match.group(1)] == match.group(3)
            ok = ok and (equal if match.group(2) == "==" else not equal)
        return ok and ("always()" in terms or not self.failed)

    def run(self) -> Ran:
        ran = Ran({}, "", [])
        for number, step in enumerate(self.spec["runs"]["steps"]):
            name = step.get("id", f"step{number}")
            if not self.condition(step.get("if")):
                continue
            if "uses" in step:
                ran.uses.append({"uses": step["uses"],
                                 "with": {k: self.sub(v) for k, v in step.get("with", {}).items()}})
                continue
            if name == "install":
                continue
            ran.statuses[name] = self.bash(name, step, ran)
            self.failed = self.failed or ran.statuses[name] != 0
        ran.outputs = {k: self.sub(v["value"]) for k, v in self.spec["outputs"].items()}
        ran.step_outputs = self.steps
        return ran

    def bash(self, name: str, step: dict[str, Any], ran: Ran) -> int:
        assert step["shell"] == "bash"
        files = {k: self.tmp / f"{name}.{k}" for k in ("output", "summary", "env", "sh")}
        for path in files.values():
            path.write_text("")
        files["sh"].write_text(self.sub(step["run"]))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "NORMALIZE_"))}
        env.update(ISOLATED, CI="true", GITHUB_ACTIONS="true", RUNNER_TEMP=str(self.temp),
                   GITHUB_WORKSPACE=str(self.workspace), GITHUB_OUTPUT=str(files["output"]),
                   GITHUB_STEP_SUMMARY=str(files["summary"]), GITHUB_ENV=str(files["env"]),
                   PATH=VENV_BIN + os.pathsep + env.get("PATH", ""))
        env.update({k: self.sub(v) for k, v in step.get("env", {}).items()})
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail",
                               str(files["sh"])], cwd=self.workspace, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=300, check=False)
        (self.tmp / f"{name}.stderr").write_text(proc.stderr)
        self.steps[name] = parse_outputs(files["output"].read_text())
        ran.summary += files["summary"].read_text()
        ran.env_lines += files["env"].read_text().splitlines()
        return proc.returncode


def git(repo: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")} | ISOLATED
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """The repository a workflow checked out: one commit, the person's identity configured."""
    root = tmp_path / "checkout"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "CI Bot")
    git(root, "config", "user.email", "ci@example.test")
    (root / "calc.py").write_text("def f():\n    return 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def script(tmp: Path, *replies: str) -> str:
    path = tmp / "replies.json"
    path.write_text(json.dumps(list(replies)))
    return f"scripted:{path}"


EDIT = ("Editing calc.py.\nedit calc.py <<EOF\n<<<<<<< SEARCH\n    return 1\n=======\n"
        "    return 2\n>>>>>>> REPLACE\nEOF")


def test_a_done_task_gives_outputs_summary_artifacts_and_a_branch(
        tmp_path: Path, checkout: Path) -> None:
    runner = Runner(tmp_path, checkout, {
        "task": "make f return 2", "model": script(tmp_path, EDIT, "done f returns 2"),
        "approve": "auto", "commit-branch": "normalize/fix", "python-version": ""})
    ran = runner.run()
    assert ran.statuses == {"run": 0, "status": 0}, (tmp_path / "run.stderr").read_text()
    out = runner.temp / "normalize-out"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    started = next(e for e in events if e["type"] == "run_started")
    assert ran.outputs["task-id"] == started["task_id"]
    assert ran.outputs["status"] == "0" and ran.outputs["summary"] == "f returns 2"
    assert float(ran.outputs["cost"]) >= 0 and ran.outputs["result"] == ""
    assert ran.outputs["branch"] == "normalize/fix"
    assert "**Status:** done (exit 0)" in ran.summary and "f returns 2" in ran.summary
    assert f"**Task:** `{started['task_id']}`" in ran.summary and "**Cost:** $" in ran.summary
    assert "<html" in (out / "report.html").read_text().lower()
    assert (out / "normalize.log").exists() and not (out / "tasks").exists()
    upload = next(u for u in ran.uses if u["uses"].startswith("actions/upload-artifact"))
    assert upload["with"] == {"name": "normalize", "path": str(out)}
    home = f"NORMALIZE_HOME={runner.temp / 'normalize-home'}"
    assert ran.env_lines == [home] and not str(runner.temp).startswith(str(checkout))
    assert not (checkout / ".normalize").exists() or not any((checkout / ".normalize").iterdir())
    assert git(checkout, "diff", "main", "normalize/fix").count("+    return 2") == 1
    assert git(checkout, "status", "--porcelain") == " M calc.py\n"


def test_a_waiting_task_puts_its_question_in_the_summary_and_fails_the_step(
        tmp_path: Path, checkout: Path) -> None:
    runner = Runner(tmp_path, checkout, {
        "task": "pick a colour", "model": script(tmp_path, "ask Which colour, red or blue?"),
        "approve": "auto", "commit-branch": "normalize/never", "keep-task-files": "true",
        "python-version": ""})
    ran = runner.run()
    assert ran.statuses["run"] == 0 and ran.statuses["status"] == 4
    assert ran.outputs["status"] == "4" and ran.outputs["branch"] == ""
    assert "waiting for an answer (exit 4)" in ran.summary
    assert "**The task asks:** Which colour, red or blue?" in ran.summary
    assert f"normalize resume {ran.outputs['task-id']} --answer TEXT" in ran.summary
    out = runner.temp / "normalize-out"
    assert (out / "tasks" / f"{ran.outputs['task-id']}.json").exists() or \
        any((out / "tasks").rglob(f"*{ran.outputs['task-id']}*"))
    assert git(checkout, "branch", "--list", "normalize/*") == ""


def test_the_install_step_installs_the_actions_own_checkout(tmp_path: Path) -> None:
    runner = Runner(tmp_path, tmp_path, {})
    install = next(s for s in runner.spec["runs"]["steps"] if s.get("id") == "install")
    assert runner.sub(install["run"]) == f'python3 -m pip install --quiet "{ROOT}"'


def test_inputs_become_the_command_line() -> None:
    from normalize.cli.action import Inputs, command

    env = {"INPUT_WORKFLOW": "check", "INPUT_TASK": "tidy", "INPUT_VARS": "a=1\n\n b=2 \n",
           "INPUT_SCHEMA": "result.schema.json", "INPUT_MODEL": "scripted:x.json",
           "INPUT_MAX_TURNS": "3"}
    assert command(Inputs.from_env(env)) == [
        "run", "--json", "--goal=tidy", "--var=a=1", "--var=b=2",
        "--model=scripted:x.json", "--max-turns=3", "--output-schema=result.schema.json",
        "--", "check"]
    agent = command(Inputs.from_env({"INPUT_TASK": "fix it", "INPUT_BUDGET": "0.5"}))
    assert agent == ["agent", "--json", "--budget=0.5", "--", "fix it"]
    with pytest.raises(ValueError, match="`task`"):
        command(Inputs.from_env({}))


def test_a_structured_result_and_a_long_summary_survive_the_output_file(tmp_path: Path) -> None:
    from normalize.cli.action import Outcome, summary_markdown, write_output

    events = [{"type": "run_started", "task_id": "abc12345"},
              {"type": "run_ended", "task_id": "abc12345", "status": "done",
               "summary": "two\nlines", "cost_usd": 0.25, "result": {"ok": True, "n": 2}}]
    outcome = Outcome.read(0, events)
    path = tmp_path / "output"
    write_output(path, {"summary": outcome.summary, "result": json.dumps(outcome.result)})
    assert parse_outputs(path.read_text()) == {"summary": "two\nlines",
                                               "result": '{"ok": true, "n": 2}'}
    text = summary_markdown(outcome, "")
    assert "**Cost:** $0.2500" in text and '"n": 2' in text and "```json" in text


def test_a_title_that_looks_like_an_option_is_the_task_and_no_file_is_read(
        tmp_path: Path, checkout: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("the contents of a file outside the checkout\n")
    title = f"--task-file={outside}"
    runner = Runner(tmp_path, checkout, {
        "task": title, "model": script(tmp_path, "done nothing to do"), "approve": "auto",
        "python-version": ""})
    ran = runner.run()
    assert ran.statuses["run"] == 0, (tmp_path / "run.stderr").read_text()
    out = runner.temp / "normalize-out"
    text = (out / "events.jsonl").read_text()
    events = [json.loads(line) for line in text.splitlines()]
    started = next(e for e in events if e["type"] == "run_started")
    assert started["goal"] == title  # the words, not an option
    assert "the contents of a file outside" not in text


def test_the_actions_outputs_and_summary_pass_the_door(tmp_path: Path) -> None:
    from normalize.cli.action import write_output

    token = "ghp_" + "a1B2" * 9
    path = tmp_path / "output"
    write_output(path, {"summary": f"used v1.{token}", "result": json.dumps({"api_key": "x" * 9})})
    shown = parse_outputs(path.read_text())
    assert shown["summary"] == "used v1.[REDACTED]" and token not in path.read_text()
    assert json.loads(shown["result"]) == {"api_key": "[REDACTED]"}
