"""What tracing a program's writes costs: N opens for writing, with and without the tracer.

    python bench/write_trace.py              # 20,000 opens of /dev/null for writing, 3 rounds
    python bench/write_trace.py --opens 5000 --rounds 5

The program opens `/dev/null` for writing in a loop (no disk in the figure),
so the difference is the round trip of each call through the seccomp
listener to normalize's thread and back (`normalize.sandbox.writes`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from normalize.sandbox.writes import Tracer, supported


def once(opens: int, traced: bool) -> float:
    code = f"for _ in range({opens}):\n    open('/dev/null', 'w').close()"
    tracer = Tracer() if traced else None
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code],
                            preexec_fn=tracer.preexec if tracer else None)
    if tracer is not None:
        tracer.start()
    proc.wait()
    if tracer is not None:
        tracer.stop()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--opens", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if not supported():
        sys.exit("write tracing is not supported here (Linux x86_64/aarch64 only)")
    plain = [once(args.opens, False) for _ in range(args.rounds)]
    traced = [once(args.opens, True) for _ in range(args.rounds)]
    extra = (statistics.median(traced) - statistics.median(plain)) / args.opens
    rows = [("opens for writing", f"{args.opens:,}"),
            ("untraced: median", f"{statistics.median(plain):.2f} s"),
            ("traced: median", f"{statistics.median(traced):.2f} s"),
            ("cost per traced open", f"{extra * 1e6:.0f} µs"),
            (f"(cpus: {os.cpu_count()}, load: {os.getloadavg()[0]:.1f})", "")]
    for name, value in rows:
        print(f"{name:<40}{value:>12}")


if __name__ == "__main__":
    main()
