"""Loading workflow files (TOML, via the standard library's tomllib) into a WorkflowSpec.

Every problem is reported before anything runs, as one `FILE:LINE:COL:
message` line naming the key, a file past the bounds of `workflow.bounds`
(size, UTF-8, nesting, string length, nested files) too. The format is the
README's "Workflows"; its tables of keys are `workflow.schema`. Reading is
here; the checks are in `workflow.check` (any table), `workflow.validate`
(steps and states) and `workflow.build` (the `[workflow]` table, the spec).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from normalize.errors import ConfigError
from normalize.workflow import parsed
from normalize.workflow.bounds import (
    MAX_NESTED_FILES,
    LimitError,
    check_values,
    read_source,
    too_deep,
)
from normalize.workflow.build import Source, build_spec
from normalize.workflow.check import Checker
from normalize.workflow.spec import WorkflowSpec
from normalize.workflow.validate import NameCheck, Plugins


def parse_toml(path: Path) -> tuple[dict[str, Any], str]:
    """The file's data and text; a syntax error is `FILE:LINE:COL: message`."""
    source = read_source(path)
    return parse_toml_text(source, str(path)), source


def parse_toml_text(source: str, label: str) -> dict[str, Any]:
    """TOML text as plain data; a syntax error is `LABEL:LINE:COL: message`.

    `tomllib` parses (ten times faster than tomlkit on a long workflow) and
    words every syntax error with its line and column. Values nested too deep
    for the parser are an error at their place, as are those past the bounds
    (`workflow.bounds`). A text parsed before is not parsed again (`workflow.parsed`).
    """
    data = parsed.lookup(source)
    kept = data is not None
    if data is None:
        data = _parse(source, label)

    def fail(key_path: str, message: str) -> ConfigError:
        return Checker(Path(label), source).fail(key_path, message)

    check_values(data, source, label, fail)
    if not kept:
        parsed.keep(source, data)
    return data


def _parse(source: str, label: str) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(source)
    except tomllib.TOMLDecodeError as exc:
        raise _syntax_error(source, label, exc) from None
    except RecursionError:
        raise too_deep(source, label) from None


def _syntax_error(source: str, label: str, exc: ValueError) -> ConfigError:
    """The error of invalid TOML in `tomllib`'s words, at its line and column.

    One parser words every syntax error, whatever version of tomlkit is installed
    (tomlkit 0.15 raised its own error with no reason, at the wrong line, for a
    table declared twice); tomlkit only edits documents that already parsed.
    """
    where = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
    text = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", str(exc))
    if where:
        line, col = int(where.group(1)), int(where.group(2))
    else:  # at the end of the document
        lines = source.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
    return ConfigError(f"invalid TOML: {text}", file=label, line=line, col=col)


def load_workflow(
    path: Path | str,
    *,
    overrides: Mapping[str, Any] | None = None,
    is_condition: NameCheck | None = None,
    is_step_kind: NameCheck | None = None,
    is_source: NameCheck | None = None,
) -> WorkflowSpec:
    """Parse and validate a workflow file; raise ConfigError at the first problem.

    Plugin checks default to the registries (`normalize.conditions`,
    `normalize.steps`, `normalize.sources`).
    """
    return _Loads()(Path(path), Plugins(is_condition, is_step_kind, is_source), (), overrides)


class _Loads:
    """Loads one workflow file and the files nested in it, `MAX_NESTED_FILES` of them at most."""

    def __init__(self) -> None:
        self.nested = 0

    def __call__(self, path: Path, plugins: Plugins, stack: tuple[Path, ...],
                 overrides: Mapping[str, Any] | None = None) -> WorkflowSpec:
        """Load one file; `stack` holds the files that include it (nested workflows)."""
        if stack:
            self.nested += 1
            if self.nested > MAX_NESTED_FILES:
                raise LimitError(f"more than {MAX_NESTED_FILES} nested workflow files in all "
                                 f"(each inclusion counts)")
        data, text = parse_toml(path)
        source = Source(path, data, Checker(path, text), stack)
        return build_spec(source, overrides=overrides, plugins=plugins, load=self)


def load_workflow_text(
    source: str,
    *,
    label: str = "<workflow>",
    base_dir: Path | str | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> WorkflowSpec:
    """Validate workflow TOML given as text (errors say `LABEL:LINE:COL`).

    Nested `workflow = "..."` files are found relative to `base_dir` (default:
    the current directory).
    """
    path = Path(base_dir or ".") / label
    data = parse_toml_text(source, label)
    built = Source(path, data, Checker(Path(label), source), (), label)
    return build_spec(built, overrides=overrides, plugins=Plugins(), load=_Loads())
