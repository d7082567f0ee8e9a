"""The complexity gate: no function in `normalize/` over 15, except the ones listed, which may
only get simpler.

Complexity is counted by `normalize.tools.analyze` (the counter `normalize analyze
--complexity` and `run health` use: an `ast` walk, 1 + each `if`, loop, `except`,
`case`, conditional expression, comprehension `if` and extra `and`/`or` operand;
nested functions counted on their own, as `outer.inner`). The list works like the
import graph's exceptions: a function that is no longer over the limit, or gone, must
leave it ("delete it"), and a listed function may not grow past its number, so the
list can only shrink. Split a function at its seams rather than raise a number.
"""

from __future__ import annotations

import ast
from pathlib import Path

import normalize
from normalize.tools.analyze import function_complexities

LIMIT = 15
PACKAGE = Path(normalize.__file__).resolve().parent

# "path:Qualified.name" (path from the repository root) -> its complexity when listed: a ceiling
EXCEPTIONS: dict[str, int] = {
    "normalize/checkpoints/changes.py:parse_patch": 17,
    "normalize/checkpoints/record.py:WorkspaceCheckpoints._take": 25,
    "normalize/checkpoints/report.py:group_turns": 16,
    "normalize/checkpoints/shadow.py:ShadowRepo.snapshot": 37,
    "normalize/cli/app.py:main": 22,
    "normalize/cli/describe.py:describe": 17,
    "normalize/cli/listing.py:shown_rows": 17,
    "normalize/cli/render.py:LiveRenderer._apply": 27,
    "normalize/cli/verbs.py:run_verb": 16,
    "normalize/drivers/harness.py:HarnessDriver.from_config": 16,
    "normalize/drivers/state_machine.py:StateMachineDriver._decide": 21,
    "normalize/drivers/workflow.py:WorkflowDriver._step": 19,
    "normalize/drivers/workflow.py:WorkflowDriver.on_result": 18,
    "normalize/engine.py:Engine.execute": 27,
    "normalize/execution/cache.py:build_preview.render": 16,
    "normalize/intents/__init__.py:parse_command": 19,
    "normalize/intents/prose.py:correct": 25,
    "normalize/mcp/config.py:parse_server": 30,
    "normalize/providers/anthropic.py:_map_error": 16,
    "normalize/providers/anthropic_http.py:_events": 22,
    "normalize/providers/base.py:_run_once": 16,
    "normalize/providers/base.py:complete": 23,
    "normalize/providers/openai_compat.py:_events": 20,
    "normalize/serial.py:_codec": 18,
    "normalize/store/index.py:read": 16,
    "normalize/store/taskstore.py:TaskStore.resolve": 16,
    "normalize/testing/servers.py:_Handler.do_POST": 22,
    "normalize/tools/analyze.py:AnalyzeTool.run": 20,
    "normalize/tools/analyze.py:_tally": 19,
    "normalize/tools/base.py:ToolRegistry.execute": 18,
    "normalize/tools/code/languages.py:_c_function_name": 24,
    "normalize/tools/code/languages.py:_js_assignment": 27,
    "normalize/tools/code/macros.py:blank_macros": 16,
    "normalize/tools/code/repomap.py:_weight": 16,
    "normalize/tools/code/repomap.py:rank": 17,
    "normalize/tools/grep.py:_report": 21,
    "normalize/tools/run.py:_pump": 21,
    "normalize/tools/skeleton.py:SkeletonTool._directory": 18,
    "normalize/tools/spawn.py:parse_spawn": 21,
    "normalize/tools/test.py:TestTool.run": 17,
    "normalize/tools/test.py:_pytest_result": 20,
    "normalize/workflow/bounds.py:_deep_bracket": 16,
    "normalize/workflow/conditions.py:evaluate": 19,
    "normalize/workflow/plan.py:_state": 16,
    "normalize/workflow/plan.py:_steps": 22,
    "normalize/workflow/validate.py:Validator.condition": 18,
}


def measure(sources: dict[str, str]) -> dict[str, int]:
    """`path:name` -> complexity of every function of `sources` (path -> its text)."""
    found: dict[str, int] = {}
    for path, text in sources.items():
        for function in function_complexities(ast.parse(text), path):
            key = f"{path}:{function.name}"
            found[key] = max(found.get(key, 0), function.complexity)
    return found


def problems(measured: dict[str, int], exceptions: dict[str, int]) -> list[str]:
    """What the gate refuses: a function over the limit that is not listed, a listed one that
    grew past its number, and a listed one that is gone or no longer over the limit."""
    out = [f"{key}: complexity {n} > {LIMIT} (split it at its seams)"
           for key, n in sorted(measured.items()) if n > LIMIT and key not in exceptions]
    out += [f"{key}: complexity {measured[key]}, listed at {ceiling}: it may only get simpler"
            for key, ceiling in sorted(exceptions.items())
            if measured.get(key, 0) > ceiling]
    out += [f"{key}: complexity {measured.get(key, 'gone')}, no longer over {LIMIT}: delete it "
            f"from EXCEPTIONS" for key in sorted(exceptions) if measured.get(key, 0) <= LIMIT]
    return out


def package_sources() -> dict[str, str]:
    root = PACKAGE.parent
    return {path.relative_to(root).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(PACKAGE.rglob("*.py"))}


def test_no_function_is_over_the_limit_but_the_listed_ones_which_only_shrink() -> None:
    found = problems(measure(package_sources()), EXCEPTIONS)
    assert not found, "\n".join(found)


def _branches(count: int) -> str:
    body = "".join(f"    if x == {n}:\n        x += 1\n" for n in range(count))
    return f"def wide(x):\n{body}    return x\n"


def test_the_gate_fails_on_a_new_function_a_grown_one_and_a_stale_entry() -> None:
    """Synthetic modules: each way of breaking the gate is named."""
    measured = measure({"m.py": _branches(15) + "\n" + _branches(14).replace("wide", "fine")
                        + "\nclass C:\n    def m(self, x):\n        return x\n"})
    assert measured["m.py:wide"] == 16 and measured["m.py:fine"] == 15
    assert measured["m.py:C.m"] == 1
    assert problems(measured, {}) == ["m.py:wide: complexity 16 > 15 (split it at its seams)"]
    assert problems(measured, {"m.py:wide": 16}) == []
    assert problems(measured, {"m.py:wide": 15}) == [
        "m.py:wide: complexity 16, listed at 15: it may only get simpler"]
    assert problems(measured, {"m.py:wide": 16, "m.py:fine": 20, "m.py:gone": 30}) == [
        "m.py:fine: complexity 15, no longer over 15: delete it from EXCEPTIONS",
        "m.py:gone: complexity gone, no longer over 15: delete it from EXCEPTIONS"]


def test_the_counter_counts_each_kind_of_branch() -> None:
    source = ("def f(xs, a, b, c):\n"
              "    for x in xs:\n"                        # +1
              "        while a and b or c:\n"             # +1, +2 (and, or)
              "            a = 1 if x else 2\n"           # +1
              "    try:\n        pass\n"
              "    except ValueError:\n        pass\n"    # +1
              "    match a:\n"
              "        case 1:\n            pass\n"       # +1
              "        case _:\n            pass\n"       # +1
              "    def inner():\n"                        # counted on its own
              "        return [y for y in xs if y]\n"     # +1 (the comprehension's `if`)
              "    return inner\n")
    measured = measure({"k.py": source})
    assert measured["k.py:f"] == 1 + 1 + 1 + 2 + 1 + 1 + 1 + 1
    assert measured["k.py:f.inner"] == 2

