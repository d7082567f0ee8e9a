"""Legitimate work still runs inside the sandbox: tests, checkers, git, build output."""

from __future__ import annotations

import os

from sandbox_support import Site

BUILD = ("run python3 -c \"import os, pathlib, tempfile; pathlib.Path('build').mkdir(); "
         "pathlib.Path('build/out.txt').write_text('built'); "
         "f = tempfile.NamedTemporaryFile(delete=False); f.write(b'tmp'); f.close(); "
         "print('tmp', f.name, os.environ['TMPDIR'])\"")


def test_tests_checkers_git_and_builds_run_in_the_sandbox(site: Site) -> None:
    (site.ws / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a + b  # new\n")
    replies = ["test tests", "run python -m pytest -q tests", "run python -m mypy calc.py",
               "run ruff check calc.py", "run git status --short", "run git diff --stat",
               "run git log --oneline", BUILD, "done all good"]
    proc, finished = site.agent(replies)
    assert proc.returncode == 0, proc.stderr
    by_command = {r["command"]: r for r in finished}
    failures = [(r["command"], r.get("error")) for r in finished if r["status"] != "success"]
    assert failures == []
    assert "1 passed" in by_command["test tests"]["preview"]
    assert "Success" in by_command["run python -m mypy calc.py"]["preview"]
    assert "M calc.py" in by_command["run git status --short"]["preview"]
    assert "calc.py" in by_command["run git diff --stat"]["preview"]
    assert (site.ws / "build" / "out.txt").read_text() == "built"
    words = by_command[BUILD]["preview"].split()
    tmp_file, tmpdir = words[words.index("tmp") + 1], words[words.index("tmp") + 2]
    assert tmp_file.startswith(tmpdir + os.sep)  # TMPDIR is the per-program directory
    assert not os.path.exists(tmpdir)  # removed when the program ended
    assert not (site.ws / ".git" / "index.lock").exists()


def test_read_only_mode_writes_only_the_temporary_directory(site: Site) -> None:
    replies = ["run touch made-here.txt", "run python3 -c \"import tempfile; tempfile.mkstemp()\"",
               "done"]
    proc, finished = site.agent(replies, "--sandbox", "read-only")
    assert proc.returncode == 0, proc.stderr
    touch, temp = finished
    assert touch["status"] == "error" and "Permission denied" in touch["preview"]
    assert not (site.ws / "made-here.txt").exists()
    assert temp["status"] == "success"


def test_network_flag_lets_programs_connect_but_asks_in_auto(site: Site) -> None:
    proc, finished = site.agent(["run python3 -c pass", "done"], "--network")
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "blocked"
    assert "network access" in finished[0]["error"]
