"""The door itself (`normalize.programs`), on real programs: what a program started through
it sees of its environment and working directory, and what a bad setting says."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from normalize.programs import ProgramError, resolve, run, time_limit


def _env_of(ws: Path, monkeypatch: pytest.MonkeyPatch, **variables: str) -> dict[str, str]:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    ended = run(["env", "-0"], timeout=30, untrusted=(ws,))
    assert ended.ok, ended.why()
    pairs = (item.split("=", 1) for item in ended.stdout.decode().split("\0") if "=" in item)
    return dict(pairs)


def test_variables_that_load_code_keep_only_entries_outside_the_workspace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws, elsewhere = tmp_path / "ws", tmp_path / "lib"
    ws.mkdir()
    elsewhere.mkdir()
    seen = _env_of(ws, monkeypatch, LD_PRELOAD=f"{ws}/evil.so {elsewhere}/ok.so",
                   BASH_ENV=str(ws / ".bashrc"), PYTHONPATH=f"{ws}/src:src:{elsewhere}",
                   ANTHROPIC_API_KEY="sk-ant-secret", PATH=f"{ws}/.venv/bin:/usr/bin")
    assert seen["LD_PRELOAD"] == f"{elsewhere}/ok.so"
    assert "BASH_ENV" not in seen
    assert seen["PYTHONPATH"] == str(elsewhere)
    assert "ANTHROPIC_API_KEY" not in seen  # the sandbox's scrub
    assert str(ws) not in seen["PATH"]


def test_it_runs_in_an_empty_directory_unless_asked_for_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    where = run(["sh", "-c", "pwd; ls -A; echo $PYTHONSAFEPATH"], timeout=30,
                untrusted=(ws,)).stdout.decode().split("\n")
    assert where[0] != str(ws) and where[1] == "" and where[2] == ""
    assert not Path(where[0]).exists()  # removed after
    there = run(["sh", "-c", "pwd; echo $PYTHONSAFEPATH"], timeout=30, untrusted=(ws,),
                cwd=ws).stdout.decode().split("\n")
    assert there[:2] == [str(ws), "1"]


def test_a_name_found_only_in_the_workspace_is_refused_in_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "ws" / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "only-here").write_text("#!/bin/sh\n")
    (bin_dir / "only-here").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    with pytest.raises(ProgramError, match=r"^only-here: not found in a system directory or a "
                                           r"PATH entry outside the workspace$"):
        resolve("only-here", (tmp_path / "ws",))


@pytest.mark.parametrize("raw", ["soon", "0", "-3", "inf", "nan"])
def test_a_bad_time_limit_is_one_line(raw: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NORMALIZE_CLONE_TIMEOUT", raw)
    with pytest.raises(ProgramError, match=r"^NORMALIZE_CLONE_TIMEOUT=.*: seconds, more than 0$"):
        time_limit("clone", 600)
    monkeypatch.delenv("NORMALIZE_CLONE_TIMEOUT")
    assert time_limit("clone", 600) == 600 and os.environ.get("NORMALIZE_CLONE_TIMEOUT") is None
