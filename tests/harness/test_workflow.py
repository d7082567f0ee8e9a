"""A workflow mixes harnesses: its state machine has Codex fix, runs the check itself, and
hands a check that still fails to Claude Code; `tasks show` says whose turn each was.

A state names its agent with `harness = "codex"`; `action = "claude"` (the step kind) is the
same thing spelt as a command, and is accepted too."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness_support import LAUNCHER, events_of, harness_bin, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse
from normalize.workflow.loader import load_workflow_text

WORKFLOW = """\
[workflow]
name = "fix-with-harnesses"

[workflow.permissions]
mode = "auto"

[[states]]
name = "fix"
harness = "codex"
prompt = "Make check.py pass."
  [[states.transitions]]
  next = "check"

[[states]]
name = "check"
action = "run python3 check.py"
  [[states.transitions]]
  condition = "success"
  next = "done"
  [[states.transitions]]
  condition = "visits:2"
  next = "failed"
  [[states.transitions]]
  next = "escalate"

[[states]]
name = "escalate"
action = "claude"
prompt = "check.py still fails after another agent's fix. Make it pass."
  [[states.transitions]]
  next = "check"

[[states]]
name = "done"
terminal = true

[[states]]
name = "failed"
terminal = true
status = "failed"
"""


def test_codex_fixes_normalize_checks_and_claude_takes_the_stubborn_failure(
        tmp_path: Path) -> None:
    site = make_site(tmp_path, "codex")
    site.env["NORMALIZE_CLAUDE_BIN"] = harness_bin("claude")
    flow = tmp_path / "fix.toml"
    flow.write_text(WORKFLOW)
    ws = site.ws
    wrong = Reply("", tools=(ToolUse("exec_command",
                                     {"cmd": "sed -i 's/a - b/a * b/' calc.py"}),))
    right = Reply("Reading.", tools=(ToolUse("Read", {"file_path": f"{ws}/calc.py"}),))
    edit = Reply("Fixing.", tools=(ToolUse("Edit", {"file_path": f"{ws}/calc.py",
                                                     "old_string": "a * b",
                                                     "new_string": "a + b"}),))
    with FakeModelServer([wrong, Reply("Changed the operator.")]) as openai, \
            FakeModelServer([right, edit, Reply("It adds now.")]) as anthropic:
        o_port, a_port = (int(s.url.rsplit(":", 1)[1]) for s in (openai, anthropic))
        env = {**site.env, "OPENAI_BASE_URL": f"http://openai.harness.test:{o_port}/v1",
               "ANTHROPIC_BASE_URL": f"http://anthropic.harness.test:{a_port}"}
        proc = subprocess.run(
            [*LAUNCHER, f"openai.harness.test=127.0.0.1:{o_port}",
             f"anthropic.harness.test=127.0.0.1:{a_port}", "--", "run", str(flow), "--json",
             "--goal", "make the check pass"],
            cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=300, check=False)
        openai.assert_done()
        anthropic.assert_done()
    assert proc.returncode == 0, proc.stderr
    events = events_of(proc.stdout)
    turns = [(e["tool"], e["status"]) for e in of_type(events, "action_finished")]
    assert turns == [("harness", "success"), ("run", "error"), ("harness", "success"),
                     ("run", "success")]
    assert (ws / "calc.py").read_text().endswith("a + b\n") and (ws / "report.txt").exists()
    shown = site.cli("tasks", "show", str(events[0]["task_id"])).stdout
    codex_at, claude_at = shown.find("codex: Make check.py pass."), shown.find("claude: check.py")
    assert 0 <= codex_at < claude_at, shown


def test_a_steps_harness_is_the_step_kind_of_that_name() -> None:
    spec = load_workflow_text('[[steps]]\nname = "fix"\nharness = "aider"\n'
                              'prompt = "Fix {task}."\n', label="fix.toml")
    assert (spec.steps[0].action, spec.steps[0].prompt) == ("aider", "Fix {task}.")
    states = load_workflow_text(WORKFLOW, label="states.toml").states
    assert [s.action for s in states[:3]] == ["codex", "run python3 check.py", "claude"]
