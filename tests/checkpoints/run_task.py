"""One scripted task in a process of its own: `python run_task.py WORKSPACE SCRIPT.json`.

A reply is a string, or `{"mark": PATH, "wait": PATH, "reply": TEXT}`: the model
creates `mark`, waits for `wait` to exist (a deadline, never a fixed sleep), then
answers `reply` — a pause between two actions that the test controls. The task
id is printed on stdout. NORMALIZE_HOME comes from the environment.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkpoint_helpers import run_scripted

from normalize.providers.base import ModelRequest

DEADLINE = 60.0


def paused(item: dict[str, str]) -> Callable[[ModelRequest], str]:
    def step(_request: ModelRequest) -> str:
        Path(item["mark"]).write_text("")
        end = time.monotonic() + DEADLINE
        while not Path(item["wait"]).exists():
            if time.monotonic() > end:
                raise TimeoutError(item["wait"])
            time.sleep(0.01)
        return item["reply"]
    return step


def main() -> None:
    workspace, script = Path(sys.argv[1]), Path(sys.argv[2])
    replies: list[Any] = [r if isinstance(r, str) else paused(r)
                          for r in json.loads(script.read_text())]
    done = run_scripted(workspace, Path(os.environ["NORMALIZE_HOME"]), *replies)
    assert done.outcome.status.value == "done", done.outcome.error
    print(done.task_id)


if __name__ == "__main__":
    main()
