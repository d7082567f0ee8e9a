"""The example driver package in docs/ installed into a fresh virtual environment and run.

pip builds nothing offline without a build backend (hatchling is not installed
here), so the test builds the wheel itself from the example's pyproject.toml
(its files, name, version and entry points) and lets pip install that wheel
with `--no-index`: the registration pip writes is the one a user gets.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "example-plugin"


def build_wheel(project: Path, out: Path) -> Path:
    """A wheel of `project` (a pure-Python package listed in hatch's `packages`)."""
    meta = tomllib.loads((project / "pyproject.toml").read_text())
    name, version = meta["project"]["name"], meta["project"]["version"]
    stem = f"{name.replace('-', '_')}-{version}"
    files: dict[str, bytes] = {}
    for package in meta["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"]:
        for path in sorted((project / package).rglob("*.py")):
            files[path.relative_to(project).as_posix()] = path.read_bytes()
    info = f"{stem}.dist-info"
    files[f"{info}/METADATA"] = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                                 ).encode()
    files[f"{info}/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: normalize-tests\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    entry_points = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items())
                           + "\n" for group, eps in meta["project"]["entry-points"].items())
    files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = []
    for arcname, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{arcname},sha256={digest},{len(data)}")
    files[f"{info}/RECORD"] = ("\n".join([*record, f"{info}/RECORD,,"]) + "\n").encode()
    wheel = out / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for arcname, data in files.items():
            archive.writestr(arcname, data)
    return wheel


def make_venv(root: Path) -> Path:
    """A fresh virtual environment that also sees this one's packages (normalize, its deps)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True,
                   timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; "
                              "print(sysconfig.get_paths()['purelib'])"], check=True,
                             capture_output=True, text=True, timeout=60).stdout.strip()
    ours = {sysconfig.get_paths()["purelib"], str(REPO)}
    (Path(purelib) / "_outer_environment.pth").write_text("\n".join(sorted(ours)) + "\n")
    return python


def pip_install(python: Path, wheel: Path) -> None:
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1"}
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-index", "--no-deps",
                           "--no-build-isolation", "-q", str(wheel)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the example plugin pip-installed, plus a broken plugin beside it."""
    root = tmp_path_factory.mktemp("plugin-venv")
    python = make_venv(root / "venv")
    pip_install(python, build_wheel(EXAMPLE, root))
    broken = root / "broken-site"
    dist = broken / "brokenplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[normalize.drivers]\nbroken = brokenplug_missing_module:Driver\n")
    purelib = next((root / "venv" / "lib").glob("python*/site-packages"))
    (purelib / "zz_broken.pth").write_text(f"{broken}\n")
    return python


def normalize(python: Path, *args: str, cwd: Path, home: Path
              ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NORMALIZE_HOME": str(home)}
    return subprocess.run([str(python), "-m", "normalize.cli.app", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def events(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def finished(out: list[dict[str, Any]]) -> list[str]:
    return [e["command"] for e in out if e["type"] == "action_finished"]


ITEMS = ["view README.txt", "grep TODO .", "note checked the TODOs"]


def workspace(root: Path) -> Path:
    root.mkdir()
    (root / "README.txt").write_text("a project\n")
    (root / "app.py").write_text("# TODO: everything\n")
    return root


def test_the_example_runs_stops_and_resumes_with_its_state(venv: Path, tmp_path: Path,
                                                           normalize_home: Path) -> None:
    ws = workspace(tmp_path / "ws")
    wf = ws / "check.toml"
    wf.write_text('[workflow]\nname = "check"\ndriver = "checklist"\n[workflow.vars]\n'
                  f"checklist = {json.dumps(ITEMS)}\nreport = \"REPORT.md\"\n")
    first = normalize(venv, "run", str(wf), "--max-turns", "2", "--json", cwd=ws,
                      home=normalize_home)
    out = events(first.stdout)
    assert first.returncode != 0 and out[-1]["status"] == "limit_reached", first.stderr
    assert out[0]["driver"] == "checklist" and finished(out) == ITEMS[:2]
    task_id = out[0]["task_id"]
    second = normalize(venv, "resume", task_id, "--driver", "checklist", "--max-turns", "5",
                       "--json", cwd=ws, home=normalize_home)
    out = events(second.stdout)
    assert second.returncode == 0, second.stderr
    assert finished(out) == [ITEMS[2], "write REPORT.md"]  # restored: nothing ran twice
    assert out[-1]["status"] == "done" and "all 3 items passed" in out[-1]["summary"]
    assert (ws / "REPORT.md").read_text() == "".join(f"- [x] {item}\n" for item in ITEMS)


def test_the_example_takes_a_task_over_from_a_built_in_driver(venv: Path, tmp_path: Path,
                                                              normalize_home: Path) -> None:
    ws = workspace(tmp_path / "ws")
    wf = ws / "steps.toml"
    wf.write_text('[workflow]\nname = "steps"\n[workflow.vars]\n'
                  f"checklist = {json.dumps(ITEMS)}\n"
                  + "".join(f'[[steps]]\naction = "{item}"\n' for item in ITEMS[:2]))
    first = normalize(venv, "run", str(wf), "--max-turns", "1", "--json", cwd=ws,
                      home=normalize_home)
    out = events(first.stdout)
    assert out[0]["driver"] == "workflow" and finished(out) == ITEMS[:1], first.stderr
    second = normalize(venv, "resume", out[0]["task_id"], "--driver", "checklist",
                       "--max-turns", "5", "--json", cwd=ws, home=normalize_home)
    out = events(second.stdout)
    assert second.returncode == 0, second.stderr
    notices = [e["message"] for e in out if e["type"] == "notice"]
    assert any("the checklist driver takes over this task from workflow" in n for n in notices)
    assert finished(out) == [*ITEMS[1:], "write CHECKLIST.md"]  # adopt(): item 1 was done
    assert (ws / "CHECKLIST.md").read_text().count("- [x]") == 3


def test_a_bad_checklist_is_one_line_naming_the_item(venv: Path, tmp_path: Path,
                                                     normalize_home: Path) -> None:
    ws = workspace(tmp_path / "ws")
    wf = ws / "bad.toml"
    wf.write_text('[workflow]\nname = "bad"\ndriver = "checklist"\n[workflow.vars]\n'
                  'checklist = ["view README.txt", "frobnicate it"]\n')
    proc = normalize(venv, "run", str(wf), cwd=ws, home=normalize_home)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "normalize: error: checklist item 'frobnicate it': not a command: `frobnicate`")


def test_driver_help_and_a_broken_plugin_are_named(venv: Path, tmp_path: Path,
                                                   normalize_home: Path) -> None:
    ws = workspace(tmp_path / "ws")
    helped = normalize(venv, "resume", "--help", cwd=ws, home=normalize_home)
    assert helped.returncode == 0, helped.stderr
    flat = " ".join(helped.stdout.split())
    assert "Continue with another driver:" in flat
    assert all(name in flat for name in ("checklist,", "broken,", "llm,", "workflow."))
    wf = ws / "check.toml"
    wf.write_text('[workflow]\nname = "check"\ndriver = "checklist"\n[workflow.vars]\n'
                  'checklist = ["view README.txt"]\n')
    first = normalize(venv, "run", str(wf), "--max-turns", "1", "--json", cwd=ws,
                      home=normalize_home)
    task_id = events(first.stdout)[0]["task_id"]
    proc = normalize(venv, "resume", task_id, "--driver", "broken", cwd=ws, home=normalize_home)
    assert proc.returncode == 2
    line = proc.stderr.strip().splitlines()[-1]
    assert "unknown driver 'broken'" in line
    assert ("brokenplug_missing_module:Driver (plugin:brokenplug) failed to load: "
            "ModuleNotFoundError: No module named 'brokenplug_missing_module'") in line
