"""`normalize report`: one self-contained HTML file that shows the task and escapes everything."""

from __future__ import annotations

import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from checkpoint_helpers import Done, cli, edit, program, run_scripted

INJECTED = "</script><script>alert(1)</script>"


class Page(HTMLParser):
    """The tags, attributes and text of a document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.fixture
def task(tmp_path: Path, normalize_home: Path) -> tuple[Done, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "calc.py").write_text("x = 1\n")
    done = run_scripted(
        ws, normalize_home,
        edit("calc.py", "x = 1", "x = 2"),
        f"Writing a tricky page.\nwrite evil.html <<EOF\n{INJECTED}\nEOF",
        program("import sys; [print('line', n) for n in range(40)]; sys.exit(3)"),
        "done wrote <b>bold</b> things")
    return done, ws


def report(done: Done, ws: Path, home: Path, tmp_path: Path) -> tuple[str, Path]:
    out = tmp_path / "report.html"
    proc = cli("report", done.task_id, "-o", str(out), cwd=ws, home=home)
    assert proc.returncode == 0, proc.stderr
    return out.read_text(encoding="utf-8"), out


def test_the_report_shows_steps_diffs_and_escapes_everything(
        task: tuple[Done, Path], normalize_home: Path, tmp_path: Path) -> None:
    done, ws = task
    html, _ = report(done, ws, normalize_home, tmp_path)
    page = Page()
    page.feed(html)
    text = "".join(page.text)
    assert "script" not in page.tags and "<script" not in html.lower()
    assert "http://" not in html and "https://" not in html
    assert not [value for name, value in page.attrs if name in ("src", "href") and value
                and not value.startswith("#")]
    assert INJECTED in text  # shown as text …
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html  # … because escaped
    assert "wrote <b>bold</b> things" in text and "b" not in page.tags
    for turn in range(4):
        assert f"Turn {turn}" in text
    assert "-x = 1" in text and "+x = 2" in text  # the diff of step 1
    assert "+++ b/evil.html" in text
    assert "Errors first" in text and text.index("Errors first") < text.index("Turn 0")
    assert "exit 3" in text
    assert "details" in page.tags and "line 18" in text  # the long output, folded
    assert "How it ended" in text and "Files changed" in text


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or \
    (shutil.which("/usr/bin/chromium"))


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (.ci/run installs it)")
def test_the_report_in_headless_chromium(task: tuple[Done, Path], normalize_home: Path,
                                         tmp_path: Path) -> None:
    done, ws = task
    _, path = report(done, ws, normalize_home, tmp_path)
    assert CHROMIUM is not None
    profile = tmp_path / "profile"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", f"--user-data-dir={profile}",
         "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert "<body" in dom, proc.stderr[-2000:]
    assert "<script" not in dom  # nothing was injected into the document
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in dom  # a text node
    page = Page()
    page.feed(dom)
    text = "".join(page.text)
    assert "Turn 1" in text and "+x = 2" in text and INJECTED in text


def test_the_report_redacts_secrets_in_diffs_and_the_goal(tmp_path: Path,
                                                         normalize_home: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    secret = "sk-ant-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    done = run_scripted(ws, normalize_home, f"write settings.py <<EOF\nKEY = '{secret}'\nEOF",
                        "done")
    html, _ = report(done, ws, normalize_home, tmp_path)
    assert "+++ b/settings.py" in html
    assert secret not in html
