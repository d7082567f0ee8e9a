"""The locator's header-only index gives the positions the whole-text scan gives."""

from __future__ import annotations

from normalize.workflow.locate import Locator

SOURCE = """\
[workflow]
name = "nested"

[[workflow.steps]]
name = "a"
action = "note a"

  [[workflow.steps]]
  name = "b"

[[workflow.steps.1.steps]]
name = "inner"
action = "note inner"

[[states]]
name = "start"
[[states.transitions]]
next = "end"
[[states]]
name = "end"
"""


def test_tables_are_found_where_the_whole_scan_finds_them() -> None:
    fast = Locator(SOURCE)
    assert fast.headers is not None  # no multi-line string: the header-only index is used
    whole = Locator(SOURCE)
    whole.headers = None
    for path in [*whole.positions, "workflow.steps.1", "states.1", "states.0.transitions.0"]:
        assert fast.find(path) == whole.find(path), path
    assert fast.find("workflow.steps.1") == (8, 3)
    assert fast.find("workflow.steps.0.action") == (6, 1)  # a key: the whole scan, on demand


def test_a_multiline_string_falls_back_to_the_whole_scan() -> None:
    text = 'x = """\n[[workflow.steps]]\n"""\n[[workflow.steps]]\nname = "a"\n'
    located = Locator(text)
    assert located.headers is None
    assert located.find("workflow.steps.0") == (4, 1)  # the line inside the string is skipped
