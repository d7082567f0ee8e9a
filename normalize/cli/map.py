"""`normalize map [PATH] [--tokens N]`: the repo map, the definitions other files use most."""

from __future__ import annotations

import json
from pathlib import Path

from normalize.cli.console import Environment, error_line
from normalize.errors import ExitStatus


def run_map(env: Environment, path: str | None, *, tokens: int, workspace: Path | None = None,
            json_output: bool = False) -> int:
    """Print the repo map of PATH (default: the workspace) fitted to `tokens` tokens."""
    from normalize.errors import WorkspaceError
    from normalize.tools.code.repomap import build_map
    from normalize.tools.files import walk
    from normalize.tools.guard import WorkspaceGuard

    root = (workspace or Path.cwd()).resolve()
    if tokens < 1:
        error_line(env, f"--tokens needs a positive number, not {tokens}")
        return int(ExitStatus.USAGE)
    try:
        start = WorkspaceGuard(root).resolve(path or ".")
    except WorkspaceError as exc:
        error_line(env, str(exc))
        return int(ExitStatus.USAGE)
    if not start.exists():
        error_line(env, f"no such file or directory: {path}")
        return int(ExitStatus.USAGE)
    repo_map = build_map(root, walk(root, start), tokens=tokens)
    if json_output:
        env.stdout.write(json.dumps({
            "path": path or ".", "files": repo_map.files, "tokens": repo_map.tokens,
            "skipped_large": repo_map.skipped,
            "budget": tokens, "definitions": [
                {"path": d.path, "name": d.row.symbol.name, "kind": d.row.symbol.kind,
                 "parent": d.row.parent, "start": d.row.symbol.line,
                 "end": d.row.symbol.end_line, "signature": d.row.symbol.signature,
                 "rank": round(d.rank, 6)} for d in repo_map.shown]}) + "\n")
        return int(ExitStatus.DONE)
    if not repo_map.ranked:
        env.stdout.write(f"{path or '.'}: no definitions in supported source files\n")
        return int(ExitStatus.DONE)
    left = len(repo_map.ranked) - len(repo_map.shown)
    more = f"; --tokens N for the other {left:,} definitions" if left else ""
    env.stdout.write(
        f"# repo map of {path or '.'}: {len(repo_map.shown):,} of {len(repo_map.ranked):,} "
        f"definitions in {repo_map.files:,} files, best first, ~{repo_map.tokens:,} of "
        f"{tokens:,} tokens{more}\n")
    if repo_map.text:
        env.stdout.write(repo_map.text + "\n")
    if repo_map.skipped:
        names = ", ".join(repo_map.skipped[:5]) + (" …" if len(repo_map.skipped) > 5 else "")
        env.stdout.write(f"(not mapped, over 1 MB: {names})\n")
    return int(ExitStatus.DONE)
