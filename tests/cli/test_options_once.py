"""No option declared twice: every flag has one help and one type, and a flag two commands take
comes from `normalize/cli/options.py`.

Walks every command typer knows (groups and their callbacks too) in-process, reading
the `typer.Option` each parameter is annotated with.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from typer.models import OptionInfo

from normalize.cli import options
from normalize.cli.app import app


@dataclass(frozen=True)
class Declared:
    """One command's declaration of one long flag."""

    command: str
    flag: str
    help: str | None
    type: str
    info: OptionInfo


def commands(group: typer.Typer,
             path: str = "normalize") -> Iterator[tuple[str, Callable[..., Any]]]:
    """(command path, its function) for every command, group callback and sub-group."""
    callback = group.registered_callback
    if callback is not None and callback.callback is not None:
        yield path, callback.callback
    for command in group.registered_commands:
        assert command.callback is not None
        yield f"{path} {command.name or command.callback.__name__}", command.callback
    for sub in group.registered_groups:
        assert sub.typer_instance is not None
        yield from commands(sub.typer_instance, f"{path} {sub.name}")


def _base(kind: Any) -> str:
    """The type a flag takes, None-ness aside (required is the command's choice)."""
    args = [a for a in typing.get_args(kind) if a is not type(None)]
    return str(args[0] if typing.get_origin(kind) in (typing.Union, type(int | None)) and
               len(args) == 1 else kind)


def declarations(group: typer.Typer) -> list[Declared]:
    found: list[Declared] = []
    for name, function in commands(group):
        hints = typing.get_type_hints(function, include_extras=True)
        for parameter in inspect.signature(function).parameters:
            hint = hints.get(parameter)
            for info in getattr(hint, "__metadata__", ()):
                if not isinstance(info, OptionInfo):
                    continue
                decls = [info.default] if isinstance(info.default, str) else []
                for flag in [*decls, *(info.param_decls or ())]:
                    if flag.startswith("--"):
                        found.append(Declared(name, flag, info.help,
                                              _base(typing.get_args(hint)[0]), info))
    return found


def shared_infos(module: Any) -> set[int]:
    """The ids of the `typer.Option`s a module declares as `Name = Annotated[..., Option]`."""
    return {id(meta) for value in vars(module).values()
            for meta in getattr(value, "__metadata__", ()) if isinstance(meta, OptionInfo)}


def problems(found: list[Declared], shared: set[int]) -> list[str]:
    by_flag: dict[str, list[Declared]] = {}
    for each in found:
        by_flag.setdefault(each.flag, []).append(each)
    out: list[str] = []
    for flag, uses in sorted(by_flag.items()):
        meanings = {(use.help, use.type) for use in uses}
        if len(meanings) > 1:
            out.append(f"{flag}: {len(meanings)} helps or types in "
                       f"{', '.join(sorted({u.command for u in uses}))}")
        if len({u.command for u in uses}) > 1:
            out += [f"{flag} of `{u.command}` is declared in place: take it from "
                    f"normalize/cli/options.py" for u in uses if id(u.info) not in shared]
    return out


def test_every_flag_has_one_meaning_and_a_shared_one_comes_from_options() -> None:
    found = declarations(app)
    assert len({d.command for d in found}) > 30  # the walk reached the groups' commands
    assert not problems(found, shared_infos(options)), "\n".join(
        problems(found, shared_infos(options)))


def _synthetic(first: Any, second: Any) -> typer.Typer:
    """Two commands, each taking `--shape` as declared by `first` and `second`."""
    made = typer.Typer()
    for name, kind in (("one", first), ("two", second)):
        def command(value: Any = None) -> None:
            del value

        command.__annotations__ = {"value": kind, "return": None}  # (this module's are text)
        made.command(name)(command)
    return made


def test_the_walk_refuses_a_flag_declared_twice_or_meaning_two_things() -> None:
    """Synthetic apps: each way of breaking the rule is named; the shared way passes."""
    shared = Annotated[str | None, typer.Option("--shape", help="The shape.")]
    again = Annotated[str | None, typer.Option("--shape", help="The shape.")]
    other = Annotated[str | None, typer.Option("--shape", help="Another shape.")]
    number = Annotated[int | None, typer.Option("--shape", help="The shape.")]
    ids = {id(shared.__metadata__[0])}  # type: ignore[attr-defined]

    assert problems(declarations(_synthetic(shared, shared)), ids) == []
    assert problems(declarations(_synthetic(shared, again)), ids) == [
        "--shape of `normalize two` is declared in place: take it from "
        "normalize/cli/options.py"]
    assert problems(declarations(_synthetic(shared, other)), ids)[0] == (
        "--shape: 2 helps or types in normalize one, normalize two")
    assert problems(declarations(_synthetic(shared, number)), ids)[0] == (
        "--shape: 2 helps or types in normalize one, normalize two")
