"""The outline against Universal Ctags on the vendored fixtures (bench/codeintel.py's measure)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("ctags") is None, reason="ctags not installed (apt-get install universal-ctags)"
)
BENCH = Path(__file__).resolve().parents[2] / "bench" / "codeintel.py"

# Where ctags itself is wrong on the fixtures, the floor is what a correct outline scores:
# macro_soup.c makes ctags invent ASSERT_TRUE and DECLARE_LIST and lose real_function and
# helper; on express ctags names `res.get` "res", scopes `res.links` inside a function and
# tags a nested `function headers` as top level, and never tags an anonymous
# `req.accepts = function () {…}` (the outline does: precision counts those against it).
# (and tags `var proto = module.exports = function…` as a variable). The corrected figures
# below apply bench/codeintel.py's CORRECTIONS instead. ctags' Lua parser has no scopes and
# tags penlight_blocks.lua's nested `local function inner` (rule L1); its Sh parser reads
# bash_completion.sh's `words=()` as a function (S1) and never tags a one-line
# `local function is_empty(s) return #s == 0 end` (L3). Its TypeScript parser loses the rest of
# zod_overloads.ts's class after `cache!:`, `empty = () => {…}` and `"~check"(…)` (J11-J13);
# its JavaScript parser loses zod_keywords.js's classes after `default(…)`, `.function)` and
# `key: (…) => {` in a method, and never tags `function set(…)` (J14-J17).
FLOORS = {"c": (0.80, 0.80), "javascript": (0.85, 0.65), "lua": (0.85, 0.90), "bash": (0.75, 0.95),
          "typescript": (0.95, 0.75)}  # fmt: skip


def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_codeintel", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_codeintel"] = module
    spec.loader.exec_module(module)
    return module


def test_recall_and_precision_against_ctags_on_the_fixtures() -> None:
    codeintel = bench()
    scores = codeintel.measure([codeintel.FIXTURES])
    compared = {lang: s for lang, s in scores.items() if s.ctags}
    assert set(compared) >= {"python", "javascript", "typescript", "go", "rust", "java", "c",
                             "cpp", "ruby", "csharp", "php", "bash", "kotlin", "lua"}  # fmt: skip
    for language, score in compared.items():
        recall, precision = score.matched / score.ctags, score.matched / score.ours
        floor_recall, floor_precision = FLOORS.get(language, (0.95, 0.9))
        assert recall >= floor_recall, (language, recall, score.missed)
        assert precision >= floor_precision, (language, precision, score.extra)
        assert score.exact == score.viewed, (language, score.exact, score.viewed)


def test_the_corrected_reference_agrees_on_the_fixtures_and_each_rule_is_used() -> None:
    codeintel = bench()
    codeintel.APPLIED.clear()
    scores = codeintel.measure([codeintel.FIXTURES], corrected=True)
    for language in ("c", "javascript", "typescript", "lua", "bash", "csharp"):
        score = scores[language]
        if score.ctags:
            assert score.matched / score.ctags >= 0.97, (language, score.missed)
            assert score.matched / score.ours >= 0.97, (language, score.extra)
    used = {rule for rule, _, _, _ in codeintel.CORRECTIONS if codeintel.APPLIED[rule]}
    assert {"C1", "CS1", "J1", "J2", "J5", "J6", "J7", "J8", "J9", "J11", "J12", "J13", "J14",
            "J15", "J16", "J17", "L1", "L3", "S1"} <= used, codeintel.APPLIED  # fmt: skip


def test_a_macro_call_rule_finds_the_functions_ctags_lost() -> None:
    codeintel = bench()
    soup = codeintel.FIXTURES / "repro" / "macro_soup.c"
    raw = {name for name, _ in codeintel.ctags_definitions(soup, "c")}
    fixed = {name for name, _ in codeintel.ctags_definitions(soup, "c", corrected=True)}
    assert "DECLARE_LIST" in raw and "real_function" not in raw
    assert fixed == {"real_function", "helper", "another"}


def test_rule_j7_reads_the_value_past_a_typescript_type_annotation() -> None:
    # zod's locales: `const error: () => errors.$ZodErrorMap = () => {`; a function type alone
    # is no function, and a parenthesised expression is no arrow
    value = bench().function_value
    assert value("const error: () => Map = () => {", js=False)
    assert value("export const ok = <T>(v: T): Ok<T> => ({ v });", js=False)
    assert value("const make = (params: {\n  data: any;\n}): Issue => {", js=False)
    assert value("var proto = module.exports = function (options) {", js=True)
    assert not value("export const handler: (event: E) => void;", js=False)
    assert not value("const total = (a + b) * 2;", js=False)
    assert not value("const pick = flag ? (a) : b;", js=True)


def test_the_keyword_rules_find_what_ctags_lost_in_a_javascript_class() -> None:
    # each of J14-J17 is needed: without them ctags loses `catch`, `describe` and `finish`,
    # scopes the object's getter `path` in Checked and never tags `set` or what follows `kind`
    codeintel = bench()
    repro = codeintel.FIXTURES / "repro" / "zod_keywords.js"
    raw = {name for name, _ in codeintel.ctags_definitions(repro, "javascript")}
    codeintel.APPLIED.clear()
    fixed = codeintel.ctags_definitions(repro, "javascript", corrected=True)
    assert {"path", "ctx"} <= raw and not raw & {"default", "catch", "finish", "set", "tuple"}
    assert fixed == [("Checked", 14), ("Schema", 1), ("catch", 6), ("check", 15),
                     ("default", 2), ("describe", 9), ("finish", 34), ("kind", 28), ("set", 39),
                     ("tuple", 43)]  # fmt: skip
    assert {rule: codeintel.APPLIED[rule] for rule in ("J14", "J15", "J16", "J17")} == \
        {"J14": 2, "J15": 1, "J16": 1, "J17": 1}


def test_rule_j17_blanks_an_arrow_property_to_a_method_in_the_same_columns() -> None:
    as_method = bench().arrow_property_as_method
    assert as_method("    report: (issue) => {") == "    report  (issue)    {"
    assert as_method("    load: async (a, b) => {") == "    load        (a, b)    {"
    assert as_method("    pick: (a) => a.b,") is None
    assert as_method("    size: 1,") is None
