"""The ACP tests' support module (acp_support) is importable from each test module."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
