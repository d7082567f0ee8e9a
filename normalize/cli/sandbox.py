"""`normalize sandbox check`: what the sandbox enforces on this machine."""

from __future__ import annotations

import json

from normalize.cli.console import Environment


def check(env: Environment, *, json_output: bool) -> int:
    """Print the probe's verdict; 0 when programs can be confined, 1 when not."""
    from normalize.sandbox import CREDENTIAL_STORES, probe

    found = probe()
    if json_output:
        env.stdout.write(json.dumps({
            "available": found.available, "landlock_abi": found.landlock_abi,
            "filesystem": found.filesystem, "network": found.network, "reason": found.reason,
        }) + "\n")
        return 0 if found.available else 1
    if not found.available:
        env.stdout.write(f"sandbox: unavailable: {found.reason}\n"
                         "  `auto` and non-interactive runs refuse to start programs; "
                         "`--sandbox off` runs them unconfined\n")
        return 1
    hidden = ", ".join(f"~/{name}" for name in CREDENTIAL_STORES)
    env.stdout.write(
        "sandbox: enforced\n"
        f"  filesystem: {found.filesystem}\n"
        "  writes:     the workspace (not .git or .normalize at any depth) and a temporary "
        "directory per program (TMPDIR); read-only mode: the temporary directory only\n"
        f"  hidden:     {hidden}, normalize's data and config directories\n"
        f"  network:    {found.network}; `--network HOST` reaches HOST only, through "
        "normalize's proxy; `--network` lifts it (and asks in auto)\n"
        "  env:        provider keys, *_TOKEN, *_SECRET*, *_PASSWORD, *_API_KEY and cloud "
        "credentials removed (env_allow keeps names)\n")
    return 0
