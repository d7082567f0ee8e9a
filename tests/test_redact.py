"""Secret redaction: key shapes, headers, assignments, workspace values, nested data."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from normalize.redact import REDACTED, Redactor, parse_dotenv, redact, redact_obj

# Shapes only; assembled here so no scanner mistakes this file for a leak.
SHAPES = {
    "anthropic": "sk-ant-api03-" + "Ab1_" * 10,
    "openai": "sk-" + "A1b2" * 12,
    "openai project": "sk-proj-" + "x9Y-" * 10,
    "github classic": "ghp_" + "a1B2" * 9,
    "github oauth": "gho_" + "Z9y8" * 9,
    "github fine-grained": "github_pat_11AAAAAAA0" + "b_C3" * 10,
    "aws": "AKIA" + "IOSFODNN7EXAMPLE",
    "slack bot": "xoxb-" + "123456789012-abcdefABCDEF",
    "slack user": "xoxp-" + "1234567890-0987654321-abcdef",
    "google": "AIza" + "SyD-" * 8 + "abc",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N",
}


@pytest.mark.parametrize("kind", sorted(SHAPES))
def test_key_shapes_are_redacted(kind: str) -> None:
    key = SHAPES[kind]
    text = f"config: using {key} for requests\n"
    assert redact(text) == f"config: using {REDACTED} for requests\n"


def test_text_that_only_resembles_keys_is_kept() -> None:
    plain = (
        "task-abcdefghijklmnopqrstuvwxyz0123 sk-short max_tokens=4096 "
        "def login(password: str, token=None) -> None: ...\n"
        "token = get_token()\nAKIA is a prefix\n"
    )
    assert redact(plain) == plain


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc.def.ghi", f"Authorization: {REDACTED}"),
        ("authorization: Basic dXNlcjpwYXNz", f"authorization: {REDACTED}"),
        (
            "Proxy-Authorization: Basic dXNlcjpwYXNz\nHost: x",
            f"Proxy-Authorization: {REDACTED}\nHost: x",
        ),
        ("curl -H 'Authorization: token abc123' url", f"curl -H 'Authorization: {REDACTED}' url"),
        ('{"Authorization": "Bearer abc123xyz"}', f'{{"Authorization": "{REDACTED}"}}'),
        ("sent Bearer eyJhbGciOi.abc123def", f"sent Bearer {REDACTED}"),
    ],
)
def test_authorization_headers_and_bearer_tokens(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("password=hunter2&user=bob", f"password={REDACTED}&user=bob"),
        ("export GITHUB_TOKEN=abc123", f"export GITHUB_TOKEN={REDACTED}"),
        ("--api-key=abcdef --verbose", f"--api-key={REDACTED} --verbose"),
        ("client_secret = 's3cr3t'", f"client_secret = '{REDACTED}'"),
        ('{"api_key": "abc", "model": "m"}', f'{{"api_key": "{REDACTED}", "model": "m"}}'),
        ("db: postgres://app:pa55word@db:5432/app", f"db: postgres://app:{REDACTED}@db:5432/app"),
    ],
)
def test_secret_assignments(text: str, expected: str) -> None:
    assert redact(text) == expected


def test_private_key_blocks() -> None:
    pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaA\n-----END OPENSSH PRIVATE KEY-----"
    assert redact(f"key:\n{pem}\ndone") == f"key:\n{REDACTED}\ndone"


def test_redaction_is_idempotent() -> None:
    text = "Authorization: Bearer abc123xyz password=x " + SHAPES["github classic"]
    once = redact(text)
    assert redact(once) == once


def test_workspace_env_files_and_environment(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "# local settings\n"
        "HOST=localhost\n"
        "DEBUG=true\n"
        "DATABASE_URL=postgres://u:p@db:5432/app\n"
        'export STRIPE_KEY="rk_live_51Habc"\n'
        "WEBHOOK=whsec_Zy8Xw7Vu6 # rotate monthly\n"
        "ADMIN_PASSWORD='correct horse battery'\n"
    )
    (tmp_path / ".env.local").write_text("SESSION_SALT=ab12cd34ef56\n")
    (tmp_path / ".env.example").write_text("STRIPE_KEY=rk_test_placeholder1\n")
    env = {"MY_API_KEY": "env-secret-value-42", "SHORT_TOKEN": "abc", "HOME": "/home/someone1"}
    redactor = Redactor.for_workspace(tmp_path, env=env)

    assert redactor.values == {
        "postgres://u:p@db:5432/app",
        "rk_live_51Habc",
        "whsec_Zy8Xw7Vu6",
        "correct horse battery",
        "ab12cd34ef56",
        "env-secret-value-42",
    }
    log = (
        "connecting to postgres://u:p@db:5432/app on localhost\n"
        "charge with rk_live_51Habc, hook whsec_Zy8Xw7Vu6, salt ab12cd34ef56\n"
        "login correct horse battery; key env-secret-value-42; home /home/someone1\n"
        "rk_test_placeholder1 stays\n"
    )
    assert redactor.redact(log) == (
        f"connecting to {REDACTED} on localhost\n"
        f"charge with {REDACTED}, hook {REDACTED}, salt {REDACTED}\n"
        f"login {REDACTED}; key {REDACTED}; home /home/someone1\n"
        "rk_test_placeholder1 stays\n"
    )


def test_a_workspace_without_env_files_uses_the_environment_only(tmp_path: Path) -> None:
    redactor = Redactor.for_workspace(tmp_path, env={"DEPLOY_SECRET": "deploy-123456"})
    assert redactor.values == {"deploy-123456"}
    assert Redactor.for_workspace(tmp_path, env={}).values == frozenset()


def test_parse_dotenv() -> None:
    text = "A=1\n# c\n\nexport B = 'two words'\nC=x # note\nD=\nbad line\nE=\"q\"\n"
    assert parse_dotenv(text) == [("A", "1"), ("B", "two words"), ("C", "x"), ("E", "q")]


def test_nested_objects_are_walked() -> None:
    secret = SHAPES["anthropic"]
    event = {
        "type": "action_finished",
        "seq": 7,
        "result": {
            "output": f"export ANTHROPIC_API_KEY={secret}\nok",
            "data": {"lines": ["fine", f"key {secret}"], "pair": ("a", secret)},
        },
        "driver_config": {"api_key": "plain-looking", "max_tokens": 1024, "model": "m"},
        "headers": {"Authorization": "whatever it is"},
        "usage": {"input_tokens": 10, "cache_read_tokens": 2},
        "empty": {"password": ""},
    }
    clean = redact_obj(event)
    assert clean == {
        "type": "action_finished",
        "seq": 7,
        "result": {
            "output": f"export ANTHROPIC_API_KEY={REDACTED}\nok",
            "data": {"lines": ["fine", f"key {REDACTED}"], "pair": ("a", REDACTED)},
        },
        "driver_config": {"api_key": REDACTED, "max_tokens": 1024, "model": "m"},
        "headers": {"Authorization": REDACTED},
        "usage": {"input_tokens": 10, "cache_read_tokens": 2},
        "empty": {"password": ""},
    }
    assert secret in event["result"]["output"]  # type: ignore[index]


def test_collected_values_win_over_partial_shapes() -> None:
    redactor = Redactor(["token-9f8e7d6c5b4a", "short"])
    assert redactor.values == {"token-9f8e7d6c5b4a"}
    assert redactor.redact("x token-9f8e7d6c5b4a short") == f"x {REDACTED} short"
    assert redact_obj(["token-9f8e7d6c5b4a"], redactor) == [REDACTED]


def test_redaction_is_fast_on_large_outputs() -> None:
    redactor = Redactor([f"collected-secret-{i:03d}" for i in range(100)])
    text = "collected 120 items / tests/test_calc.py::test_mean PASSED  [ 42%]\n" * 30_000
    started = time.perf_counter()
    assert redactor.redact(text) == text
    assert time.perf_counter() - started < 2.0  # ~2 MB; about 0.15 s on a laptop


def test_an_emitted_event_is_redacted_and_inert_where_it_holds_text() -> None:
    from normalize.events import ActionFinished, Emitter

    seen: list[object] = []
    emitter = Emitter("abc12345", redact=Redactor())
    emitter.subscribe(seen.append)
    event = ActionFinished(command="curl -u admin:hunter22secret x", preview="\x1b]0;t\x07",
                           data={"rows": [{"api_key": "plain-looking-value"}], "n": 3})
    shown = emitter.emit(event)
    assert shown.command == f"curl -u admin:{REDACTED} x"
    assert shown.preview == "␛]0;t␇"
    assert shown.data == {"rows": [{"api_key": REDACTED}], "n": 3}  # by its key, nested
    assert event.data == {"rows": [{"api_key": "plain-looking-value"}], "n": 3}  # not changed
    assert seen == [shown]
    token = "ghp_" + "a1B2c3D4e5" * 4  # a name-shaped key is a token all the same
    keyed = emitter.emit(ActionFinished(command="ls", data={token: 1}))
    assert keyed.data == {REDACTED: 1}


def test_an_event_with_nothing_to_hide_is_emitted_without_a_copy() -> None:
    from normalize.events import ActionFinished, Emitter

    emitter = Emitter("abc12345", redact=Redactor())
    data = {"rows": [{"path": "src/a.py", "line": 3}]}
    shown = emitter.emit(ActionFinished(command="grep needle", preview="a\tb\n", data=data))
    assert shown.data is data and shown.command == "grep needle"


def test_without_a_redactor_an_emitted_event_is_still_made_inert() -> None:
    from normalize.events import ActionFinished, Emitter

    shown = Emitter("abc12345").emit(ActionFinished(command="ok", data={"k\x07": ["a\x1bb"]}))
    assert shown.data == {"k␇": ["a␛b"]} and shown.command == "ok"


GLUED = {  # a distinctive prefix glued to the text before it (#37)
    "id_": "id_" + SHAPES["github classic"],
    "v1.": "v1." + SHAPES["github classic"],
    "prefix": "prefix" + SHAPES["aws"],
    "missing-": "missing-" + SHAPES["openai project"],
    "key_": "key_" + "glsa_" + "Ab3dE6gH9j" * 3 + "Kl_0a1b2c3d",
    "suffix_": SHAPES["aws"] + "_suffix",
}


@pytest.mark.parametrize("kind", sorted(GLUED))
def test_known_shapes_glued_to_other_text_are_redacted(kind: str) -> None:
    shown = redact(f"value: {GLUED[kind]} ok")
    assert REDACTED in shown and SHAPES["github classic"] not in shown
    assert "IOSFODNN7EXAMPLE" not in shown and "Ab3dE6gH9j" not in shown and "x9Y-" not in shown


@pytest.mark.parametrize("text", [
    "bot 7312345678:" + "Ab" + "x9Lp2Mq4Rs6Tu8Vw0Yz3Ab5Cd7Ef9GHi1",  # not only `AA…`
    "grafana " + "eyJrIjoi" + "T0tlbjRmU2VjcmV0S2V5" * 4,  # a Grafana API key
])
def test_telegram_and_grafana_api_keys(text: str) -> None:
    assert redact(text).endswith(REDACTED)


def test_glued_shapes_bring_no_new_false_positives_in_code() -> None:
    plain = (
        "task-abcdefghijklmnopqrstuvwxyz0123 ask-proj-abcdefghijklmnopqrstuvwxyz\n"
        "THEAKIAIOSFODNN7EXAMPLEKEYS x = CONSTANT_AKIAIOSFODNN7EXAMPLE2\n"
        "time 12:30:AAAA ratio 1:" + "A" * 40 + "\nmsghp_ok self.flag_gh = 1\n"
    )
    assert redact(plain) == plain
