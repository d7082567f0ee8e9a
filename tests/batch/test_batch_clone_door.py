"""A batch's `clone:` workspaces start git through normalize's door for programs, played as
a model (or an item list) would misbehave: a `git` planted in the workspace and first on PATH
never runs, a transport such as `fd::3` is refused at once, and a clone whose remote never
answers holds only its own item, until its time limit."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

from batch_support import (
    VENV_BIN,
    WORKFLOW,
    batch_id,
    cli,
    items_file,
    needs_sandbox,
    progress,
    repos,
    start,
    state,
    wait_for,
)

pytestmark = needs_sandbox

CLONE_WORKFLOW = WORKFLOW.replace('"dir:{item.path}"', '"clone:{item.repo}"')
PLANTED = "#!/bin/sh\necho planted >> {marker}\nexec /usr/bin/git \"$@\"\n"


def test_a_batch_clone_never_runs_a_git_planted_in_the_workspace(tmp_path: Path) -> None:
    made = repos(tmp_path, 2)
    marker = tmp_path / "planted-ran"
    planted = tmp_path / ".venv" / "bin"
    planted.mkdir(parents=True)
    (planted / "git").write_text(PLANTED.format(marker=marker))
    (planted / "git").chmod(0o755)
    (tmp_path / "clone.toml").write_text(CLONE_WORKFLOW)
    rows = [{"repo": str(repo.relative_to(tmp_path)), "word": f"w{n}", "gate": ""}
            for n, repo in enumerate(made)]
    home = tmp_path / "home"
    done = cli("batch", "clone.toml", "--items", str(items_file(tmp_path / "i.jsonl", rows)),
               cwd=tmp_path, home=home,
               PATH=os.pathsep.join([str(planted), VENV_BIN, os.environ.get("PATH", "")]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists(), "the batch ran the git planted in its workspace"
    for row in progress(home, batch_id(done.stdout)):  # a relative path: beside the batch
        clone = Path(state(home, row["task_id"])["workspace"])
        assert (clone / ".git").is_dir() and (clone / "effects.log").exists()


class Silent:
    """A TCP server that takes connections and never answers: a remote that hangs."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.open: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.server.accept()
        self.open.append(conn)
        conn.recv(65536)
        while conn.recv(65536):  # until git is killed (its end of the connection closes)
            pass
        self.closed.set()

    def holding(self) -> bool:
        return bool(self.open) and not self.closed.is_set()

    def close(self) -> None:
        for conn in self.open:
            conn.close()
        self.server.close()


def test_a_stalling_clone_never_delays_the_other_items(tmp_path: Path) -> None:
    made = repos(tmp_path, 2)
    silent = Silent()
    limit = 40
    (tmp_path / "clone.toml").write_text(CLONE_WORKFLOW)
    ran = tmp_path / "ext-ran"
    rows = [{"repo": f"http://127.0.0.1:{silent.port}/stall.git", "word": "s", "gate": ""},
            {"repo": "fd::3", "word": "f", "gate": ""},
            {"repo": f"ext::sh -c touch% {ran}", "word": "e", "gate": ""},
            *({"repo": str(repo), "word": f"w{n}", "gate": ""} for n, repo in enumerate(made))]
    home = tmp_path / "home"
    began = time.monotonic()
    batch = start("batch", "clone.toml", "--items", str(items_file(tmp_path / "i.jsonl", rows)),
                  cwd=tmp_path, home=home, NORMALIZE_CLONE_TIMEOUT=str(limit))
    try:
        wait_for(lambda: any((home / "batches").glob("*/manifest.json")),
                 what="the batch's manifest")
        where = next((home / "batches").glob("*/manifest.json")).parent.name
        wait_for(lambda: [r["stage"] for r in progress(home, where)][1:] == ["collected"] * 4,
                 timeout=limit, what="the four other items collected")
        others = time.monotonic() - began
        assert silent.holding(), "the stalling clone ended before the others were collected"
        out, err = batch.communicate(timeout=limit + 60)
    finally:
        if batch.poll() is None:
            batch.kill()
            batch.wait()
        silent.close()
    ended = time.monotonic() - began
    assert others < limit / 2 < ended, (others, ended)
    assert silent.closed.is_set(), "the stalled git outlived its time limit"
    rows_done = progress(home, where)
    notes = [r.get("note", "") for r in rows_done[:3]]
    assert f"no answer in {limit} s" in notes[0] and "\n" not in notes[0], notes
    assert "transport 'fd' not allowed" in notes[1], notes
    assert "transport 'ext' not allowed" in notes[2] and not ran.exists(), notes
    statuses = [state(home, r["task_id"])["status"] for r in rows_done[3:]]
    assert statuses == ["done", "done"], out + err
    assert batch.returncode != 0
    print(json.dumps({"others_s": round(others, 1), "batch_s": round(ended, 1)}))
