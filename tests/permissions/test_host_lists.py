"""`network = [hosts]`: names checked, lists that only narrow from a workspace file, who asks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from normalize.cli.app import bare_network
from normalize.errors import ConfigError
from normalize.permissions import Permissions, load_user_config
from normalize.sandbox import SandboxPolicy
from normalize.sandbox.hosts import check_host, covered, host_matches, hosts_line
from normalize.tools.approval import outside_reason

PYPI = ("pypi.org", "files.pythonhosted.org")


def test_host_names_are_checked_and_normalised() -> None:
    assert check_host("PyPI.org.") == "pypi.org"
    assert check_host("*.Example.com") == "*.example.com"
    assert check_host("127.0.0.1") == "127.0.0.1" and check_host("[::1]") == "::1"
    for bad in ("https://pypi.org", "pypi.org:443", "pypi.org/simple", "a b", "", "*.com", "*",
                "*example.com", "-x.org", "a..b"):
        with pytest.raises(ValueError):
            check_host(bad)


def test_matching_is_exact_or_below_a_wildcard() -> None:
    hosts = ("pypi.org", "*.example.com")
    assert host_matches("PYPI.ORG", hosts) and host_matches("a.b.example.com", hosts)
    assert not host_matches("example.com", hosts)  # the wildcard is the names below it
    assert not host_matches("evilpypi.org", hosts) and not host_matches("pypi.org.evil", hosts)
    assert not host_matches("badexample.com", hosts)
    assert covered("*.x.example.com", hosts) and not covered("*.example.org", hosts)


def test_the_journal_line_names_each_host() -> None:
    line = hosts_line([{"host": "pypi.org", "allowed": True},
                       {"host": "evil.test", "allowed": False}])
    assert line == "network: pypi.org (allowed), evil.test (refused)"
    assert hosts_line([]) is None


def test_a_list_flows_into_the_sandbox_policy_and_round_trips() -> None:
    perms = Permissions().overlay({"network": list(PYPI)}, "config.toml")
    assert perms.network == PYPI
    policy = perms.sandbox_policy()
    assert policy.network is False and policy.hosts == PYPI and not policy.hosts_ask
    assert Permissions.from_dict(perms.to_dict()) == perms
    assert Permissions().overlay({"network": []}, "c.toml").network is False


def test_an_untrusted_file_cannot_widen_false_to_a_list() -> None:
    out = Permissions().overlay({"network": ["evil.test"]}, "w.toml", trusted=False)
    assert out.network is False
    assert out.notes == ('ignored network = "evil.test" from w.toml: untrusted workspace file; '
                         "`normalize trust FILE` to allow",)


def test_an_untrusted_file_narrows_a_list_to_some_of_its_hosts() -> None:
    base = Permissions(network=("pypi.org", "*.example.com"))
    out = base.overlay({"network": ["pypi.org", "a.example.com", "evil.test"]}, "w.toml",
                       trusted=False)
    assert out.network == ("pypi.org", "a.example.com") and not out.hosts_ask
    assert len(out.notes) == 1 and '"evil.test"' in out.notes[0]
    assert base.overlay({"network": ["evil.test"]}, "w.toml", trusted=False).network is False
    widened = base.overlay({"network": True}, "w.toml", trusted=False)
    assert widened.network == base.network and "ignored network = true" in widened.notes[0]


def test_a_list_narrowed_from_true_asks_as_true_does() -> None:
    everything = Permissions(network=True)
    out = everything.overlay({"network": ["pypi.org"]}, "w.toml", trusted=False)
    assert out.network == ("pypi.org",) and out.hosts_ask
    assert Permissions.from_dict(out.to_dict()).hosts_ask  # recorded for resume
    assert outside_reason(out.sandbox_policy()) == \
        "it reaches pypi.org, hosts a workspace file chose"
    mine = everything.overlay({"network": ["pypi.org"]}, "the command line")
    assert not mine.hosts_ask and outside_reason(mine.sandbox_policy()) is None
    assert outside_reason(SandboxPolicy(hosts=PYPI)) is None
    assert outside_reason(SandboxPolicy(network=True)) == "it runs with network access"


def test_a_file_cannot_set_the_recorded_ask_bit() -> None:
    with pytest.raises(ConfigError, match="unknown permission 'hosts_ask'"):
        Permissions().overlay({"hosts_ask": True}, "w.toml", trusted=False)


def test_a_bad_host_is_one_line_naming_its_place(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[permissions]\nnetwork = ["pypi.org", "https://evil.test/x"]\n')
    with pytest.raises(ConfigError, match=rf"^{config}:2: network 'https://evil.test/x' is "
                                          r"not a host name"):
        load_user_config(config)
    config.write_text('[permissions]\nnetwork = ["*"]\n')
    with pytest.raises(ConfigError, match="network = true lets programs reach every host"):
        load_user_config(config)


def _normalize(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "normalize.cli.app", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def test_bad_hosts_on_the_command_line_and_in_a_workflow(tmp_path: Path) -> None:
    proc = _normalize("run", "check", "--network", "pypi.org", "--network", "a b",
                      "-w", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "--network 'a b' is not a host name" in proc.stderr
    assert "--network=*" in proc.stderr and "Traceback" not in proc.stderr
    flow = tmp_path / "wf.toml"
    flow.write_text('[workflow]\nname = "w"\n[workflow.permissions]\n'
                    'network = ["ok.test", "bad_host:80"]\n[[steps]]\naction = "view ."\n')
    proc = _normalize("run", str(flow), "-w", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert f"{flow}:4" in proc.stderr and "network 'bad_host:80' is not a host name" in \
        proc.stderr and "Traceback" not in proc.stderr


def test_a_bare_network_flag_still_means_every_host() -> None:
    assert bare_network(["run", "w", "--network"]) == ["run", "w", "--network", "*"]
    assert bare_network(["--network", "--json"]) == ["--network", "*", "--json"]
    assert bare_network(["--network", "pypi.org"]) == ["--network", "pypi.org"]
    assert bare_network(["--", "--network"]) == ["--", "--network"]


def test_the_plain_log_names_the_hosts_under_the_action() -> None:
    from normalize.cli.describe import describe
    from normalize.events import ActionFinished

    event = ActionFinished(task_id="t", tool="run", command="run pip download x",
                           status="success", data={"network": [
                               {"host": "pypi.org", "allowed": True},
                               {"host": "evil.test", "allowed": False}]})
    lines = (describe(event) or "").splitlines()
    assert lines[-1].strip() == "network: pypi.org (allowed), evil.test (refused)"
    assert "network" not in (describe(ActionFinished(task_id="t", tool="run")) or "")
