"""Patterns real code uses that the outline once missed, on vendored real files and reproductions.

tests/fixtures/code/real/ holds real files (licences in its README);
tests/fixtures/code/repro/ holds minimal reproductions of named projects' patterns.
"""

from __future__ import annotations

from pathlib import Path

from normalize.tools.code import Symbol, find_symbol, find_symbols, outline

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"


def symbols_of(name: str) -> list[Symbol]:
    path = FIXTURES / name
    found = outline(path, path.read_text(encoding="utf-8"))
    assert found is not None
    return found


def everything(symbols: list[Symbol]) -> list[Symbol]:
    return [s for top in symbols for s in top.walk()]


def names(symbols: list[Symbol]) -> set[str]:
    return {s.name for s in everything(symbols)}


# --- JavaScript: assignment-defined functions and exports ---------------------------------


def test_express_response_methods_are_listed() -> None:
    symbols = symbols_of("real/express_response.js")
    status = find_symbol(symbols, "res.status")
    assert status is not None
    assert (status.owner, status.kind, status.line) == ("res", "method", 67)
    assert status.signature == "res.status = function status(code)"
    assert find_symbol(symbols, "status") is status  # `view lib/response.js/status`
    assert {"send", "json", "jsonp", "sendFile", "redirect", "render", "cookie"} <= names(symbols)


def test_prototype_methods_are_addressed_by_their_type() -> None:
    symbols = symbols_of("real/express_view.js")
    lookup = find_symbol(symbols, "View/lookup")
    assert lookup is not None
    assert (lookup.name, lookup.owner, lookup.line, lookup.end_line) == ("lookup", "View", 104, 123)
    assert {"View", "lookup", "render", "resolve", "tryStat"} <= names(symbols)


def test_commonjs_and_es_exports() -> None:
    symbols = symbols_of("repro/commonjs.js")
    found = {(s.name, s.owner, s.kind) for s in everything(symbols)}
    assert ("status", "res", "method") in found
    assert ("lookup", "View", "method") in found
    assert ("compileETag", "", "function") in found  # exports.x = function…
    assert {("a", "", "function"), ("b", "", "function"), ("c", "", "function")} <= found
    assert ("d", "", "function") not in found  # module.exports = {d: 42}: not a function
    assert ("default", "", "function") in found  # export default function () {}
    assert "etag" not in names(symbols)  # exports.etag = a call's result: not a definition


# --- C: macro-wrapped prototypes, declarator macros, macro soup -----------------------------


def test_cjson_prototypes_wrapped_in_an_export_macro() -> None:
    symbols = symbols_of("repro/cjson_header.h")
    parse = find_symbol(symbols, "cJSON_Parse")
    assert parse is not None
    assert parse.kind == "declaration"
    assert parse.signature == "CJSON_PUBLIC(cJSON *) cJSON_Parse(const char *value)"
    expected = {"cJSON_Version", "cJSON_Parse", "cJSON_ParseWithLengthOpts", "cJSON_Delete",
                "cJSON_IsTrue", "cJSON_malloc"}  # fmt: skip
    assert expected <= names(symbols)
    assert "CJSON_PUBLIC" in names(symbols)  # the macro's own #define is still a symbol


def test_a_calling_convention_macro_is_not_the_name() -> None:
    symbols = symbols_of("repro/cjson_tests.c")
    main = find_symbol(symbols, "main")
    assert main is not None
    assert (main.line, main.end_line, main.signature) == (20, 28, "int CJSON_CDECL main(void)")
    assert [s.name for s in symbols] == [
        "cjson_array_foreach_should_loop_over_arrays",
        "cjson_get_object_item_should_get_object_items",
        "main",
    ]


def test_macro_statements_without_semicolons_invent_nothing() -> None:
    symbols = symbols_of("repro/macro_soup.c")
    assert [(s.name, s.line, s.end_line) for s in symbols] == [
        ("real_function", 6, 9),
        ("helper", 16, 20),
        ("another", 22, 22),
    ]


# --- C++: ERROR recovery, specialisations, macros around the name ----------------------------


def test_cpp_recovers_symbols_inside_an_error_node() -> None:
    symbols = symbols_of("repro/fmt_format.h")
    found = {s.name for s in everything(symbols)}
    assert {"v11", "format_error", "buffer", "size", "data", "parse_align", "write"} <= found
    assert "FMT_API" not in found and "FMT_NOEXCEPT" not in found


def test_specialisation_names_are_on_one_line() -> None:
    symbols = symbols_of("repro/fmt_format.h")
    spec = find_symbol(symbols, "formatter")
    assert spec is not None
    assert spec.name == "formatter<std::basic_string<Char>, Char>"
    assert "\n" not in spec.signature


def test_a_macro_after_the_declarator_is_not_the_name() -> None:
    symbols = symbols_of("repro/fmt_format.h")
    size = find_symbol(symbols, "buffer/size")
    assert size is not None
    assert size.signature == "size_t size() const FMT_NOEXCEPT"
    clear = find_symbol(symbols, "buffer/clear")
    assert clear is not None and clear.signature == "void clear() FMT_NOEXCEPT"


# --- Rust: impls for references are named by the type ---------------------------------------


def test_rust_impl_for_a_mutable_reference_is_named_by_its_type() -> None:
    symbols = symbols_of("repro/ripgrep_sink.rs")
    impl = next(s for s in symbols if s.kind == "impl")
    assert impl.name == "P"
    build = find_symbol(symbols, "P/build")
    assert build is not None and build.line == 3


# --- ambiguity and doc comments ---------------------------------------------------------------


def test_click_lookup_default_prefers_the_implementation_to_overload_stubs() -> None:
    symbols = symbols_of("real/click_core.py")
    found = find_symbols(symbols, "Context/lookup_default")
    assert [(s.kind, s.line) for s in found] == [("method", 658), ("overload", 646),
                                                  ("overload", 652)]  # fmt: skip
    only = find_symbols(symbols, "Context/lookup_default@647")
    assert [s.line for s in only] == [646]


def test_doc_comments_belong_to_their_symbol() -> None:
    go = find_symbol(symbols_of("sample.go"), "Server/Start")
    assert go is not None and (go.doc_line, go.line) == (23, 24)
    assert go.doc == "Start begins accepting connections."
    rust = find_symbol(symbols_of("sample.rs"), "Point")
    assert rust is not None and rust.doc == "A point in the plane."
    assert rust.doc_line < rust.line
    jsdoc = find_symbol(symbols_of("real/express_response.js"), "status")
    assert jsdoc is not None and jsdoc.doc == "Set status `code`."
    assert jsdoc.doc_line == 59  # a JSDoc block, then one blank line, then the function
    javadoc = find_symbol(symbols_of("sample.java"), "Account")
    assert javadoc is not None and (javadoc.doc_line, javadoc.line) == (6, 7)
    assert javadoc.doc == "A bank account fixture for the code tools."
    python = find_symbol(symbols_of("sample.py"), "Inventory")
    assert python is not None and python.doc_line == 0  # Python's docs are docstrings


def test_named_functions_passed_to_top_level_calls_are_listed() -> None:
    symbols = symbols_of("real/express_request.js")
    host = find_symbol(symbols, "host")
    assert host is not None and host.kind == "function" and host.line == 454
    assert {"protocol", "secure", "ip", "ips", "subdomains", "path", "hostname", "xhr"} <= names(
        symbols
    )
    assert {"accepts", "acceptsEncodings", "get", "range", "param", "is"} <= names(symbols)


def test_braces_that_balance_only_branch_by_branch() -> None:
    """node-addon-api's napi-inl.h: an `#ifndef` opens a block another `#ifndef` closes."""
    symbols = symbols_of("repro/conditional_braces.h")
    found = [(s.name, s.owner, s.line) for s in everything(symbols)]
    assert found == [
        ("Napi", "", 4),
        ("NewOrCopy", "Buffer", 6),
        ("NewOrCopy", "Buffer", 20),
        ("Copy", "Buffer", 42),
        ("operator napi_env", "Env", 47),
        ("operator bool", "Value", 51),
    ]


def test_definitions_inside_a_top_level_error_are_recovered_in_every_language() -> None:
    """Pygments' Ruby stress test: a heredoc puzzle turns most of the file into an ERROR node."""
    symbols = symbols_of("stress/pygments_example.rb")
    foo = find_symbol(symbols, "Foo")
    assert foo is not None and (foo.line, foo.end_line) == (28, 37)
    assert [c.name for c in foo.children] == ["blub", "another_way_to_get_class"]


def test_cpp_test_macros_are_named_by_suite_and_test() -> None:
    symbols = symbols_of("repro/gtest_cases.cc")
    assert [(s.owner, s.name, s.kind, s.signature) for s in symbols] == [
        ("StackTest", "PushesOne", "test", "TEST(StackTest, PushesOne)"),
        ("StackFixture", "PopsLast", "test", "TEST_F(StackFixture, PopsLast)"),
        ("StackTest", "Empty", "test", "TEST(StackTest, Empty)"),
    ]
    empty = find_symbol(symbols, "StackTest/Empty")
    assert empty is not None and (empty.line, empty.end_line) == (13, 15)


def test_a_variable_assigned_through_an_export_chain_is_a_function() -> None:
    symbols = symbols_of("repro/chained_exports.js")
    proto = find_symbol(symbols, "proto")
    assert proto is not None
    assert (proto.kind, proto.line, proto.end_line) == ("function", 2, 7)
    handler = find_symbol(symbols, "handler")
    assert handler is not None and (handler.kind, handler.line) == ("function", 9)
    assert "router" not in {s.name for s in symbols}  # inside proto's body, not at file level
    assert find_symbol(symbols, "proto/use") is not None


# --- Bash: bash-completion's definitions ----------------------------------------------------


def test_bash_functions_in_lists_and_conditionals_are_listed() -> None:
    # the shapes of bash-completion: `_f() {…} && complete -F _f f`, and a function per OS
    symbols = symbols_of("repro/bash_completion.sh")
    assert [(s.name, s.line) for s in everything(symbols)] == [
        ("_mytool", 3), ("_jobs_list", 9), ("_groups_list", 13), ("_jobs_list", 18),
        ("_after", 24)
    ]  # fmt: skip


def test_a_bash_parse_error_loses_only_the_function_it_is_in() -> None:
    # bash-completion's `[[ $cur =~ …\[([^]]*)$ ]]` defeats tree-sitter-bash: every function
    # after it was read as one long string
    symbols = symbols_of("repro/bash_regex_error.sh")
    assert {"_before", "_variables", "_after", "_last"} <= names(symbols)
    last, unread = find_symbol(symbols, "_last"), find_symbol(symbols, "_variables")
    assert last is not None and (last.line, last.end_line) == (20, 23)
    # the function tree-sitter cannot read runs to the first `}` at its indentation
    assert unread is not None and (unread.line, unread.end_line) == (6, 12)


def test_an_all_caps_return_type_is_not_taken_for_a_calling_convention() -> None:
    # lz4: `static U16 LZ4_read16(…)`, `LZ4_FORCE_INLINE U32 LZ4_hash4(…)`; cJSON's
    # `int CJSON_CDECL main` still has its macro blanked
    symbols = symbols_of("repro/lz4_types.c")
    functions = {s.name: s.signature for s in everything(symbols) if s.kind == "function"}
    assert functions == {
        "read16": "static U16 read16(const void* memPtr)",
        "hash4": "FORCE_INLINE U32 hash4(U32 sequence)",
        "main": "int CJSON_CDECL main(void)",
        # xxhash: `XXH_PUBLIC_API XXH_errorcode XXH32_update (…)`, a space before `(`
        "hash_feed": "HASH_API hash_status hash_feed (int value)",
    }


def test_typedefs_of_pointers_functions_and_fixed_width_names_are_listed() -> None:
    # lz4: `typedef int (*compressFunc_t)(…)`, and the MSVC fallbacks for <stdint.h>
    symbols = symbols_of("repro/lz4_typedefs.c")
    assert [(s.name, s.kind, s.line) for s in everything(symbols)] == [
        ("int16_t", "type", 2), ("uint32_t", "type", 3), ("compressFunc_t", "type", 5),
        ("PSTR", "type", 6),
    ]  # fmt: skip


def test_lua_functions_in_file_level_do_and_if_blocks_are_listed() -> None:
    # penlight: `do local function _parse … function array2d.parse_range … end`
    symbols = symbols_of("repro/penlight_blocks.lua")
    assert [(s.name, s.owner, s.line) for s in everything(symbols)] == [
        ("_parse", "", 4), ("parse_range", "array2d", 8), ("unpack", "array2d", 14)
    ]  # fmt: skip


def test_lua_functions_in_table_constructors_and_metatables_are_listed() -> None:
    # penlight: `local DataMT = { column_by_name = function(self, name) … }` (data.lua),
    # `setmetatable(seq, { __call = function … })` (seq.lua), `return setmetatable(pretty, {…})`
    symbols = symbols_of("repro/penlight_metatables.lua")
    assert [(s.name, s.owner, s.kind, s.line, s.end_line) for s in everything(symbols)] == [
        ("push", "StackMT", "method", 4, 6), ("__len", "StackMT.meta", "method", 8, 8),
        ("is_empty", "", "function", 13, 13), ("__call", "Stack", "method", 18, 20),
        ("__index", "Queue", "method", 25, 27), ("new", "Stack", "method", 30, 33),
        ("__tostring", "Stack", "method", 36, 38),
    ]  # fmt: skip
    call = find_symbol(symbols, "Stack/__call")  # `view lib.lua/Stack/__call`
    assert call is not None and call.signature == "__call = function(cls, ...)"
    assert find_symbol(symbols, "StackMT/push") is not None


def test_ruby_aliases_are_definitions_of_the_new_name() -> None:
    # thor: `alias_method :add_file, :create_file`
    symbols = symbols_of("repro/thor_aliases.rb")
    found = [(s.name, s.kind, s.line) for s in everything(symbols) if s.kind != "module"]
    assert found == [("Thor", "class", 1), ("create_file", "function", 3),
                     ("add_file", "alias", 6), ("template_file", "alias", 7)]  # fmt: skip
    alias = find_symbol(symbols, "Thor/Actions/add_file")
    assert alias is not None and alias.signature == "alias_method :add_file, :create_file"


def test_csharp_destructors_operators_aliases_and_conditional_parameters() -> None:
    # pythonnet: `~PyObject()`, `operator ==`, `using MaybeMethodInfo = MaybeMethodBase<…>;`,
    # and an `#if` inside `Finalizer.AddFinalizedObject`'s parameter list
    symbols = symbols_of("repro/pythonnet_members.cs")
    found = [(s.name, s.kind, s.line) for s in everything(symbols) if s.kind != "property"]
    assert found == [
        ("HandleList", "type", 2), ("Demo.Interop", "namespace", 4), ("Handle", "class", 6),
        ("Handle", "constructor", 8), ("~Handle", "method", 10), ("operator==", "method", 14),
        ("operator!=", "method", 15), ("Dispose", "method", 17), ("Pool", "class", 20),
        ("Track", "method", 22), ("Drain", "method", 31),
    ]  # fmt: skip
    destructor = find_symbol(symbols, "Handle/~Handle")
    assert destructor is not None and destructor.signature == "~Handle()"
    equals = find_symbol(symbols, "Handle/operator==")
    assert equals is not None and equals.signature.endswith("operator ==(Handle a, Handle b)")


def test_typescript_overload_stubs_yield_to_the_implementation() -> None:
    # zod: `format(): …;` `format<U>(mapper…): …;` then `format(_mapper?: any) {…}`, and
    # `"~validate"(data: unknown) {…}`
    symbols = symbols_of("repro/zod_overloads.ts")
    found = [(s.name, s.kind, s.line) for s in everything(symbols)]
    assert found == [
        ("Report", "class", 1), ("empty", "method", 4),
        ("summary", "overload", 8), ("summary", "overload", 9), ("summary", "method", 10),
        ("~check", "method", 14), ("Shape", "interface", 19), ("area", "method", 20),
        ("area", "method", 21), ("clamp", "overload", 24), ("clamp", "overload", 25),
        ("clamp", "function", 26), ("external", "declaration", 30),
    ]  # fmt: skip
    implementation = find_symbol(symbols, "Report/summary")
    assert implementation is not None and (implementation.line, implementation.end_line) == (10, 12)
    assert [s.line for s in find_symbols(symbols, "clamp")] == [26, 24, 25]
    check = find_symbol(symbols, "Report/~check")
    assert check is not None and check.signature.startswith('"~check"(value: unknown)')


def test_ruby_class_self_blocks_hold_methods_of_the_enclosing_class() -> None:
    # thor: `class << self` in `base.rb`, `command.rb`: no class named `self`
    symbols = symbols_of("repro/thor_singleton.rb")
    found = [(s.name, s.kind, s.line) for s in everything(symbols)]
    assert found == [("Registry", "class", 1), ("lookup", "method", 3),
                     ("entries", "method", 7), ("size", "method", 12)]  # fmt: skip
    lookup = find_symbol(symbols, "Registry/lookup")
    assert lookup is not None and (lookup.line, lookup.end_line) == (3, 5)
