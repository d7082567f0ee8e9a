"""Plain lines for pipes, TERM=dumb and --quiet (NO_COLOR: the live view, colourless); JSON."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from cli_helpers import NORMALIZE, cli_env, run_in_pty, strip_ansi, workspace

ESC = "\x1b"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return workspace(tmp_path / "project")


def run_piped(project: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NORMALIZE, "run", *args], cwd=project, env=cli_env(**env),
                          capture_output=True, text=True, timeout=60, check=False)


def plain_steps(out: str) -> list[str]:
    return [line.split("  (")[0] for line in out.splitlines()
            if line.startswith(("→", "  ✓", "  ✗"))]


def test_a_pipe_gets_plain_lines(project: Path) -> None:
    done = run_piped(project, "demo.toml")
    assert done.returncode == 0, done.stderr
    assert ESC not in done.stdout
    assert plain_steps(done.stdout) == [
        "→ step 1/2: look", "  ✓ view calc.py", "→ step 2/2: remember",
        "  ✓ note calc.py is small",
    ]
    assert re.fullmatch(r"task [0-9a-f]{8} done · \d+ turns · 2 actions · [\d.]+s",
                        done.stdout.splitlines()[-2])


def test_a_terminal_gets_the_live_view(project: Path) -> None:
    status, out, _ = run_in_pty([*NORMALIZE, "run", "demo.toml"], cli_env(), project)
    assert status == 0
    assert f"{ESC}[" in out  # colours and cursor control: the live view
    assert "╭─ ✓ done · task" in strip_ansi(out)  # the summary panel


def test_no_color_keeps_the_live_view_without_colour(project: Path) -> None:
    status, out, _ = run_in_pty([*NORMALIZE, "run", "demo.toml"], cli_env(NO_COLOR="1"),
                                project)
    assert status == 0
    assert "╭─ ✓ done · task" in strip_ansi(out)  # the live view and its panel, as without it
    colours = re.findall(r"\x1b\[([0-9;]*)m", out)
    assert not [c for c in colours if re.search(r"(^|;)(3[0-8]|9[0-7]|4[0-8])(;|$)", c)], \
        colours  # no colour: no-color.org asks for that only


@pytest.mark.parametrize("env", [{"TERM": "dumb"}])
def test_a_dumb_terminal_gets_plain_lines(project: Path, env: dict[str, str]) -> None:
    status, out, _ = run_in_pty([*NORMALIZE, "run", "demo.toml"], cli_env(**env), project)
    assert status == 0
    assert ESC not in out
    assert plain_steps(out) == [
        "→ step 1/2: look", "  ✓ view calc.py", "→ step 2/2: remember",
        "  ✓ note calc.py is small",
    ]


def test_quiet_prints_only_the_summary(project: Path) -> None:
    status, out, _ = run_in_pty([*NORMALIZE, "run", "demo.toml", "--quiet"], cli_env(), project)
    assert status == 0
    assert ESC not in out
    lines = out.splitlines()
    assert re.fullmatch(r"task [0-9a-f]{8} done · \d+ turns · 2 actions · [\d.]+s", lines[0])
    assert lines[1:] == ["  all 2 steps finished"]


def test_json_puts_only_events_on_stdout_and_people_text_on_stderr(project: Path) -> None:
    done = run_piped(project, "asking.toml", "--json")
    assert done.returncode == 4  # waiting for an answer
    events = [json.loads(line) for line in done.stdout.splitlines()]  # every line parses
    assert events and all(e["v"] == 1 and e["task_id"] for e in events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "run_started" and kinds[-1] == "run_ended"
    assert "waiting_for_input" in kinds
    assert [e["seq"] for e in events] == sorted(e["seq"] for e in events)
    assert "is waiting: Which Python version should I target?" in done.stderr
    assert "normalize resume" in done.stderr


def test_json_on_a_terminal_is_still_only_json(project: Path) -> None:
    status, out, _ = run_in_pty([*NORMALIZE, "run", "demo.toml", "--json"], cli_env(), project)
    assert status == 0
    assert ESC not in out
    assert [json.loads(line)["type"] for line in out.splitlines()][-1] == "run_ended"


def test_plain_lines_name_an_edit_without_its_heredoc() -> None:
    import io

    from normalize.cli.render import PlainRenderer
    from normalize.events import ActionFinished, Emitter, RunEnded, WaitingForInput

    out = io.StringIO()
    emitter = Emitter("abc12345")
    emitter.subscribe(PlainRenderer(out))
    quiet = io.StringIO()
    emitter.subscribe(PlainRenderer(quiet, quiet=True))
    emitter.emit(ActionFinished(key="0.0", tool="edit", command="edit calc.py <<EOF\nbody\nEOF",
                                status="success", duration=0.012))
    emitter.emit(ActionFinished(key="0.1", tool="run", command="run pytest", status="error",
                                duration=1.5, error="exit code 1"))
    emitter.emit(WaitingForInput(question="Which version?"))
    emitter.emit(RunEnded(status="waiting", exit_code=4, summary="Which version?", turns=1,
                          actions=2, duration=2.0))
    assert out.getvalue().splitlines() == [
        "  ✓ edit calc.py  (0.01s)",
        "  ✗ run pytest  (1.50s)",
        "      exit code 1",
        "? waiting for an answer: Which version?",
        "task abc12345 waiting · 1 turn · 2 actions · 2.0s",  # the question once
    ]
    assert quiet.getvalue().splitlines() == out.getvalue().splitlines()[3:]
