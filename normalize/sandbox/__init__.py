"""What a program normalize starts may touch, and the kernel mechanism that enforces it.

`SandboxPolicy` is plain data (it travels in `ToolContext`). `probe()` says
which tier this machine gives (`full`, `landlock` or none) and what it
enforces; `confine()` prepares one child process (its scrubbed environment,
temporary directory and the function run before exec; with a host list, the
proxy it reaches the network through: `proxy`).
`refuse` fails a run closed before it starts (no sandbox and no one to ask).
The standard library and core (`faults`; `errors` and `homes` for `refuse`):
this is core, below tools.

The package loads its names lazily: the policy is plain data wanted at every
start, the mechanism (ctypes, seccomp programs, the proxy) only where a
program starts, so `from normalize.sandbox import SandboxPolicy` (or a light
module such as `hosts`) does not load it. The mechanism's modules are named
apart from the functions they export (`tiers` gives `probe`, `confinement`
gives `confine`): importing a submodule sets the package attribute of its
name, which would otherwise hide the function.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from normalize.sandbox.confinement import Confinement, confine, protected_paths
    from normalize.sandbox.credentials import CREDENTIAL_STORES
    from normalize.sandbox.env import carries_secret, is_secret_name, scrub_env
    from normalize.sandbox.policy import SandboxMode, SandboxPolicy, SandboxTier
    from normalize.sandbox.tiers import Probe, probe

_FROM = {
    "CREDENTIAL_STORES": "credentials", "Confinement": "confinement", "confine": "confinement",
    "protected_paths": "confinement", "carries_secret": "env", "is_secret_name": "env",
    "scrub_env": "env",
    "SandboxMode": "policy", "SandboxPolicy": "policy", "SandboxTier": "policy",
    "Probe": "tiers", "probe": "tiers",
}

__all__ = [
    "CREDENTIAL_STORES", "Confinement", "Probe", "SandboxMode", "SandboxPolicy", "SandboxTier",
    "carries_secret", "confine",
    "is_secret_name", "probe", "protected_paths", "scrub_env",
]


def __getattr__(name: str) -> Any:
    module = _FROM.get(name)
    if module is None:  # a submodule (`from normalize.sandbox import landlock`) is found next
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
