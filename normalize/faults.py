"""Named crash points for the fault-injection tests.

`NORMALIZE_CRASH_AT=name` makes the process kill itself with SIGKILL when it
reaches `crash_point("name")`, simulating a power cut at that exact place;
`NORMALIZE_CRASH_AT=name@N` waits for the N-th time the point is reached.
The variable is read once, at import; in normal use the check is one comparison.

The points:

    before_action      an action is about to be recorded as started
    action_started     a side effect is journaled (fsynced) as started, not yet run
    action_ran         the action ran; its end is not yet journaled
    action_finished    an action's end is journaled; the driver has not seen it, nothing saved
    checkpoint_write   half of a task file is written to its temporary file
    checkpoint_append  half of a checkpoint record is appended to the task's checkpoint log
    kept_write         half of a value kept beside the checkpoints (a loop's items, a large
                       variable a step set) is written to its temporary file
    model_stream       a model reply is half streamed (scripted models)
    undo_write         half of a file an undo or rewind puts back is written to its temporary file
    batch_collected    a batch's parent has recorded an item as collected
    merge_intent       a child's merge journaled what it will write, nothing staged yet
    merge_stage        half of one new content of a child's merge is staged beside its target
    merge_staged       a child's merge is staged whole and journaled so; nothing renamed yet
    merge_rename       one removal or rename of a child's merge is done

`NORMALIZE_NO_SANDBOX=1` makes the sandbox report itself unavailable, so the
fail-closed paths can be tested on a machine that has one. It is read at each
check (a test may set it in its own process).
"""

from __future__ import annotations

import os
import signal
import threading

POINTS = ("before_action", "action_started", "action_ran", "action_finished",
          "checkpoint_write", "checkpoint_append", "kept_write", "model_stream", "undo_write",
          "batch_collected", "merge_intent", "merge_stage", "merge_staged", "merge_rename")


def _parse(value: str) -> tuple[str, int]:
    name, _, nth = value.partition("@")
    try:
        return name, max(1, int(nth)) if nth else 1
    except ValueError:
        return name, 1


_ARMED, _NTH = _parse(os.environ.get("NORMALIZE_CRASH_AT", ""))
_hits = 0
_lock = threading.Lock()


def rearm() -> None:
    """Read `NORMALIZE_CRASH_AT` again (a warm worker's child has its job's environment)."""
    global _ARMED, _NTH, _hits
    _ARMED, _NTH = _parse(os.environ.get("NORMALIZE_CRASH_AT", ""))
    _hits = 0


def crash_point(name: str) -> None:
    """Die here, at once and uncleanly, when the tests armed this point."""
    global _hits
    if not _ARMED or _ARMED != name:
        return
    with _lock:
        _hits += 1
        if _hits >= _NTH:
            os.kill(os.getpid(), signal.SIGKILL)


def armed(name: str) -> bool:
    """True when the tests armed the crash point `name` (a writer may then split its write)."""
    return _ARMED == name


def sandbox_disabled() -> bool:
    """True when the tests made the sandbox unavailable (`NORMALIZE_NO_SANDBOX=1`)."""
    return os.environ.get("NORMALIZE_NO_SANDBOX", "") not in ("", "0")
