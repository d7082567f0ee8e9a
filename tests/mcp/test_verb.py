"""The `mcp` verb in the command language: words, a JSON heredoc, in a model's reply."""

from __future__ import annotations

from normalize.intents import parse, parse_command


def test_key_value_words_and_a_json_body_parse_into_the_action() -> None:
    action = parse_command("mcp git git_log repo_path=. max_count=3")
    assert (action.tool, action.args) == ("mcp", ["git", "git_log", "repo_path=.", "max_count=3"])
    action = parse_command('mcp git git_add <<EOF\n{"repo_path": ".", "files": ["a b"]}\nEOF')
    assert action.args == ["git", "git_add"]
    assert action.body == '{"repo_path": ".", "files": ["a b"]}\n'


def test_a_reply_mixes_prose_and_mcp_calls() -> None:
    reply = parse("Let me check the time first.\nmcp time get_current_time timezone=UTC\n"
                  "mcp time\ndone ok")
    assert [a.args for a in reply.actions] == [["time", "get_current_time", "timezone=UTC"],
                                               ["time"]]
    assert reply.thinking == "Let me check the time first." and reply.done
