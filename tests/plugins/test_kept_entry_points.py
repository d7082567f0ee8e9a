"""The installed entry points are read once and kept between runs, keyed on sys.path."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from normalize import plugins
from normalize.plugins import EntryPoint, installed_entry_points


def dist(site: Path, name: str, driver: str) -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Name: {name}\n\n")
    (info / "entry_points.txt").write_text(f"[normalize.drivers]\n{driver} = {name}:Driver\n")


def as_a_new_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugins, "_scanned", None)
    monkeypatch.setattr(plugins, "_trust_kept", True)


def test_a_second_run_reads_the_kept_scan_until_a_directory_changes(
        tmp_path: Path, normalize_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    dist(site, "first", "one")
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(site, ns=(hour_ago, hour_ago))
    monkeypatch.setattr(sys, "path", [str(site)])
    as_a_new_process(monkeypatch)
    assert installed_entry_points("normalize.drivers") == [EntryPoint("one", "first:Driver",
                                                                      "first")]
    kept = normalize_home / "cache" / "entry-points.json"
    assert kept.stat().st_mode & 0o777 == 0o600

    (site / "first-1.0.dist-info" / "entry_points.txt").write_text("")  # site/ unchanged
    as_a_new_process(monkeypatch)
    assert [ep.name for ep in installed_entry_points("normalize.drivers")] == ["one"]

    dist(site, "second", "two")  # an install changes site/: read again
    as_a_new_process(monkeypatch)
    assert [ep.name for ep in installed_entry_points("normalize.drivers")] == ["two"]


def test_reset_reads_the_files_and_a_file_others_may_write_is_not_read(
        tmp_path: Path, normalize_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    dist(site, "first", "one")
    hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(site, ns=(hour_ago, hour_ago))
    monkeypatch.setattr(sys, "path", [str(site)])
    as_a_new_process(monkeypatch)
    installed_entry_points("normalize.drivers")
    (site / "first-1.0.dist-info" / "entry_points.txt").write_text(
        "[normalize.drivers]\nnew = first:New\n")
    plugins.reset_all()
    assert [ep.name for ep in installed_entry_points("normalize.drivers")] == ["new"]
    kept = normalize_home / "cache" / "entry-points.json"
    os.chmod(kept, 0o666)
    (site / "first-1.0.dist-info" / "entry_points.txt").write_text(
        "[normalize.drivers]\nlast = first:Last\n")
    as_a_new_process(monkeypatch)
    assert [ep.name for ep in installed_entry_points("normalize.drivers")] == ["last"]
