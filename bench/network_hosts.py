"""What a host list adds to starting a program: the proxy, its channel and the loopback listener.

    python bench/network_hosts.py              # 50 runs of each
    python bench/network_hosts.py --runs 200

`true` started through `run_process` in the workspace sandbox with the network
off and with `network = ["pypi.org"]` (the child brings its namespace's
loopback up, listens there and hands the listener to a proxy normalize starts
and stops), interleaved run by run so a slow moment hits both alike; the
median wall time of each and the difference. The workspace is an empty
temporary directory, so the `.git` walk is no part of either.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def measure(runs: int) -> dict[str, float]:
    from normalize.sandbox import SandboxPolicy
    from normalize.tools.run import run_process

    policies = {"off": SandboxPolicy(), "hosts": SandboxPolicy(hosts=("pypi.org",))}
    times: dict[str, list[float]] = {name: [] for name in policies}
    with tempfile.TemporaryDirectory() as workspace:
        for _ in range(runs):
            for name, policy in policies.items():
                started = time.perf_counter()
                outcome = run_process(["true"], cwd=workspace, timeout=30, sandbox=policy)
                times[name].append(time.perf_counter() - started)
                assert outcome.ok, outcome.output
    off, hosts = (statistics.median(times[name]) * 1000 for name in ("off", "hosts"))
    return {"network_off_ms": off, "host_list_ms": hosts, "added_ms": hosts - off}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    figures = measure(parser.parse_args().runs)
    print(f"`true`, median of each: network off {figures['network_off_ms']:.1f} ms, "
          f"host list {figures['host_list_ms']:.1f} ms, "
          f"added {figures['added_ms']:+.1f} ms")


if __name__ == "__main__":
    main()
