"""The redactor's two fast paths agree with the plain regex: the anchor scan and the stream.

A long text only meets the regex on the lines that hold an anchor; a streamed
text is let out minus a held-back tail. Neither may let a secret through that
the whole-text redaction catches, nor lose ordinary text.
"""

from __future__ import annotations

import pytest
from secret_shapes import ENV_SECRET, KEY, PAYLOAD, SHAPES, make_workspace

from normalize.events import Emitter, ModelReplied, TextDelta, ThinkingDelta
from normalize.redact import REDACTED, SCAN_DIRECT, Redactor, _replacement

FILLER = "collected 120 items / tests/test_calc.py::test_mean PASSED  [ 42%]\n" * 12


@pytest.fixture(scope="module")
def redactor(tmp_path_factory: pytest.TempPathFactory) -> Redactor:
    root = make_workspace(tmp_path_factory.mktemp("scan") / "ws")
    return Redactor.for_workspace(root, env={"MY_SERVICE_TOKEN": ENV_SECRET})


@pytest.mark.parametrize(("name", "line", "secret"), SHAPES, ids=[s[0] for s in SHAPES])
def test_a_shape_is_caught_in_a_short_and_in_a_long_text(redactor: Redactor, name: str,
                                                         line: str, secret: str) -> None:
    del name
    long = f"{FILLER}{line}\n{FILLER}"
    assert len(line) < SCAN_DIRECT < len(long)
    assert secret not in redactor.redact(line)
    assert redactor.redact(long) == f"{FILLER}{redactor.redact(line)}\n{FILLER}"


def test_the_scan_gives_what_the_regex_gives(redactor: Redactor) -> None:
    text = (FILLER + PAYLOAD + "\n") * 5
    assert redactor.redact(text) == redactor._regex.sub(_replacement, text)


def test_ordinary_text_is_kept(redactor: Redactor) -> None:
    code = ("def login(password: str, token=None) -> None:\n"
            "    token = get_token()\n    self.api_key = api_key\n"
            "    max_tokens: int = 4096\n") * 20
    assert redactor.redact(code) == code


def _streamed(redactor: Redactor, text: str, size: int) -> str:
    emitter = Emitter("t0000001", redact=redactor)
    shown: list[str] = []
    emitter.subscribe(lambda e: shown.append(e.text) if isinstance(e, TextDelta) else None)
    for start in range(0, len(text), size):
        emitter.emit(TextDelta(text=text[start:start + size]))
    emitter.emit(ModelReplied(text=text))
    return "".join(shown)


@pytest.mark.parametrize("size", [1, 3, 7, 16, 61])
def test_a_key_split_across_deltas_never_shows(redactor: Redactor, size: int) -> None:
    text = f"{FILLER}Here it is: {PAYLOAD}\nand more prose after it.\n{FILLER}"
    shown = _streamed(redactor, text, size)
    for _, _, secret in SHAPES:
        assert secret not in shown
    assert shown.startswith(FILLER) and shown.endswith(f"and more prose after it.\n{FILLER}")
    assert shown == redactor.redact(text)


def test_a_private_key_block_streamed_line_by_line_never_shows() -> None:
    body = "\n".join("MIIEpAIBAAKCAQEA" + f"{i:04d}" * 10 for i in range(40))
    text = f"key:\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n-----END RSA PRIVATE KEY-----\nok\n"
    shown = _streamed(Redactor(), text, 5)
    assert "MIIEpAIBAAKCAQEA" not in shown and shown == f"key:\n{REDACTED}\nok\n"


def test_held_text_comes_out_before_the_next_event_of_another_kind() -> None:
    emitter = Emitter("t0000001", redact=Redactor())
    seen: list[tuple[str, str]] = []
    emitter.subscribe(lambda e: seen.append((e.type, getattr(e, "text", ""))))
    emitter.emit(ThinkingDelta(text="thinking about "))
    emitter.emit(TextDelta(text="the key " + KEY[:20]))
    emitter.emit(TextDelta(text=KEY[20:] + " now"))
    assert seen == []  # short: all held back
    emitter.emit(ModelReplied(text="the key " + KEY + " now"))
    assert seen == [("thinking_delta", "thinking about "),
                    ("text_delta", f"the key {REDACTED} now"),
                    ("model_replied", f"the key {REDACTED} now")]


def test_without_a_redactor_deltas_pass_as_they_come() -> None:
    emitter = Emitter("t0000001", redact=lambda obj: obj)
    seen: list[str] = []
    emitter.subscribe(lambda e: seen.append(getattr(e, "text", "")))
    emitter.emit(TextDelta(text="a"))
    assert seen == ["a"]
