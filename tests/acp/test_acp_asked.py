"""What an ACP agent's permission request asks, as the actions normalize's policy judges
(`normalize.drivers.acp._asked`): the shapes real agents send."""

from __future__ import annotations

from pathlib import Path

from acp.schema import ToolCallLocation, ToolCallUpdate

from normalize.drivers.acp import _asked

WS = Path("/work/ws")


def asked(**given: object) -> list[tuple[str, str, str]]:
    call = ToolCallUpdate(tool_call_id="c1", **given)  # type: ignore[arg-type]
    return [(j["tool"], j["text"], j.get("refuse", "")) for j in _asked(call, WS)]


def test_a_command_is_a_run_of_its_words_whatever_its_shape() -> None:
    assert asked(kind="execute", raw_input={"command": ["bash", "-lc", "rm -rf build"]}) == \
        [("run", "run rm -rf build", "")]  # codex-acp: the shell's script is the command
    assert asked(kind="execute", raw_input={"command": ["git", "clean", "-fd"]}) == \
        [("run", "run git clean -fd", "")]
    assert asked(kind="execute", title="rm -rf build", raw_input={}) == \
        [("run", "run rm -rf build", "")]  # Gemini CLI: the title
    assert asked(kind="other", raw_input={"command": "ls $(pwd)"}) == \
        [("run", "run ls $(pwd)", "")]  # any kind that names a command


def test_an_edit_is_an_edit_of_each_path_and_outside_is_refused() -> None:
    assert asked(kind="edit", locations=[ToolCallLocation(path="/work/ws/src/a.py")]) == \
        [("edit", "edit src/a.py", "")]
    assert asked(kind="move", raw_input={"source": "/work/ws/a", "destination": "/work/ws/b"}
                 ) == [("edit", "edit a", ""), ("edit", "edit b", "")]
    [(tool, text, refuse)] = asked(kind="delete", raw_input={"path": "/etc/passwd"})
    assert (tool, text) == ("edit", "edit /etc/passwd") and "outside the workspace" in refuse
    assert asked(kind="edit", title="Write something") == \
        [("edit", "edit * (Write something)", "")]  # no path said: judged as any edit


def test_a_read_asks_nothing_to_judge() -> None:
    assert asked(kind="read", locations=[ToolCallLocation(path="/work/ws/a.py")]) == []
    assert asked(kind="fetch", title="https://example.com") == []
