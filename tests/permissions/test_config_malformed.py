"""The user's config.toml, malformed past tomlkit's own errors: exit 2 and one located line."""

from __future__ import annotations

from pathlib import Path

from perm_helpers import cli


def test_a_table_declared_twice_in_the_config_is_one_line_not_an_internal_error(
        tmp_path: Path, normalize_home: Path) -> None:
    config = normalize_home / "config" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[permissions]\nmode = "ask"\n[permissions.x]\na = 1\n'
                      '[permissions.x]\nb = 1\n')
    (tmp_path / "wf.toml").write_text(
        '[workflow]\nname = "w"\n[[workflow.steps]]\nname = "s"\naction = "note hi"\n')
    proc = cli("run", "wf.toml", cwd=tmp_path, home=normalize_home)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"normalize: error: {config}:5:15: invalid TOML: Cannot declare ('permissions', 'x') "
        f"twice"]
