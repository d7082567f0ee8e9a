"""Every `.git` and `.normalize` stays the person's, and normalize runs only its own git.

Each case is played as the model would in `auto`, non-interactive, CI=true: a
program plants what a person's git would run (an fsmonitor, a hook, a `git`
early on PATH) and the test then uses git as the person would, checking the
marker the planted code would write outside the workspace never appears.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from sandbox_support import Site, git

FSMONITOR = "[core]\n\tfsmonitor = touch {marker}\n"


def _py(name: str, code: str) -> list[str]:
    """The model's two replies: write a script `name`, then run it with python3."""
    return [f"write {name} <<EOF\n{code}\nEOF", f"run python3 {name}"]


def _append(name: str, path: str, text: str) -> list[str]:
    return _py(name, f"open({path!r}, 'a').write({text!r})")


def _person_git_status(cwd: Path, site: Site) -> None:
    """What the person does next: `git status` with their own git and environment."""
    env = {k: v for k, v in site.env.items() if not k.startswith("GIT_")}
    subprocess.run(["git", "status", "--short"], cwd=cwd, env=env, capture_output=True,
                   check=False, timeout=60)


def _by_command(finished: list[dict[str, Any]], needle: str) -> dict[str, Any]:
    return next(r for r in finished if needle in (r.get("command") or ""))


def _refused(result: dict[str, Any], path: str) -> None:
    """The program was refused `path` at the call and told so; nothing left to undo."""
    assert path in result["data"].get("refused_writes", []), result
    assert "the sandbox refused changing" in result["preview"], result
    assert path in result["preview"].split("the sandbox refused changing", 1)[1], result
    assert "protected" not in result["data"] and "undid" not in (result["error"] or "")


def test_a_repository_created_with_an_fsmonitor_is_refused_and_reported(site: Site) -> None:
    marker = site.outside / "fsmonitor-ran"
    config = FSMONITOR.format(marker=marker)
    init = _py("init.py", "import subprocess\nsubprocess.run(['git', 'init', '-q', 'made'])\n"
                          f"open('made/.git/config', 'a').write({config!r})")
    proc, finished = site.agent([*init, "write after.txt <<EOF\nstill works\nEOF", "done"])
    assert proc.returncode == 0, proc.stderr
    result = _by_command(finished, "run python3 init.py")
    assert result["status"] == "error", result  # the open failed: git init made nothing
    _refused(result, "made/.git")
    assert not (site.ws / "made" / ".git").exists()
    assert (site.ws / "after.txt").read_text() == "still works\n"
    _person_git_status(site.ws / "made", site)
    assert not marker.exists()
    journal = (site.store / "tasks").rglob("*.jsonl")
    assert any("the sandbox refused changing made/.git" in p.read_text() for p in journal)


def test_a_repository_made_in_the_temp_dir_works_and_in_the_workspace_is_refused(
        site: Site) -> None:
    init = _py("init.py", "import os, subprocess\n"
                          "tmp = subprocess.run(['git', 'init', '-q', os.environ['TMPDIR'] + "
                          "'/kept'], capture_output=True)\n"
                          "ws = subprocess.run(['git', 'init', '-q', 'kept'], "
                          "capture_output=True)\n"
                          "print('tmp', tmp.returncode, 'ws', ws.returncode)")
    proc, finished = site.agent([*init, "done"])
    assert proc.returncode == 0, proc.stderr
    result = _by_command(finished, "run python3 init.py")
    assert "tmp 0 ws 1" in result["preview"], result  # git said it could not make .git
    _refused(result, "kept/.git")
    assert not (site.ws / "kept" / ".git").exists()


def test_a_repository_below_a_virtualenv_is_refused(site: Site) -> None:
    pkg = site.ws / ".venv" / "src" / "pkg"
    pkg.mkdir(parents=True)
    (site.ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    git(pkg, "init", "-q")
    config = pkg / ".git" / "config"
    before = config.read_bytes()
    marker = site.outside / "venv-fsmonitor-ran"
    proc, finished = site.agent([*_append("plant.py", ".venv/src/pkg/.git/config",
                                          FSMONITOR.format(marker=marker)), "done"])
    assert proc.returncode == 0, proc.stderr
    result = _by_command(finished, "run python3 plant.py")
    assert result["status"] == "error"
    _refused(result, ".venv/src/pkg/.git/config")
    assert config.read_bytes() == before
    _person_git_status(pkg, site)
    assert not marker.exists()


def test_a_hook_planted_in_an_existing_repository_is_refused(site: Site) -> None:
    dep = site.ws / "node_modules" / "dep"
    dep.mkdir(parents=True)
    git(dep, "init", "-q")
    marker = site.outside / "hook-ran"
    hook = f"#!/bin/sh\ntouch {marker}\n"
    plant = _py("plant.py", "import os\n"
                            "for d in ('node_modules/dep/.git/hooks', '.git/hooks'):\n"
                            "    try:\n"
                            f"        open(d + '/pre-commit', 'w').write({hook!r})\n"
                            "        os.chmod(d + '/pre-commit', 0o755)\n"
                            "    except OSError:\n"
                            "        pass")
    proc, finished = site.agent([*plant, "done"])
    assert proc.returncode == 0, proc.stderr
    result = _by_command(finished, "run python3 plant.py")
    assert result["status"] == "success"
    _refused(result, "node_modules/dep/.git/hooks/pre-commit")
    _refused(result, ".git/hooks/pre-commit")
    assert not (dep / ".git" / "hooks" / "pre-commit").exists()
    assert not (site.ws / ".git" / "hooks" / "pre-commit").exists()
    (dep / "f.txt").write_text("x")
    git(dep, "add", "f.txt")
    git(dep, "commit", "-qm", "person's commit")
    assert not marker.exists()


def test_a_git_planted_on_path_in_the_workspace_is_never_run(site: Site) -> None:
    marker = site.outside / "planted-git-ran"
    venv_bin = site.ws / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    fake = f"#!/bin/sh\ntouch {marker}\nexec /usr/bin/git \"$@\"\n"
    plant = _py("plant.py", "import os\n"
                            f"open('.venv/bin/git', 'w').write({fake!r})\n"
                            "os.chmod('.venv/bin/git', 0o755)")
    path = f"{venv_bin}{os.pathsep}{site.env['PATH']}"  # an activated project venv
    proc, finished = site.agent([*plant, "write calc.py <<EOF\nchanged = True\nEOF", "done"],
                                extra_env={"PATH": path})
    assert proc.returncode == 0, proc.stderr
    assert os.access(venv_bin / "git", os.X_OK)
    assert [r["status"] for r in finished] == ["success"] * 3
    assert not marker.exists()  # the run's checkpoints
    env = {**site.env, "PATH": path}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=site.ws,
                              env=env, capture_output=True, text=True, timeout=120, check=False)

    diff = cli("diff", "last")
    assert diff.returncode == 0 and "+changed = True" in diff.stdout, diff.stderr
    assert not marker.exists()
    report = cli("report", "last", "-o", str(site.root / "report.html"))
    assert report.returncode == 0 and "calc.py" in (site.root / "report.html").read_text()
    assert not marker.exists()
    undo = cli("undo", "last")
    assert undo.returncode == 0, undo.stderr
    assert "return a + b" in (site.ws / "calc.py").read_text()
    assert not marker.exists()


def test_a_repository_made_at_the_root_of_a_workspace_inside_a_larger_one_is_refused(
        site: Site) -> None:
    subprocess.run(["rm", "-rf", str(site.ws / ".git"), str(site.ws / "sub")], check=True)
    git(site.root, "init", "-q")  # the person's repository holds the workspace
    marker = site.outside / "root-fsmonitor-ran"
    config = FSMONITOR.format(marker=marker)
    init = _py("init.py", "import subprocess\nsubprocess.run(['git', 'init', '-q', '.'])\n"
                          f"open('.git/config', 'a').write({config!r})")
    proc, finished = site.agent([*init, "done"])
    assert proc.returncode == 0, proc.stderr
    result = _by_command(finished, "run python3 init.py")
    assert result["status"] == "error"
    _refused(result, ".git")
    assert not (site.ws / ".git").exists()
    _person_git_status(site.ws, site)
    _person_git_status(site.root, site)
    assert not marker.exists()
