"""What a program normalize starts may touch, and the kernel mechanism that enforces it.

`SandboxPolicy` is plain data (it travels in `ToolContext`). `probe()` says
which tier this machine gives (`full`, `landlock` or none) and what it
enforces; `confine()` prepares one child process (its scrubbed environment,
temporary directory and the function run before exec; with a host list, the
proxy it reaches the network through: `proxy`).
`refuse` fails a run closed before it starts (no sandbox and no one to ask).
The standard library and core (`faults`; `errors` and `homes` for `refuse`):
this is core, below tools.
"""

from __future__ import annotations

from normalize.sandbox.confine import CREDENTIAL_STORES, Confinement, confine, protected_paths
from normalize.sandbox.env import is_secret_name, scrub_env
from normalize.sandbox.policy import SandboxMode, SandboxPolicy, SandboxTier
from normalize.sandbox.probe import Probe, probe

__all__ = [
    "CREDENTIAL_STORES", "Confinement", "Probe", "SandboxMode", "SandboxPolicy", "SandboxTier",
    "confine",
    "is_secret_name", "probe", "protected_paths", "scrub_env",
]
