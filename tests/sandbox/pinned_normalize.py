"""Run normalize with host names pinned for its proxy: `pinned_normalize.py PIN... -- ARGS`.

Each PIN is `NAME=ADDRESS:PORT` (see `normalize.testing.network`); ARGS are
normalize's own command line. The pins live in this process only.
"""

from __future__ import annotations

import sys

from normalize.cli.app import main
from normalize.testing.network import parse_pins, pinned_hosts

if __name__ == "__main__":
    split = sys.argv.index("--")
    with pinned_hosts(parse_pins(sys.argv[1:split])):
        sys.exit(main(sys.argv[split + 1:]))
