"""The `normalize` console script: a Ctrl-C from its first instant ends it quietly.

Importing this module points SIGINT at a handler that leaves at once with 130
(nothing has been done yet that needs undoing), before anything heavy loads;
once the app is imported, Python's own handling is back for the commands (a run
installs its own), and a Ctrl-C while the process exits is ignored. Only `_signal`
is imported first: `signal` builds its enums, a window a Ctrl-C could fall in.

When the command is over, every object is frozen (`gc.freeze`): the interpreter's
last full collection at exit walks all of them (the modules, classes and tasks a
run loaded) only to find what the OS frees anyway, 15–25 ms of every command.
Frozen objects are still freed by reference counting; cycles are left to the
exit, which is where they were going.
"""

import _signal  # type: ignore[import-not-found]  # (no stubs: the C half of `signal`)
import gc
import os
import sys

INTERRUPTED = 130  # ExitStatus.INTERRUPTED, without importing it


def _quit(signum: int, frame: object) -> None:
    """Ctrl-C while starting: nothing to save yet, so leave at once."""
    del signum, frame
    os._exit(INTERRUPTED)


_signal.signal(_signal.SIGINT, _quit)


def main() -> int:
    """Import the app, give SIGINT back to Python, run the command."""
    try:
        from normalize.cli.app import main as run_app

        _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        return run_app(sys.argv[1:])
    except KeyboardInterrupt:
        return INTERRUPTED
    finally:
        _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # leaving: flush and exit in peace
        gc.freeze()  # nothing left to collect that the exit does not free (see above)


if __name__ == "__main__":
    sys.exit(main())
