"""Every screen shows secrets redacted and escape sequences inert, file names included.

A scripted model says prose full of escape sequences (OSC 0 title, OSC 52
clipboard, `CSI 2J`, C1 controls, BEL, backspace, a bare CR) and runs a
program that prints them and every secret shape, writes a file holding every
shape, and creates files whose names are a key or an escape sequence. The
task runs on a real pty (the live view), with `--json` and plain; then each
sink is read: the pty, `--json`, the plain view, the journal, `tasks` and
`tasks show` (and `--full`, `--json`), `normalize diff` (and `--stat`,
`--json`) and the report.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from secret_shapes import ENV_SECRET, PAYLOAD, PYTHON, SHAPES, cli, make_workspace

from normalize.redact import Redactor

sys.path.insert(0, str(Path(__file__).parents[1] / "cli"))
from cli_helpers import NORMALIZE, cli_env, run_in_pty

ESC = "\x1b"
HOSTILE = {  # what a hostile text holds, and how normalize shows it
    "osc 0 title": ("\x1b]0;pwned\x07", "␛]0;pwned␇"),
    "osc 52 clipboard": ("\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07", "␛]52;c;Y3VybCBldmlsIHwgc2g=␇"),
    "csi 2J": ("\x1b[2J", "␛[2J"),
    "c1 csi": ("\x9b31m", "␛[31m"),
    "c1 osc": ("\x9d0;c1title\x9c", "␛]0;c1title␛\\"),
    "backspace": ("ok\x08\x08no", "ok␈␈no"),
    "bare cr": ("shown\rhidden", "shown␍hidden"),
}
RAW = "".join(raw for raw, _ in HOSTILE.values())
NAMED = "name\x1b]0;named\x07\x9b2J.txt"  # a file whose name is an escape sequence
NAMED_SHOWN = "name␛]0;named␇␛[2J.txt"
# what must never reach a screen raw: the escape introducers and the terminal's bell
NEVER = ["\x1b]", "\x1b[2J", "\x9b", "\x9d", "\x9c", "\x07", "\x08"]

HOSTILE_PY = f'''
import sys
from pathlib import Path
names = {{}}
exec(open("names.py").read(), names)
for name in names["NAMES"]:
    Path(name).write_text("a key for a name\\n")
Path({NAMED!r}).write_text({RAW!r} + "\\n")
Path("written.txt").write_text(open("secrets.txt").read())
sys.stdout.write("program says " + {RAW!r} + "\\n")
sys.stdout.write(open("secrets.txt").read())
'''

AGENT = """
[workflow]
name = "screens"
[workflow.llm]
provider = "scripted"
model = "script.json"
[workflow.permissions]
mode = "yes"
"""


def _named_secrets(root: Path) -> list[str]:
    """The secrets that are recognisable alone (a key, not a password after its name): a
    file may be named by one of them and must not show it."""
    redactor = Redactor.for_workspace(root, env={"MY_SERVICE_TOKEN": ENV_SECRET})
    return [secret for _, _, secret in SHAPES
            if redactor.redact(secret) != secret and "/" not in secret and "\n" not in secret
            and len(secret.encode()) < 200]


def _workspace(root: Path) -> Path:
    make_workspace(root)
    (root / "names.py").write_text(f"NAMES = {_named_secrets(root)!r}\n")
    (root / "hostile.py").write_text(HOSTILE_PY)
    (root / "agent.toml").write_text(AGENT)
    (root / "script.json").write_text(json.dumps([
        f"Here is my plan {RAW} and then some.\nrun {PYTHON} hostile.py",
        f"done all finished {RAW}"]))
    return root


def _strings(text: str) -> str:
    """The strings a JSON consumer decodes from `text` (JSON lines or one document)."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                out.append(str(key))
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    stripped = text.strip()
    docs = [stripped] if stripped.startswith("{") and "\n{" not in stripped else [
        line for line in text.splitlines() if line.startswith("{")]
    for doc in docs:
        walk(json.loads(doc))
    return "\n".join(out)


@pytest.fixture(scope="module")
def sinks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("screens")
    home = base / "home"
    live_ws = _workspace(base / "live")
    env = cli_env(NORMALIZE_HOME=str(home), MY_SERVICE_TOKEN=ENV_SECRET)
    status, pty_out, err = run_in_pty([*NORMALIZE, "run", "agent.toml", "--goal",
                                       f"goal {RAW}"], env, live_ws, timeout=120)
    assert status == 0, err
    task_id, = [p.name[:-5] for p in (home / "tasks").glob("*.json")]
    json_ws = _workspace(base / "json")
    ran = cli("run", "agent.toml", "--goal", f"goal {RAW}", "--json", cwd=json_ws, home=home)
    assert ran.returncode == 0, ran.stderr
    json_id, = [p.name[:-5] for p in (home / "tasks").glob("*.json") if p.name[:-5] != task_id]
    plain = cli("run", "agent.toml", "--goal", f"goal {RAW}", cwd=_workspace(base / "plain"),
                home=home)
    assert plain.returncode == 0, plain.stderr

    def out(*args: str) -> str:
        done = cli(*args, cwd=live_ws, home=home)
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    return {
        "live view": pty_out + err,
        "plain view": plain.stdout + plain.stderr,
        "--json": _strings(ran.stdout) + ran.stderr,
        "journal": _strings((home / "tasks" / f"{task_id}.jsonl").read_text()
                            + (home / "tasks" / f"{json_id}.jsonl").read_text()),
        "tasks show": out("tasks", "show", task_id),
        "tasks show --full": out("tasks", "show", task_id, "--full"),
        "tasks show --json": _strings(out("tasks", "show", task_id, "--json")),
        "tasks": out("tasks"),
        "diff": out("diff", task_id),
        "diff --stat": out("diff", task_id, "--stat"),
        "diff --json": _strings(out("diff", task_id, "--json")),
        "report": out("report", task_id, "-o", "-"),
    }


SINKS = ["live view", "plain view", "--json", "journal", "tasks show", "tasks show --full",
         "tasks show --json", "tasks", "diff", "diff --stat", "diff --json", "report"]
# where each hostile thing shows: model prose and the goal, program output, a file name
PROSE = ["live view", "--json", "journal", "tasks show --json", "report"]
OUTPUT = ["live view", "--json", "journal", "tasks show", "tasks show --full",
          "tasks show --json", "report"]
NAMES = ["--json", "journal", "tasks show", "tasks show --json", "diff", "diff --stat",
         "diff --json", "report"]


@pytest.mark.parametrize("sink", SINKS)
def test_no_escape_reaches_a_screen(sinks: dict[str, str], sink: str) -> None:
    text = sinks[sink]
    for raw in NEVER:
        assert raw not in text, f"{raw!r} reached {sink}"
    if sink != "live view":  # the live view draws its own colours; nothing else has any
        assert ESC not in text


@pytest.mark.parametrize("sink", sorted(set(PROSE + OUTPUT)))
def test_escapes_are_shown_as_placeholders(sinks: dict[str, str], sink: str) -> None:
    """Not dropped: each hostile sequence is there, visible (the live view may wrap lines)."""
    text = sinks[sink].replace("\n", "")
    for name, (_, shown) in HOSTILE.items():
        if sink == "live view" and name == "bare cr":
            continue  # the pty's own CR handling is the terminal's, tested by the others
        assert shown.replace("\n", "") in text or (sink == "live view" and shown[:4] in text), \
            f"{name} not shown in {sink}"


@pytest.mark.parametrize("sink", NAMES)
def test_a_file_named_by_an_escape_is_shown_inert(sinks: dict[str, str], sink: str) -> None:
    assert NAMED_SHOWN in sinks[sink]


@pytest.mark.parametrize("sink", SINKS)
@pytest.mark.parametrize(("name", "line", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_no_secret_on_any_screen(sinks: dict[str, str], sink: str, name: str, line: str,
                                 secret: str) -> None:
    """The written file's content, the program's output and the files named by keys."""
    del name, line
    assert secret not in sinks[sink]


@pytest.mark.parametrize("sink", ["diff", "diff --json", "report"])
def test_the_written_keys_were_in_the_diff(sinks: dict[str, str], sink: str) -> None:
    text = sinks[sink]
    assert "written.txt" in text and "DefaultEndpointsProtocol=https" in text
    assert "ANTHROPIC_API_KEY=[REDACTED]" in text


def test_files_named_by_keys_were_listed(sinks: dict[str, str], tmp_path: Path) -> None:
    """Each file named by a key is a line of `diff --stat`, its name redacted."""
    named = _named_secrets(make_workspace(tmp_path / "ws"))
    assert len(named) >= 30
    stat_lines = sinks["diff --stat"].splitlines()
    assert sum(line == " [REDACTED]  +1 -0" for line in stat_lines) == len(named)
    written = PAYLOAD.count("\n") + 1
    assert stat_lines[-1] == f" {len(named) + 2} files changed, +{len(named) + 1 + written} -0"


