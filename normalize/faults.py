"""Named crash points for the fault-injection tests.

`NORMALIZE_CRASH_AT=name` makes the process kill itself with SIGKILL when it
reaches `crash_point("name")`, simulating a power cut at that exact place.
The variable is read once; in normal use the check is a single comparison.
"""

from __future__ import annotations

import os
import signal

_ARMED = os.environ.get("NORMALIZE_CRASH_AT", "")


def crash_point(name: str) -> None:
    """Die here, at once and uncleanly, when the tests armed this point."""
    if _ARMED and _ARMED == name:
        os.kill(os.getpid(), signal.SIGKILL)
