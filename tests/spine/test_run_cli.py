"""`normalize run / tasks / resume` from the outside, in real subprocesses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from helpers import REPO, cli, json_lines, make_sample_repo

HEALTH = str(REPO / "workflows" / "health.toml")


def test_health_json_run_is_recorded_and_listed(tmp_path: Path, normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    proc = cli("run", HEALTH, "--json", cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    events = json_lines(proc.stdout)  # every stdout line parses
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_ended"
    assert events[-1]["status"] == "done"
    assert all(e["v"] == 1 for e in events)
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    task_id = events[0]["task_id"]
    assert (normalize_home / "tasks" / f"{task_id}.json").is_file()
    assert "2 passed" in events[-1]["summary"]
    tested = next(e for e in events if e["type"] == "action_finished" and e["tool"] == "test")
    assert tested["preview"].splitlines()[0] == "pytest: 2 passed"  # the verdict comes first

    listing = cli("tasks", cwd=repo, home=normalize_home)
    assert listing.returncode == 0
    assert task_id in listing.stdout and "done" in listing.stdout

    shown = cli("tasks", "show", task_id[:4], cwd=repo, home=normalize_home)
    assert shown.returncode == 0, shown.stderr
    assert "analyze . --health" in shown.stdout
    assert "✓ test" in shown.stdout


def test_health_works_in_a_directory_without_tests(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("run", "health", "--quiet", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    assert "no tests" in proc.stdout


def test_check_state_machine_fails_when_tests_fail(tmp_path: Path, normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n\n\ndef mean(xs):\n"
                                  "    return 2\n")
    proc = cli("run", "check", "--json", cwd=repo, home=normalize_home)
    assert proc.returncode == 1
    events = json_lines(proc.stdout)
    states = [e["state"] for e in events if e["type"] == "step_started"]
    assert states == ["testing", "analyzing"]
    assert events[-1]["status"] == "failed"


def _counter_workflow(path: Path) -> Path:
    bump = ("import pathlib; p = pathlib.Path('counter.txt'); "
            "n = int(p.read_text() or 0) + 1 if p.exists() else 1; p.write_text(str(n)); "
            "print('count=%d' % n)")
    path.write_text(f"""
[workflow]
name = "count-to-three"

[workflow.permissions]
mode = "yes"

[[states]]
name = "bump"
action = '''run {sys.executable} -c "{bump}"'''
  [[states.transitions]]
  condition = "contains:count=3"
  next = "finished"
  [[states.transitions]]
  condition = "success"
  next = "bump"

[[states]]
name = "finished"
terminal = true
summary = "counted to three"
""")
    return path


def test_state_machine_loops_until_its_condition_holds(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    flow = _counter_workflow(tmp_path / "count.toml")
    proc = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert (tmp_path / "counter.txt").read_text() == "3"
    events = json_lines(proc.stdout)
    assert [e["state"] for e in events if e["type"] == "step_started"] == ["bump"] * 3
    assert events[-1]["summary"] == "counted to three"


def _slow_workflow(path: Path) -> Path:
    append = "import sys; open('log.txt', 'a').write(sys.argv[1] + chr(10))"
    wait = ("import os, time; [time.sleep(0.05) for _ in iter(lambda: os.path.exists('go'), "
            "True)]; open('log.txt', 'a').write('two' + chr(10))")
    path.write_text(f"""
[workflow]
name = "slow"
on_interrupt = "rerun"

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "one"
action = '''run {sys.executable} -c "{append}" one'''

[[workflow.steps]]
name = "two"
action = '''run {sys.executable} -c "{wait}"'''

[[workflow.steps]]
name = "three"
action = '''run {sys.executable} -c "{append}" three'''
""")
    return path


def _wait_for(predicate: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def test_sigint_interrupts_and_resume_does_not_rerun_earlier_steps(
        tmp_path: Path, normalize_home: Path) -> None:
    flow = _slow_workflow(tmp_path / "slow.toml")
    env = {**os.environ, "NORMALIZE_HOME": str(normalize_home)}
    proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", "run", str(flow),
                             "--json"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    journal_dir = normalize_home / "tasks"

    def step_two_running() -> bool:
        for journal in journal_dir.glob("*.jsonl"):
            lines = journal.read_text().splitlines()
            if any('"action_started"' in ln and '"1.0"' in ln for ln in lines):
                return True
        return False

    _wait_for(step_two_running)
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    events = json_lines(out)
    assert events[-1]["type"] == "run_ended" and events[-1]["status"] == "interrupted"
    task_id = events[0]["task_id"]
    task = json.loads((journal_dir / f"{task_id}.json").read_text())
    assert task["status"] == "interrupted"
    assert (tmp_path / "log.txt").read_text() == "one\n"

    (tmp_path / "go").write_text("")
    resumed = cli("resume", task_id, "--json", cwd=tmp_path, home=normalize_home)
    assert resumed.returncode == 0, resumed.stderr
    assert (tmp_path / "log.txt").read_text() == "one\ntwo\nthree\n"
    # step two was cut short: its outcome is unknown, and on_interrupt = "rerun" runs it again
    assert [e["type"] for e in json_lines(resumed.stdout)].count("action_interrupted") == 1
    commands = [e["command"] for e in json_lines(resumed.stdout) if e["type"] == "action_started"]
    assert len(commands) == 2 and "one" not in commands[0].split()[-1:]


def test_help_does_not_import_heavy_modules(tmp_path: Path) -> None:
    code = ("import sys\nfrom normalize.cli.app import main\n"
            "import contextlib, io\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
            "heavy = [m for m in ('anthropic', 'httpx', 'prompt_toolkit', 'opentelemetry', 'acp',\n"
            "                     'sqlite3', 'normalize.memory')\n"
            "         if m in sys.modules]\n"
            "print(heavy)\n")
    traced = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}  # still none
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, env=traced)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "[]"


def test_tasks_list_is_empty_on_a_new_home(tmp_path: Path, normalize_home: Path) -> None:
    proc = cli("tasks", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0
    assert proc.stdout.strip() == "no tasks yet"


def test_health_reports_tests_that_cannot_even_be_collected(tmp_path: Path,
                                                            normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    (repo / "tests" / "test_broken.py").write_text("def test_x(:\n")
    proc = cli("run", "health", "--json", cwd=repo, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    summary = json_lines(proc.stdout)[-1]["summary"]
    assert "tests: " in summary and "error" in summary


def test_a_done_summary_may_hold_captured_lines(tmp_path: Path, normalize_home: Path) -> None:
    flow = tmp_path / "multi.toml"
    flow.write_text('''
[workflow]
name = "multi"

[[workflow.steps]]
name = "tree"
action = "view ."
capture = "tree"

[[workflow.steps]]
name = "end"
action = "done files: {tree}"
''')
    (tmp_path / "a.py").write_text("x = 1\n")
    proc = cli("run", str(flow), "--json", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 0, proc.stderr
    summary = json_lines(proc.stdout)[-1]["summary"]
    assert summary.startswith("files: ") and "a.py" in summary and "\n" in summary


def test_run_takes_a_model_for_its_model_steps(tmp_path: Path, normalize_home: Path) -> None:
    repo = make_sample_repo(tmp_path / "repo")
    calc = repo / "calc.py"
    calc.write_text(calc.read_text().replace("return a + b", "return a - b"))
    fix = ("edit calc.py <<EOF\n<<<<<<< SEARCH\n    return a - b\n=======\n"
           "    return a + b\n>>>>>>> REPLACE\nEOF\ndone add adds again")
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps(["view calc.py", fix]))
    env = {"ANTHROPIC_API_KEY": "", "OPENAI_API_KEY": ""}
    proc = cli("run", "validate-fix", "--model", f"scripted:{replies}", "--json", cwd=repo,
               home=normalize_home, env=env)
    assert proc.returncode == 0, proc.stderr
    assert json_lines(proc.stdout)[-1]["summary"] == "the tests pass"
    assert "return a + b" in calc.read_text()


def test_bad_arguments_are_one_line_and_create_no_task(tmp_path: Path,
                                                       normalize_home: Path) -> None:
    for args, message in [
        (("run", "health", "--approve", "maybe"), "--approve maybe: unknown approval mode"),
        (("run", "health", "--var", "nope=1"), "has no variable 'nope'"),
        (("run", "health", "--var", "bad"), "--var 'bad': expected KEY=VALUE"),
        (("run", "nosuch"), "nosuch: no such workflow file or name"),
        (("resume", "zzzz"), "no task matches 'zzzz'"),
    ]:
        proc = cli(*args, cwd=tmp_path, home=normalize_home)
        assert proc.returncode == 2, args
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (args, proc.stderr)
        assert "Traceback" not in proc.stderr
    assert not list(normalize_home.glob("tasks/*.json"))
