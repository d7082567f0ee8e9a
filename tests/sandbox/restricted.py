"""Run a command where namespaces are restricted the way real machines restrict them.

    python tests/sandbox/restricted.py docker -- normalize sandbox check
    python tests/sandbox/restricted.py apparmor -- normalize run check

`docker`: Docker's default seccomp profile: `unshare` and `setns` refused, and
`clone` with any namespace flag; `clone3` answers ENOSYS (its flags sit in
memory a filter cannot read), so the C library falls back to `clone`.

`apparmor`: Ubuntu 23.10+ with `kernel.apparmor_restrict_unprivileged_userns=1`
(and GitHub's ubuntu-latest runners): the user namespace is created, but
nothing privileged works inside it, so `mount` (and the rest of the mount
family, `pivot_root` included) is refused.

The filter is installed in this process (no new privileges first) and holds
for the command and everything it starts.
"""

from __future__ import annotations

import os
import sys

from normalize.sandbox.seccomp import CLONE_NAMESPACES, MOUNT_FAMILY, Filter, installer

FILTERS = {
    "docker": Filter(refuse=("unshare", "setns"), enosys=("clone3",),
                     clone_flags=CLONE_NAMESPACES),
    "apparmor": Filter(refuse=MOUNT_FAMILY),
}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] not in FILTERS or argv[1] != "--":
        sys.stderr.write(f"usage: restricted.py {'|'.join(FILTERS)} -- COMMAND ARGS...\n")
        return 2
    installer(FILTERS[argv[0]].build())()
    os.execvp(argv[2], argv[2:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
