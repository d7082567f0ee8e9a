"""Shell completion: current scripts, task ids for `resume`, a fast and light request."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import NORMALIZE, cli_env, workspace

from normalize.store import TaskStore
from normalize.task import Task

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("anthropic", "httpx", "prompt_toolkit", "pydantic", "rich", "mcp", "acp")


@pytest.fixture
def two_tasks(normalize_home: Path, tmp_path: Path) -> list[str]:
    store = TaskStore(normalize_home, fsync=False)
    ids = []
    for goal in ("first", "second"):
        task = Task.new(goal=goal, workspace=str(tmp_path), driver="workflow")
        store.save(task)
        ids.append(task.id)
    return sorted(ids)


def complete_bash(words: str, cwd: Path | None = None) -> list[str]:
    """What a bash completion request answers for the command line `words` (cursor at end)."""
    cword = len(words.split(" ")) - 1
    env = cli_env(_NORMALIZE_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
    done = subprocess.run(NORMALIZE, env=env, cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_completion_scripts_are_current() -> None:
    done = subprocess.run([sys.executable, "scripts/gen_completions.py", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert (ROOT / "completions" / "_normalize").read_text().startswith("#compdef normalize\n")


def test_resume_tab_lists_task_ids(two_tasks: list[str]) -> None:
    assert complete_bash("normalize resume ") == ["last", *two_tasks]
    first = two_tasks[0]
    assert complete_bash(f"normalize resume {first[:3]}") == [
        i for i in two_tasks if i.startswith(first[:3])]
    assert complete_bash("normalize tasks show ") == ["last", *two_tasks]


def test_zsh_gets_the_ids_in_its_format(two_tasks: list[str]) -> None:
    env = cli_env(_NORMALIZE_COMPLETE="complete_zsh", _TYPER_COMPLETE_ARGS="normalize resume ")
    done = subprocess.run(NORMALIZE, env=env, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.startswith("_arguments '*: :((")
    for task_id in two_tasks:
        assert f'"{task_id}"' in done.stdout


def test_run_tab_lists_workflow_names_and_files(tmp_path: Path) -> None:
    project = workspace(tmp_path / "project")
    found = complete_bash("normalize run ", cwd=project)
    assert {"health", "check"} <= set(found)  # built-ins
    assert {"demo.toml", "asking.toml"} <= set(found)  # files here
    assert complete_bash("normalize run de", cwd=project) == ["demo.toml"]


def test_run_tab_leaves_out_toml_files_that_are_not_workflows(tmp_path: Path) -> None:
    project = workspace(tmp_path / "project")
    (project / "pyproject.toml").write_text('[project]\nname = "calc"\n[tool.ruff]\n')
    (project / "ruff.toml").write_text("line-length = 99\n")
    (project / "steps.toml").write_text('[[steps]]\naction = "test"\n')  # a workflow too
    found = complete_bash("normalize run ", cwd=project)
    assert "pyproject.toml" not in found and "ruff.toml" not in found
    assert {"demo.toml", "asking.toml", "steps.toml"} <= set(found)


def test_the_bash_script_completes_task_ids_in_bash(two_tasks: list[str]) -> None:
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    script = ROOT / "completions" / "normalize.bash"
    line = (f"source {script}; COMP_WORDS=(normalize resume ''); COMP_CWORD=2; "
            "_normalize_completion normalize; printf '%s\\n' \"${COMPREPLY[@]}\"")
    env = cli_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([bash, "--norc", "-c", line], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split() == ["last", *two_tasks]


def loaded(argv: list[str], heavy: tuple[str, ...] = HEAVY, **env: str) -> list[str]:
    """The heavy modules a `normalize ARGV` process has imported when it exits."""
    code = (
        "import sys, atexit\n"
        f"atexit.register(lambda: sys.stderr.write('LOADED ' + ' '.join("
        f"m for m in {heavy!r} if m in sys.modules) + '\\n'))\n"
        "from normalize.cli.app import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=cli_env(**env), capture_output=True,
                          text=True, timeout=60, check=False)
    marker = [ln for ln in done.stderr.splitlines() if ln.startswith("LOADED")]
    assert marker, done.stderr
    return marker[-1].split()[1:]


def test_help_imports_no_sdk_http_prompt_or_rich() -> None:
    assert loaded(["--help"]) == []
    assert loaded(["run", "--help"]) == []


def test_listing_and_showing_tasks_import_none_of_them(two_tasks: list[str]) -> None:
    assert loaded(["tasks"]) == []
    assert loaded(["tasks", "show", two_tasks[0]]) == []


def test_help_completion_and_the_listing_leave_msgspec_and_the_events_unloaded(
        two_tasks: list[str]) -> None:
    """msgspec (the event union, journals, checkpoint records) loads where a run or a
    journal needs it: `--help`, a completion request and `tasks` never pay for it."""
    later = ("msgspec", "normalize.events")
    assert loaded(["--help"], later) == []
    assert loaded(["tasks"], later) == []
    assert loaded([], later, _NORMALIZE_COMPLETE="complete_bash",
                  COMP_WORDS="normalize resume ", COMP_CWORD="2") == []
    assert loaded(["tasks", "show", two_tasks[0]], later) == list(later)  # the test can fail


def test_a_completion_request_imports_none_of_them(two_tasks: list[str]) -> None:
    assert loaded([], _NORMALIZE_COMPLETE="complete_bash", COMP_WORDS="normalize resume ",
                  COMP_CWORD="2") == []
    assert loaded([], _NORMALIZE_COMPLETE="complete_zsh",
                  _TYPER_COMPLETE_ARGS="normalize ") == []
    assert loaded([], _NORMALIZE_COMPLETE="complete_fish", _TYPER_COMPLETE_FISH_ACTION="get-args",
                  _TYPER_COMPLETE_ARGS="normalize run ") == []


def test_install_completion_writes_the_same_script(tmp_path: Path) -> None:
    env = cli_env(HOME=str(tmp_path), _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    done = subprocess.run([*NORMALIZE, "--install-completion", "bash"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    installed = (tmp_path / ".bash_completions" / "normalize.sh").read_text()
    shipped = (ROOT / "completions" / "normalize.bash").read_text()
    body = "".join(line for line in shipped.splitlines(keepends=True) if not line.startswith("#"))
    assert installed.strip() == body.strip()
    assert "normalize.sh" in (tmp_path / ".bashrc").read_text()


@pytest.mark.parametrize(("args", "message"), [
    (["resume"], "missing argument 'task'"),
    (["resume", "abc", "--max-turns", "0"], "greater than or equal to 1"),
    (["resume", "abc", "--max-turns", "x"], "valid integer"),
])
def test_arguments_are_still_checked_without_the_conversion_step(args: list[str],
                                                                 message: str) -> None:
    done = subprocess.run([*NORMALIZE, *args], env=cli_env(), capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2
    assert message in done.stderr
