"""A sandbox the child cannot set up refuses the program and says which step failed, and why."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import needs_full

from normalize.sandbox import SandboxPolicy, SandboxTier, confine, landlock
from normalize.tools.base import ToolError
from normalize.tools.run import _spawn


@needs_full
def test_a_step_that_fails_in_the_child_is_named_in_the_refusal(tmp_path: Path) -> None:
    workspace, needed = tmp_path / "ws", tmp_path / "needed"
    workspace.mkdir()
    needed.mkdir()
    confinement = confine(SandboxPolicy(), workspace, abi=landlock.abi_version(),
                          label="refusal", tier=SandboxTier.FULL, visible=[str(needed)])
    try:
        needed.rmdir()  # gone between the plan and the fork: the child cannot bind it back
        with pytest.raises(ToolError) as refused:
            _spawn([sys.executable, "-c", "pass"], workspace, confinement)
        said = str(refused.value)
        assert said.startswith(f"refused: the sandbox could not be applied to {sys.executable} "
                               f"(opening the paths kept: No such file or directory)"), said
        assert confinement.refusal() == "opening the paths kept: No such file or directory"
        with pytest.raises(subprocess.SubprocessError):  # what Python alone says: nothing more
            subprocess.run([sys.executable, "-c", "pass"], preexec_fn=confinement.preexec,
                           check=False)
    finally:
        confinement.close()
