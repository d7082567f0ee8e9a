"""`normalize acp` with a client that reads files: the task's `view` shows the editor's buffer.

The agent runs as a subprocess (`normalize acp --model scripted:FILE`), driven by the SDK's
client side; the client offers `fs.readTextFile` and answers with an unsaved buffer for
calc.py that differs from the disk. The model sees the buffer (told it is unsaved), while
its edit, the checkpoint after it and the disk keep to the file on disk.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any, cast

from acp import PROTOCOL_VERSION, Client, RequestError, spawn_agent_process, text_block
from acp.schema import (
    ClientCapabilities,
    FileSystemCapabilities,
    ReadTextFileResponse,
    ToolCallProgress,
)
from acp_support import AGENT, Editor, agent_env

from normalize.store import TaskStore

DISK = "def mean(xs):\n    return sum(xs) / 0\n"
BUFFER = "def mean(xs):\n    return sum(xs) / len(xs)  # typed, not saved\n"
EDITED = "def mean(xs):\n    return sum(xs) / max(len(xs), 1)\n"
EDIT = """edit calc.py <<EOF
<<<<<<< SEARCH
    return sum(xs) / 0
=======
    return sum(xs) / max(len(xs), 1)
>>>>>>> REPLACE
EOF"""
SCRIPT = ["view calc.py", "view notes.txt", "view missing.txt", EDIT, "done Read and fixed."]


class EditorWithBuffers(Editor):
    """An editor with calc.py open and changed but not saved; other files as on disk; one it
    cannot read (an error: normalize reads the disk)."""

    def __init__(self, root: Path) -> None:
        super().__init__([])
        self.root = root
        self.read: list[str] = []

    async def read_text_file(self, path: str, session_id: str, line: int | None = None,
                             limit: int | None = None, **_: Any) -> ReadTextFileResponse:
        self.read.append(path)
        if path == str(self.root / "calc.py"):
            return ReadTextFileResponse(content=BUFFER)
        if path == str(self.root / "notes.txt"):
            return ReadTextFileResponse(content=(self.root / "notes.txt").read_text())
        raise RequestError(-32002, f"cannot read {path}")


def test_view_shows_the_editors_unsaved_buffer_and_the_disk_stays_the_source(
        tmp_path: Path, normalize_home: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "calc.py").write_text(DISK)
    (root / "notes.txt").write_text("saved\n")
    (root / "missing.txt").write_text("on disk only\n")
    script = tmp_path / "model.json"
    script.write_text(json.dumps(SCRIPT))
    editor = EditorWithBuffers(root)

    async def session() -> str:
        async with spawn_agent_process(cast(Client, editor), sys.executable, *AGENT, "--model",
                                       f"scripted:{script}", env=agent_env(normalize_home),
                                       cwd=root) as (conn, _):
            await conn.initialize(protocol_version=PROTOCOL_VERSION,
                                  client_capabilities=ClientCapabilities(
                                      fs=FileSystemCapabilities(read_text_file=True)))
            made = await conn.new_session(cwd=str(root), mcp_servers=[])
            answer = await asyncio.wait_for(conn.prompt(session_id=made.session_id,
                                                        prompt=[text_block("fix mean")]), 60)
            assert answer.stop_reason == "end_turn"
            return made.session_id

    task_id = asyncio.run(session())
    assert editor.read == [str(root / name) for name in ("calc.py", "notes.txt", "missing.txt")]
    store = TaskStore()
    views = [e for e in store.events(task_id)
             if e["type"] == "action_finished" and e["tool"] == "view"]
    calc, notes, missing = (e["preview"] for e in views)
    assert "len(xs)  # typed, not saved" in calc and "/ 0" not in calc
    assert "unsaved buffer of calc.py" in calc and "file on disk" in calc
    assert "saved" in notes and "unsaved" not in notes  # the same as the disk: nothing said
    assert "on disk only" in missing and "unsaved" not in missing  # the client said no
    # the editor's view too: the view's update carries the buffer
    shown = [str(u.content) for u in editor.updates if isinstance(u, ToolCallProgress)]
    assert any("typed, not saved" in text for text in shown)
    # the disk is the source of edits and checkpoints: the edit matched the disk's text
    assert (root / "calc.py").read_text() == EDITED
    steps = [e for e in store.events(task_id)
             if e["type"] == "checkpoint_taken" and e["kind"] == "action"]
    assert [sorted(e["changes"]) for e in steps] == [["calc.py"]]
    assert store.load(task_id).status.value == "done"
