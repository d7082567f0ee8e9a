"""The write tracer names what a program and its children wrote, and nothing it only read."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from normalize.sandbox.writes import Tracer, supported

pytestmark = pytest.mark.skipif(not supported(), reason="seccomp write tracing is Linux-only "
                                "(x86_64, aarch64)")

WRITER = """
import os, subprocess, sys
open('read.txt').read()
open('made.txt', 'w').write('x')
os.mkdir('d')
os.rename('made.txt', 'd/moved.txt')
os.symlink('d', 'link')
os.link('d/moved.txt', 'hard.txt')
os.unlink('gone.txt')
fd = os.open('d', os.O_RDONLY)
open('appended.txt', 'a').write('x')
os.close(os.open('byfd.txt', os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd))
subprocess.run([sys.executable, '-c', "open('child.txt', 'w').write('x')"], check=True)
open('link/through.txt', 'w').write('x')
"""


def traced(code: str, cwd: Path) -> tuple[int, set[str], bool]:
    tracer = Tracer()
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=cwd, preexec_fn=tracer.preexec)
    tracer.start()
    status = proc.wait(60)
    paths = tracer.stop()
    return status, paths, tracer.usable


def test_each_kind_of_write_is_named_and_a_read_is_not(tmp_path: Path) -> None:
    for name in ("read.txt", "gone.txt", "appended.txt"):
        (tmp_path / name).write_text("x")
    status, paths, usable = traced(WRITER, tmp_path)
    assert status == 0 and usable
    names = {str(Path(p).relative_to(tmp_path)) for p in paths if p.startswith(str(tmp_path))}
    assert names == {"made.txt", "d", "d/moved.txt", "link", "hard.txt", "gone.txt",
                     "appended.txt", "d/byfd.txt", "child.txt", "link/through.txt",
                     "d/through.txt"}


def test_a_program_already_traced_runs_untraced_rather_than_failing(tmp_path: Path) -> None:
    inner = ("import subprocess, sys\nfrom normalize.sandbox.writes import Tracer\n"
             "t = Tracer()\np = subprocess.Popen([sys.executable, '-c', "
             "\"open('inner.txt', 'w').write('x')\"], preexec_fn=t.preexec)\nt.start()\n"
             "p.wait()\nt.stop()\nprint(t.usable)\nsys.exit(p.returncode)")
    script = tmp_path / "inner.py"
    script.write_text(inner)
    status, paths, usable = traced(f"exec(open({str(script)!r}).read())", tmp_path)
    assert status == 0 and usable
    assert (tmp_path / "inner.txt").read_text() == "x"
    assert str(tmp_path / "inner.txt") in paths  # the outer tracer saw the nested write
