"""A thread that a library's at-fork handler starts in the child for a moment does not cost
the program its sandbox: the child waits it out before asking for its namespaces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sandbox_support import needs_full

# In a process of its own (an at-fork handler cannot be taken back): every fork starts a
# thread in the child that ends 20 ms later, then programs are started in the full tier.
TRANSIENT = """
import os, sys, threading, time
from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock
from normalize.tools.run import _spawn
os.register_at_fork(after_in_child=lambda: threading.Thread(target=time.sleep,
                                                            args=(0.02,)).start())
workspace = sys.argv[1]
ran = 0
for _ in range(5):
    confinement = confine(SandboxPolicy(), workspace, abi=landlock.abi_version(), label="t",
                          tier=SandboxTier.FULL)
    try:
        with _spawn(["/bin/true"], workspace, confinement) as proc:
            proc.wait()
        ran += 1
    finally:
        confinement.close()
print(ran)
"""


@needs_full
def test_a_thread_ending_in_the_child_is_waited_out(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", TRANSIENT, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.split() == ["5"], done.stdout + done.stderr
