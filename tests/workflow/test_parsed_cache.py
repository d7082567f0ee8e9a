"""A workflow text parsed once is not parsed again: its data is kept in the data home."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from normalize.errors import ConfigError
from normalize.workflow import parsed
from normalize.workflow.loader import parse_toml_text

FLOW = '[workflow]\nname = "tiny"\nvars = {n = 1, x = 0.5, on = true, inf = inf}\n'


@pytest.fixture
def home(normalize_home: Path) -> Path:
    parsed._read.clear()
    return normalize_home


def no_parser(source: str) -> dict[str, object]:
    raise AssertionError("parsed again")


def test_the_same_text_is_read_back_not_parsed(home: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    first = parse_toml_text(FLOW, "tiny.toml")
    kept = home / "cache" / parsed.NAME
    assert kept.stat().st_mode & 0o777 == 0o600
    parsed._read.clear()  # as a new process finds it
    monkeypatch.setattr(tomllib, "loads", no_parser)
    again = parse_toml_text(FLOW, "elsewhere.toml")
    assert again == first and again is not first
    assert again["workflow"]["vars"]["inf"] == float("inf")
    with pytest.raises(AssertionError, match="parsed again"):  # another text is parsed
        parse_toml_text(FLOW + "# changed\n", "tiny.toml")


def test_dates_a_bad_text_and_a_file_others_may_write_are_not_trusted(home: Path) -> None:
    parse_toml_text('[workflow]\nname = "dated"\nwhen = 2024-01-02\n', "dated.toml")
    assert not (home / "cache" / parsed.NAME).exists()  # a date has no JSON form
    with pytest.raises(ConfigError, match=r"bad\.toml:1"):
        parse_toml_text("[workflow\n", "bad.toml")
    assert not (home / "cache" / parsed.NAME).exists()
    parse_toml_text(FLOW, "tiny.toml")
    os.chmod(home / "cache" / parsed.NAME, 0o622)
    parsed._read.clear()
    assert parsed.lookup(FLOW) is None


def test_the_latest_texts_are_kept(home: Path) -> None:
    for n in range(parsed.MOST + 2):
        parse_toml_text(f'[workflow]\nname = "w{n}"\n', "w.toml")
    parsed._read.clear()
    assert parsed.lookup('[workflow]\nname = "w0"\n') is None
    assert parsed.lookup(f'[workflow]\nname = "w{parsed.MOST + 1}"\n') == {
        "workflow": {"name": f"w{parsed.MOST + 1}"}}
