"""`inert` shows control characters as placeholders; new shapes skip near misses, keep anchors."""

from __future__ import annotations

import pytest

from normalize.redact import inert, inert_obj, redact


@pytest.mark.parametrize(("raw", "shown"), [
    ("\x1b]0;title\x07", "␛]0;title␇"),  # OSC 0: the window title
    ("\x1b]52;c;ZXZpbA==\x07", "␛]52;c;ZXZpbA==␇"),  # OSC 52: the clipboard
    ("\x1b[2J\x1b[H", "␛[2J␛[H"),  # clear the screen, cursor home
    ("\x9b2J", "␛[2J"),  # the same as a C1 control
    ("\x9d0;t\x9c", "␛]0;t␛\\"),  # C1 OSC ended by C1 ST
    ("a\x08b", "a␈b"),
    ("shown\rhidden", "shown␍hidden"),
    ("line\r\nnext", "line\nnext"),  # a Windows line end is a line end
    ("bell\x07 del\x7f nul\x00", "bell␇ del␡ nul␀"),
])
def test_control_characters_are_shown_not_acted_on(raw: str, shown: str) -> None:
    assert inert(raw) == shown


def test_no_control_character_survives() -> None:
    every = "".join(map(chr, range(0xA0)))
    out = inert(every)
    assert [c for c in out if c not in "\t\n" and (ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0)] == []
    assert "\t" in out and "\n" in out


def test_plain_text_is_returned_as_it_is() -> None:
    text = "tab\tnewline\n unicode ✓ ␛ already a picture"
    assert inert(text) is text


def test_inert_obj_reaches_keys_and_nesting() -> None:
    assert inert_obj({"a\x1b": ["b\x07", ("c\x9b",)], "n": 1}) == {"a␛": ["b␇", ("c␛[",)],
                                                                      "n": 1}


@pytest.mark.parametrize("text", [
    "docker run -u 1000:1000 image",  # a uid:gid, not a user:password
    "sort -u names.txt",
    "mkdir -p build && mysql -h db shop",  # -p of another command, mysql without -p
    "the password policy ok",
    "pip install -U pip",
    "login: ok",
    "see https://hooks.slack.com/services for how",
    "ratio 12345678:AB and more",
])
def test_near_misses_of_the_new_shapes_are_left_alone(text: str) -> None:
    assert redact(text) == text


def test_a_short_text_without_an_anchor_skips_the_regex_and_loses_nothing() -> None:
    """Texts under SCAN_DIRECT are searched for an anchor first: each shape still has one."""
    from secret_shapes import SHAPES

    from normalize.redact import Redactor, _replacement

    redactor = Redactor()
    tails = ['auth": "bW9uYTpkb2NrZXJwYXNzMTIz"}', "-u admin:Pa55w0rd-curl https://x"]
    for line in [*(line for _, line, _ in SHAPES), *tails]:
        assert redactor.redact(line) == redactor._regex.sub(_replacement, line), line
