"""`normalize sandbox check`: the tier this machine gives, what it enforces and what it does not."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from normalize.cli.console import Environment

if TYPE_CHECKING:
    from normalize.runner import RunOptions
    from normalize.task import Task


def check(env: Environment, *, json_output: bool) -> int:
    """Print the probe's verdict; 0 when programs can be confined, 1 when not."""
    from normalize.sandbox import CREDENTIAL_STORES, probe
    from normalize.sandbox.confinement import AGENT_HOMES

    found = probe(fresh=True)  # a check tries again, and keeps what it found
    if json_output:
        env.stdout.write(json.dumps({
            "available": found.available, "tier": found.tier.value,
            "landlock_abi": found.landlock_abi, "filesystem": found.filesystem,
            "network": found.network, "reason": found.reason,
            "enforced": list(found.enforced), "not_enforced": list(found.not_enforced),
        }) + "\n")
        return 0 if found.available else 1
    if not found.available:
        env.stdout.write(f"sandbox: unavailable: {found.reason}\n"
                         "  tier:       none\n"
                         "  `auto` and non-interactive runs refuse to start programs; "
                         "`--sandbox off` runs them unconfined\n")
        return 1
    hidden = ", ".join(f"~/{name}" for name in (*CREDENTIAL_STORES, *AGENT_HOMES))
    why = f" (no full tier: {found.reason})" if found.reason else ""
    lines = [
        "sandbox: enforced",
        f"  tier:       {found.tier.value}{why}",
        *(f"  enforces:   {line}" for line in found.enforced),
        "  modes:      `--sandbox read-only` writes only the temporary directory; "
        "`--sandbox off` runs programs unconfined",
        f"  hidden:     {hidden}, and where the standard variables move them "
        "(XDG_CONFIG_HOME, DOCKER_CONFIG, KUBECONFIG, …); normalize's data and config "
        "directories; every task's harness home but a harness turn's own",
        "  network:    `--network HOST` reaches HOST only, through normalize's proxy; "
        "`--network` lifts the network rules (and asks in auto)",
        "  env:        provider keys, *_TOKEN, *_SECRET*, *_PASSWORD, *PASSPHRASE*, *_API_KEY, "
        "cloud credentials, any value holding a credential (a URL's password, a token's "
        "shape) and the variables that move a credential store removed (env_allow keeps "
        "names)",
        *(f"  does not:   {line}" for line in found.not_enforced),
    ]
    env.stdout.write("\n".join(lines) + "\n")
    return 0


def report_tier(env: Environment, task: Task, options: RunOptions) -> None:
    """One stderr line when the task's programs run in a tier weaker than full."""
    from normalize.runner import tier_notice

    notice = tier_notice(task, options)
    if notice:
        env.stderr.write(f"normalize: notice: {notice}\n")
        env.stderr.flush()
