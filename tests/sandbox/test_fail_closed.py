"""Where the sandbox cannot be applied, unattended runs refuse to start programs."""

from __future__ import annotations

from sandbox_support import Site

from normalize.sandbox import probe

NO_SANDBOX = {"NORMALIZE_NO_SANDBOX": "1"}


def test_auto_refuses_with_one_line_and_status_2(site: Site) -> None:
    proc, finished = site.agent(["run touch ran.txt", "done"], extra_env=NO_SANDBOX)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "the sandbox is unavailable" in lines[0] and "--sandbox off" in lines[0]
    assert "NORMALIZE_NO_SANDBOX" in lines[0]  # the reason is named
    assert "Traceback" not in proc.stderr
    assert finished == []
    assert not (site.ws / "ran.txt").exists()
    assert list(site.store.glob("tasks/*.json")) == []  # refused before the task started


def test_sandbox_off_runs_and_warns(site: Site) -> None:
    proc, finished = site.agent(["run touch ran.txt", "done"], "--sandbox", "off",
                                "--approve", "yes", extra_env=NO_SANDBOX)
    assert proc.returncode == 0, proc.stderr
    assert "warning: --sandbox off" in proc.stderr
    assert finished[0]["status"] == "success"
    assert (site.ws / "ran.txt").exists()


def test_sandbox_off_in_auto_asks_so_is_blocked_without_a_person(site: Site) -> None:
    proc, finished = site.agent(["run touch ran.txt", "done"], "--sandbox", "off")
    assert proc.returncode == 0, proc.stderr
    assert finished[0]["status"] == "blocked"
    assert "--sandbox off" in finished[0]["error"]
    assert not (site.ws / "ran.txt").exists()


def test_an_unknown_sandbox_mode_is_refused_before_a_task_exists(site: Site) -> None:
    proc, _ = site.agent(["done"], "--sandbox", "sometimes")
    assert proc.returncode == 2
    assert "--sandbox sometimes: unknown sandbox mode" in proc.stderr
    assert list(site.store.glob("tasks/*.json")) == []


def test_sandbox_check_reports_what_is_enforced(site: Site) -> None:
    import subprocess
    import sys

    def check(extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "normalize.cli.app", "sandbox", "check"],
                              env={**site.env, **extra}, capture_output=True, text=True,
                              check=False, timeout=60)

    enforced = check({})
    assert enforced.returncode == 0, enforced.stderr
    assert "sandbox: enforced" in enforced.stdout and "Landlock ABI" in enforced.stdout
    assert f"tier:       {probe().tier.value}" in enforced.stdout
    network = {"full": "network namespace", "landlock": "seccomp refuses"}[probe().tier.value]
    assert network in enforced.stdout
    missing = check(NO_SANDBOX)
    assert missing.returncode == 1
    assert "unavailable" in missing.stdout and "--sandbox off" in missing.stdout
