"""The `run` tool and `run_process`: real subprocesses, no shell."""

from __future__ import annotations

import os
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from support import alive_with

from normalize.cancel import CancelToken
from normalize.errors import ToolError
from normalize.execution.cache import MemoryCache
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.base import ToolContext, ToolRegistry
from normalize.tools.run import RunTool, refuse_shell_syntax, run_process

PY = sys.executable


@pytest.fixture
def ctx(tool_ctx: ToolContext) -> ToolContext:
    """The shared tool context (tests/tools/conftest.py) with a shorter timeout."""
    tool_ctx.timeout = 30.0
    return tool_ctx


def run(ctx: ToolContext, *args: str, text: str = "", tool: RunTool | None = None,
        **params: object) -> ActionResult:
    action = Action("run", {"args": list(args), **params}, text=text)
    return (tool or RunTool()).run(action, ctx)


def script(body: str) -> list[str]:
    return [PY, "-c", textwrap.dedent(body)]


def wait_for(path: Path, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} never appeared")
        time.sleep(0.01)


def test_output_and_exit_code(ctx: ToolContext) -> None:
    result = run(ctx, *script("import sys; print('out'); print('err', file=sys.stderr)"))
    assert result.status is ResultStatus.SUCCESS
    assert result.exit_code == 0
    assert result.output == "out\nerr\n"


def test_nonzero_exit_is_an_error_that_keeps_the_output(ctx: ToolContext) -> None:
    result = run(ctx, *script("print('partial'); raise SystemExit(3)"))
    assert result.status is ResultStatus.ERROR
    assert result.error == "exit status 3"
    assert result.exit_code == 3
    assert result.output == "partial\n"


def test_runs_in_the_workspace_without_stdin_with_the_parent_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NORMALIZE_TEST_MARK", "kept")
    result = run(ctx, *script("""
        import os, sys
        print(os.getcwd())
        print(repr(sys.stdin.read()))
        print(os.environ['NORMALIZE_TEST_MARK'], os.environ['PYTHONUNBUFFERED'])
    """))
    assert result.output.splitlines() == [str(ctx.workspace.resolve()), "''", "kept 1"]


def test_a_timeout_stops_the_process(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(ctx, "--timeout", "2", *script("""
        import time
        print('started', flush=True)
        time.sleep(30)
    """))
    assert time.monotonic() - started < 15
    assert result.status is ResultStatus.ERROR
    assert result.error == "timed out after 2 s"
    assert result.output == "started\n"


def test_a_timeout_applies_after_the_output_closes(tmp_path: Path) -> None:
    outcome = run_process(
        script("import os, time; print('bye', flush=True); os.close(1); os.close(2); "
               "time.sleep(30)"),
        cwd=tmp_path, timeout=1.0, grace=0.5,
    )
    assert outcome.timed_out
    assert outcome.output == "bye\n"


def test_the_context_timeout_applies_without_an_option(ctx: ToolContext) -> None:
    ctx.timeout = 0.3
    result = run(ctx, *script("import time; time.sleep(30)"))
    assert result.error == "timed out after 0.3 s"


def test_a_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    token = f"grandchild-{tmp_path.name}"
    outcome = run_process(
        script(f"""
            import subprocess, sys, time
            child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)',
                                      {token!r}])
            time.sleep(60)
        """),
        cwd=tmp_path, timeout=1.0, grace=0.5,
    )
    assert outcome.timed_out
    deadline = time.monotonic() + 5
    while alive_with(token, zombies=True) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = alive_with(token, zombies=True)
    for pid in left:
        os.kill(pid, 9)
    assert not left, "the grandchild outlived the timeout"


def test_output_is_capped_in_memory_keeping_head_and_tail(ctx: ToolContext) -> None:
    tool = RunTool(max_bytes=10_000)
    result = run(ctx, *script("""
        import sys
        sys.stdout.write('HEAD\\n' + 'x' * 1_000_000 + '\\nTAIL\\n')
    """), tool=tool)
    assert result.ok
    assert result.output.startswith("HEAD\n")
    assert result.output.endswith("TAIL\n")
    assert "[output truncated: 990011 bytes cut" in result.output
    assert result.data["truncated_bytes"] == 990011
    assert len(result.output) < 10_200


def test_a_chatty_process_on_both_streams_does_not_deadlock(ctx: ToolContext) -> None:
    started = time.monotonic()
    result = run(ctx, *script("""
        import sys
        line = 'y' * 1023 + '\\n'
        for _ in range(4096):
            sys.stdout.write(line)
            sys.stderr.write(line)
        print('done')
    """))
    assert result.ok, result.error
    assert time.monotonic() - started < 20
    assert result.output.endswith("done\n")
    assert result.data["truncated_bytes"] == 8 * 1024 * 1024 + 5 - 2 * 1024 * 1024


def test_cancel_sends_sigint_to_the_child(ctx: ToolContext) -> None:
    ready = ctx.workspace / "ready"  # the sandbox lets the child write only in its workspace
    token = ctx.cancel

    def cancel_when_ready() -> None:
        wait_for(ready)
        token.cancel("user pressed Ctrl-C")

    threading.Thread(target=cancel_when_ready, daemon=True).start()
    result = run(ctx, *script(f"""
        import signal, sys, time
        def stop(*_):
            print('got SIGINT', flush=True)
            sys.exit(130)
        signal.signal(signal.SIGINT, stop)
        print('working', flush=True)
        open({str(ready)!r}, 'w').close()
        time.sleep(30)
    """))
    assert result.status is ResultStatus.CANCELLED
    assert result.output == "working\ngot SIGINT\n"
    assert result.exit_code == 130


def test_cancel_escalates_to_sigterm_after_the_grace_period(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    token = CancelToken()

    def cancel_when_ready() -> None:
        wait_for(ready)
        token.cancel()

    threading.Thread(target=cancel_when_ready, daemon=True).start()
    started = time.monotonic()
    outcome = run_process(
        script(f"""
            import signal, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            open({str(ready)!r}, 'w').close()
            time.sleep(30)
        """),
        cwd=tmp_path, timeout=30, cancel=token, grace=0.3,
    )
    assert outcome.cancelled
    assert outcome.signal_name == "SIGTERM"
    assert time.monotonic() - started < 10


def test_a_hard_cancel_kills_at_once(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    token = CancelToken()

    def cancel_twice() -> None:
        wait_for(ready)
        token.cancel()
        token.cancel()  # the second cancel is hard

    threading.Thread(target=cancel_twice, daemon=True).start()
    outcome = run_process(
        script(f"""
            import signal, time
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            open({str(ready)!r}, 'w').close()
            time.sleep(30)
        """),
        cwd=tmp_path, timeout=30, cancel=token, grace=20,
    )
    assert outcome.cancelled
    assert outcome.signal_name == "SIGKILL"
    assert outcome.duration < 10


def test_a_cancelled_token_starts_nothing(ctx: ToolContext, tmp_path: Path) -> None:
    ctx.cancel.cancel()
    result = run(ctx, *script(f"open({str(tmp_path / 'ran')!r}, 'w')"))
    assert result.status is ResultStatus.CANCELLED
    assert not (tmp_path / "ran").exists()


def test_a_chain_in_one_word_is_refused(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="without a shell"):
        run(ctx, "pytest; rm -rf ~", text='run "pytest; rm -rf ~"')
    with pytest.raises(ToolError, match="without a shell"):
        run(ctx, "pytest; rm -rf ~")


def test_a_redirection_is_refused_and_creates_nothing(ctx: ToolContext) -> None:
    result = ToolRegistry([RunTool()]).execute(
        Action("run", {"args": ["echo", "hi", ">", "f"]}, text="run echo hi > f"), ctx
    )
    assert result.status is ResultStatus.ERROR
    assert "split it into separate `run` actions" in (result.error or "")
    assert list(ctx.workspace.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ("run pytest && rm x", ["pytest", "&&", "rm", "x"]),
        ("run ls a;b.txt", ["ls", "a;b.txt"]),
        ("run echo $(date)", ["echo", "$(date)"]),
        ("run cat x | head", ["cat", "x", "|", "head"]),
        ("", ["cat", "x", "|", "head"]),
    ],
)
def test_shell_operators_are_refused(ctx: ToolContext, text: str, args: list[str]) -> None:
    with pytest.raises(ToolError, match="without a shell"):
        run(ctx, *args, text=text)


def test_quoted_operators_are_plain_arguments(ctx: ToolContext) -> None:
    code = "import sys; print(sys.argv[1:])"
    text = f"run {PY} -c \"{code}\" -- -rf 'a;b.txt' 'x > y'"
    result = run(ctx, PY, "-c", code, "--", "-rf", "a;b.txt", "x > y", text=text)
    assert result.ok, result.error
    assert result.output == "['--', '-rf', 'a;b.txt', 'x > y']\n"


@pytest.mark.parametrize(
    ("text", "args"),
    [
        ('run grep -E "foo|bar" x', ["grep", "-E", "foo|bar", "x"]),
        ('run git log --format="%h;%s"', ["git", "log", "--format=%h;%s"]),
        ("run echo '$(date)'", ["echo", "$(date)"]),
    ],
)
def test_quoted_operators_pass_the_check(text: str, args: list[str]) -> None:
    refuse_shell_syntax(Action("run", {"args": args}, text=text), args)


def test_words_with_spaces_count_as_quoted_without_the_text(ctx: ToolContext) -> None:
    result = run(ctx, PY, "-c", "import sys; print(sys.argv[1:])", "-rf")
    assert result.output == "['-rf']\n"


def test_a_policy_may_allow_the_shell(ctx: ToolContext) -> None:
    result = run(ctx, "echo a; echo b", shell=True)
    assert result.output == "a\nb\n"
    result = run(ctx, "echo", "a", "&&", "echo", "b c", text="run echo a && echo 'b c'",
                 shell=True)
    assert result.output == "a\nb c\n"


def test_a_missing_program_is_named(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="program not found: no-such-program-xyz"):
        run(ctx, "no-such-program-xyz", "--version")


def test_a_shell_builtin_gets_a_hint(ctx: ToolContext) -> None:
    with pytest.raises(ToolError, match="`cd` is a shell builtin") as err:
        run(ctx, "cd", "src")
    assert err.value.hint is not None
    with pytest.raises(ToolError, match="run env FOO=1 PROGRAM"):
        run(ctx, "FOO=1", "pytest")


@pytest.mark.parametrize("args", [[], ["--timeout"], ["--timeout", "soon", "ls"],
                                  ["--timeout", "0", "ls"]])
def test_bad_invocations(ctx: ToolContext, args: list[str]) -> None:
    with pytest.raises(ToolError):
        run(ctx, *args)


def test_the_registry_previews_a_long_run(ctx: ToolContext) -> None:
    ctx.cache = MemoryCache()
    result = ToolRegistry([RunTool()]).execute(
        Action("run", {"args": script("for i in range(500): print(i)")}), ctx
    )
    assert result.ok
    assert result.cache_id == "r1"
    assert result.preview.splitlines()[-1] == "… 481 more lines — fetch r1"
    assert len(result.output.splitlines()) == 500
