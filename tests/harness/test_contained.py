"""What a harness runs is contained by normalize's sandbox, whatever the harness allows itself.

Claude Code's own permissions let its Bash tool run anything, and Codex runs with its own
sandbox off; normalize's sandbox refuses a write outside the workspace or into `.git`, and a
connection to any loopback listener but the model server (directly, or through the proxy,
which lets through the model host only).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from harness_support import HarnessSite, Listener, make_site, of_type

from normalize.testing.servers import FakeModelServer, Reply, ToolUse

SHELLS = {"claude": lambda command: ToolUse("Bash", {"command": command, "description": "try"}),
          "codex": lambda command: ToolUse("exec_command", {"cmd": command})}
"""Each harness's own shell tool, as its model calls it."""


def agent(site: HarnessSite, port: int) -> list[str]:
    if site.name == "codex":
        return ["agent", "--harness", "codex", "--model", "openai:gpt-5", "--json",
                "--base-url", site.base_url(port, "/v1"), "try to get out"]
    return ["agent", "--harness", "claude", "--json", "--base-url", site.base_url(port),
            "try to get out"]


@pytest.mark.parametrize("name", ["claude", "codex"])
def test_harness_commands_cannot_write_outside_or_reach_another_listener(
        tmp_path: Path, name: str) -> None:
    site = make_site(tmp_path, name)

    def bash(command: str) -> Reply:
        return Reply("Trying.", tools=(SHELLS[name](command),))

    outside = tmp_path / "outside"
    outside.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=site.ws, check=True)
    listener = Listener()
    direct = (f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
              f"{listener.port}), timeout=5); print('connected')\"")
    proxied = (f"python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:"
               f"{listener.port}/', timeout=10).read())\"")
    script = [bash(f"echo leaked > {outside}/escaped.txt"),
              bash("echo '[core]' >> .git/config"),
              bash(direct), bash(proxied), Reply("Done trying.")]
    try:
        with FakeModelServer(script) as server:
            port = int(server.url.rsplit(":", 1)[1])
            proc, events = site.run(port, *agent(site, port))
            server.assert_done()
    finally:
        listener.close()
    assert proc.returncode == 0, proc.stderr
    results = of_type(events, "harness_tool_finished")
    assert len(results) == 4 and not any(r["ok"] for r in results), results
    assert not (outside / "escaped.txt").exists()
    assert "[core]" not in (site.ws / ".git" / "config").read_text().splitlines()[-1:]
    assert listener.accepted == 0
    refused = of_type(events, "action_finished")[-1]["data"]["network"]
    assert {"host": "127.0.0.1", "allowed": False} in refused
