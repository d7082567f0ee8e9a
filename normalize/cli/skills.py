"""`normalize skills list|show|check`: the Agent Skills a run here would use, and checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from normalize.cli.console import Environment, fail
from normalize.errors import NormalizeError, UsageError

if TYPE_CHECKING:
    from normalize.skills.catalog import Catalog


def catalog_for(workspace: Path | None) -> Catalog:
    """What a run in `workspace` would find (project skills only when trusted)."""
    from normalize.homes import config_home
    from normalize.permissions import trust_check
    from normalize.skills.catalog import discover

    root = (workspace or Path.cwd()).resolve()
    if not root.is_dir():
        raise UsageError(f"--workspace {workspace}: not a directory")
    return discover(root, config_dir=config_home(), home=Path.home(), trusted=trust_check())


def _notices(env: Environment, catalog: Catalog) -> None:
    for notice in catalog.notices:
        env.stderr.write(f"normalize: {notice}\n")
    env.stderr.flush()


def skills_list(env: Environment, *, workspace: Path | None, json_output: bool) -> int:
    try:
        catalog = catalog_for(workspace)
    except NormalizeError as exc:
        return fail(env, exc)
    skills = sorted(catalog.skills.values(), key=lambda s: s.name)
    if json_output:
        env.stdout.write(json.dumps([{"name": s.name, "description": s.description,
                                      "scope": s.scope, "file": str(s.file)}
                                     for s in skills]) + "\n")
    else:
        for skill in skills:
            text = skill.description if len(skill.description) <= 80 else \
                skill.description[:79] + "…"
            env.stdout.write(f"{skill.name:<24} {skill.scope:<7} {text}\n")
        if not skills:
            env.stdout.write("no skills (.agents/skills/NAME/SKILL.md in the project, "
                             "~/.agents/skills/ for yours)\n")
    _notices(env, catalog)
    return 0


def skills_show(env: Environment, name: str, *, workspace: Path | None) -> int:
    try:
        catalog = catalog_for(workspace)
        skill = catalog.get(name)
        if skill is None:
            known = ", ".join(sorted(catalog.skills)) or "none"
            raise UsageError(f"no skill {name!r} here (known: {known})")
    except NormalizeError as exc:
        return fail(env, exc)
    env.stdout.write(f"{skill.name} ({skill.scope}, {skill.file})\n{skill.description}\n\n"
                     f"{skill.body()}\n")
    resources = skill.resources()
    if resources:
        env.stdout.write("\nresources:\n" + "".join(f"  {r}\n" for r in resources))
    return 0


def _named(path: Path) -> list[Path]:
    """The skill directories a `skills check PATH` names: a skill (its folder or its SKILL.md),
    or a folder of skills."""
    if path.name == "SKILL.md":
        path = path.parent
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if (path / "SKILL.md").exists() or not path.is_dir() or \
            not any(p.is_dir() for p in path.iterdir()):
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir())


def skills_check(env: Environment, paths: list[Path], *, workspace: Path | None) -> int:
    """Check skills as the specification requires: FILE:LINE problems, exit 1 when any."""
    from normalize.skills import check
    from normalize.skills.catalog import project_skill_dirs, user_skill_dirs

    try:
        dirs = [d for path in paths for d in _named(path)]
        if not paths:
            from normalize.homes import config_home

            root = (workspace or Path.cwd()).resolve()
            dirs = project_skill_dirs(root) + user_skill_dirs(config_home(), Path.home())
    except (NormalizeError, OSError) as exc:
        return fail(env, exc if isinstance(exc, NormalizeError) else UsageError(str(exc)))
    bad = 0
    for directory in dirs:
        problems = check(directory)
        bad += bool(problems)
        for problem in problems:
            env.stdout.write(f"{problem}\n")
        if not problems:
            env.stdout.write(f"ok {directory}\n")
    if not dirs:
        env.stdout.write("no skills to check\n")
    return 1 if bad else 0
