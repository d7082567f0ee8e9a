"""Reading a batch's items: JSON lines, CSV with a header, plain lines; bad input in one line."""

from __future__ import annotations

import pytest

from normalize.batch.items import read_items
from normalize.batch.manifest import item_id
from normalize.errors import UsageError


def test_json_lines_csv_and_plain_lines() -> None:
    assert read_items("-", '{"path": "a", "n": 1}\n\n{"path": "b", "n": 2}\n') == [
        {"path": "a", "n": 1}, {"path": "b", "n": 2}]
    assert read_items("x.csv", "path,word\na,one\nb,\"two, three\"\n") == [
        {"path": "a", "word": "one"}, {"path": "b", "word": "two, three"}]
    assert read_items("-", "issue 1\n  issue 2  \n\n") == [{"line": "issue 1"},
                                                           {"line": "issue 2"}]
    assert read_items("-", "a,b\n1,2\n", "csv") == [{"a": "1", "b": "2"}]


@pytest.mark.parametrize(("source", "text", "fmt", "message"), [
    ("items.jsonl", '{"a": 1}\n{"a": \n', None, "items.jsonl:2: not JSON"),
    ("-", '{"a": 1}\n[1, 2]\n', None, "stdin:2: an item must be a JSON object (got list)"),
    ("x.csv", "a,b\n1,2,3\n", None, "x.csv:2: 3 column(s) where the header has 2"),
    ("x.csv", "a,a\n1,2\n", None, "x.csv:1: the CSV header needs distinct"),
    ("-", "\n\n", None, "--items stdin: no items in it"),
    ("-", "a\n", "yaml", "--items-format yaml: unknown"),
])
def test_bad_items_name_the_file_and_line(source: str, text: str, fmt: str | None,
                                          message: str) -> None:
    with pytest.raises(UsageError) as caught:
        read_items(source, text, fmt)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"--items /nonexistent/items.jsonl: No such file"):
        read_items("/nonexistent/items.jsonl")


def test_item_ids_come_from_the_batch_and_the_position() -> None:
    assert item_id("abcd1234", 3) == item_id("abcd1234", 3)
    ids = {item_id("abcd1234", n) for n in range(1000)} | {item_id("abcd1235", 0)}
    assert len(ids) == 1001 and all(len(i) == 8 for i in ids)


STEPS = '[[workflow.steps]]\nname = "a"\naction = "run echo {item.word}"\n'


def test_a_workflow_names_its_items_workspace_and_what_a_failed_item_does() -> None:
    from normalize.workflow.loader import load_workflow_text

    spec = load_workflow_text(
        '[workflow]\nworkspace = "clone:{item.repo}"\non_item_error = "stop"\n' + STEPS,
        overrides={"item": {"word": "x", "repo": "r"}})
    assert (spec.workspace, spec.on_item_error) == ("clone:{item.repo}", "stop")
    assert spec.vars["item"] == {"word": "x", "repo": "r"}


@pytest.mark.parametrize(("table", "message"), [
    ('workspace = "tmp:x"', "workspace 'tmp:x' must be dir:PATH, clone:REPO or copy"),
    ('on_item_error = "retry"', "unknown on_item_error 'retry' (choose from continue, stop)"),
])
def test_a_bad_workspace_or_on_item_error_is_refused_in_one_line(table: str,
                                                                 message: str) -> None:
    from normalize.errors import ConfigError
    from normalize.workflow.loader import load_workflow_text

    with pytest.raises(ConfigError) as caught:
        load_workflow_text(f"[workflow]\n{table}\n" + STEPS, overrides={"item": {}})
    assert message in str(caught.value) and "\n" not in str(caught.value)
