"""Per-language rules for Ruby, C#, PHP, Bash, Kotlin, Swift, Scala and Lua."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from normalize.tools.code.walker import Def, Handler, Rules, Walker, head_end, simple

if TYPE_CHECKING:
    from tree_sitter import Node

KindOf = Callable[["Node", "Walker"], str]


def shaped(
    kind: str | KindOf,
    *,
    members: bool = False,
    name_types: frozenset[str] = frozenset(),
    body_types: frozenset[str] = frozenset(),
    head_types: frozenset[str] = frozenset(),
    default_name: str = "",
) -> Handler:
    """A handler for definitions whose name or body is not always a field.

    The name is the `name` field or the first child of `name_types` (else
    `default_name`); the body the `body` field or the first child of
    `body_types`; the header ends at the body, or after the last child of
    `head_types` when there is no body. `kind` may be worked out from the node.
    """

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        name = node.child_by_field_name("name") or _child(node, name_types)
        label = walker.text(name) if name is not None else default_name
        if not label:
            return []
        body = node.child_by_field_name("body") or _child(node, body_types)
        end = head_end(node, body)
        if body is None and head_types:
            heads = [c for c in node.children if c.type in head_types]
            end = heads[-1].end_byte if heads else end
        found = kind if isinstance(kind, str) else kind(node, walker)
        return [Def(node, found, label, end, members=body if members else None)]

    return handle


def _child(node: Node, types: frozenset[str]) -> Node | None:
    return next((c for c in node.children if c.type in types), None) if types else None


def _keyword_kind(keywords: dict[str, str], default: str) -> KindOf:
    """The kind named by a keyword child or a modifier (`interface`, `struct`, `enum class`)."""

    def kind_of(node: Node, walker: Walker) -> str:
        for child in node.children:
            if child.type in keywords:
                return keywords[child.type]
            if child.type == "modifiers":
                words = walker.text(child).split()
                for word in words:
                    if word in keywords:
                        return keywords[word]
            if child.is_named and child.type not in ("modifiers", "visibility_modifier"):
                break
        return default

    return kind_of


# --- Ruby -------------------------------------------------------------------


def _ruby_constant(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    left = node.child_by_field_name("left")
    if left is None or left.type != "constant":
        return []
    return [Def(node, "constant", walker.text(left), node.end_byte)]


def _ruby_alias(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`alias add_file create_file` and `alias_method :add_file, :create_file`: the new name."""
    del scope
    if node.type == "alias":
        name = node.child_by_field_name("name")
    else:
        method, args = node.child_by_field_name("method"), node.child_by_field_name("arguments")
        if method is None or walker.text(method) != "alias_method" or args is None:
            return []
        name = next(iter(args.named_children), None)
    if name is None or name.type not in ("identifier", "simple_symbol", "constant"):
        return []
    return [Def(node, "alias", walker.text(name).lstrip(":"), node.end_byte)]


RUBY = Rules(
    handlers={
        "alias": _ruby_alias,
        "call": _ruby_alias,
        "module": simple("module", members=True),
        "class": simple("class", members=True),
        "method": simple("function"),
        "singleton_method": simple("function"),
        "assignment": _ruby_constant,
    },
    # `class << self … end` is no class: its methods are the enclosing class's singleton methods
    transparent=frozenset({"body_statement", "singleton_class"}),
)


# --- C# ---------------------------------------------------------------------


def _csharp_named(prefix: str) -> Handler:
    """A destructor, `~Buffer`, or an operator, `operator==`: named as C++ names them."""

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        if prefix == "~":
            name = node.child_by_field_name("name")
        else:
            keyword = _child(node, frozenset({"operator"}))
            name = None if keyword is None else keyword.next_sibling
        if name is None:
            return []
        end = head_end(node, node.child_by_field_name("body"))
        return [Def(node, "method", prefix + walker.text(name), end)]

    return handle


CSHARP = Rules(
    handlers={
        "namespace_declaration": simple("namespace", members=True),
        "file_scoped_namespace_declaration": simple("namespace", body=None),
        "class_declaration": simple("class", members=True),
        "record_declaration": simple("record", members=True),
        "struct_declaration": simple("struct", members=True),
        "interface_declaration": simple("interface", members=True),
        "enum_declaration": simple("enum"),
        "method_declaration": simple("method"),
        "constructor_declaration": simple("constructor"),
        "destructor_declaration": _csharp_named("~"),
        "operator_declaration": _csharp_named("operator"),
        "property_declaration": simple("property", body="accessors"),
        "delegate_declaration": simple("type", body=None),
        "using_directive": simple("type", body=None),  # `using Alias = A.B<C>;`, not `using A;`
    },
    transparent=frozenset({"declaration_list"}),
)


# --- PHP --------------------------------------------------------------------

PHP = Rules(
    handlers={
        "namespace_definition": simple("namespace", members=True),
        "class_declaration": simple("class", members=True),
        "interface_declaration": simple("interface", members=True),
        "trait_declaration": simple("trait", members=True),
        "enum_declaration": simple("enum", members=True),
        "function_definition": simple("function"),
        "method_declaration": simple("method"),
    },
    transparent=frozenset({"declaration_list", "compound_statement"}),
)


# --- Bash -------------------------------------------------------------------

BASH = Rules(
    handlers={"function_definition": simple("function")},
    # `f() {…} && complete -F f f`; a function defined per `if` branch at file level
    transparent=frozenset({"list", "if_statement", "elif_clause", "else_clause"}),
)


# --- Kotlin -----------------------------------------------------------------

_KOTLIN_KINDS = {"interface": "interface", "enum": "enum", "object": "object"}
_KOTLIN_BODIES = frozenset({"class_body", "enum_class_body"})

KOTLIN = Rules(
    handlers={
        "class_declaration": shaped(
            _keyword_kind(_KOTLIN_KINDS, "class"), members=True, body_types=_KOTLIN_BODIES
        ),
        "object_declaration": shaped("object", members=True, body_types=_KOTLIN_BODIES),
        "companion_object": shaped(
            "object", members=True, body_types=_KOTLIN_BODIES, default_name="Companion"
        ),
        "function_declaration": shaped(
            "function",
            name_types=frozenset({"simple_identifier", "identifier"}),
            body_types=frozenset({"function_body"}),
        ),
    },
)


# --- Swift ------------------------------------------------------------------

_SWIFT_KINDS = {
    "class": "class", "struct": "struct", "enum": "enum", "extension": "extension",
    "actor": "class",
}  # fmt: skip

SWIFT = Rules(
    handlers={
        "class_declaration": shaped(_keyword_kind(_SWIFT_KINDS, "class"), members=True),
        "protocol_declaration": simple("interface", members=True),
        "function_declaration": simple("function"),
        "protocol_function_declaration": simple("method", body=None),
        "init_declaration": shaped("constructor", default_name="init"),
    },
)


# --- Scala ------------------------------------------------------------------

SCALA = Rules(
    handlers={
        "class_definition": simple("class", members=True),
        "object_definition": simple("object", members=True),
        "trait_definition": simple("trait", members=True),
        "enum_definition": simple("enum", members=True),
        "function_definition": simple("function"),
        "function_declaration": simple("method", body=None),
        "type_definition": simple("type", body=None),
    },
    transparent=frozenset({"enum_body"}),
)


# --- Lua --------------------------------------------------------------------


def _lua_name(target: Node, walker: Walker) -> tuple[str, str] | None:
    """`f` → (f, ""); `M.new` → (new, M); `M:add` → (add, M)."""
    if target.type == "identifier":
        return walker.text(target), ""
    field = target.child_by_field_name("field") or target.child_by_field_name("method")
    table = target.child_by_field_name("table")
    if field is None or table is None:
        return None
    return walker.text(field), walker.text(table)


def _lua_function(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    target = node.child_by_field_name("name")
    found = None if target is None else _lua_name(target, walker)
    if found is None:
        return []
    params = node.child_by_field_name("parameters")
    end = node.end_byte if params is None else params.end_byte
    kind = "method" if found[1] else "function"
    return [Def(node, kind, found[0], end, owner=found[1])]


def _lua_assignment(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`M.double = function(x) … end`; `local mt = { __index = function … }` and
    `M = setmetatable({}, { __call = function … })`: the functions in the tables."""
    del scope
    names = _child(node, frozenset({"variable_list"}))
    values = _child(node, frozenset({"expression_list"}))
    target = None if names is None else names.child_by_field_name("name")
    value = None if values is None else values.child_by_field_name("value")
    if target is None or value is None:
        return []
    if value.type == "table_constructor":
        return _lua_table(value, walker, walker.text(target))
    if value.type == "function_call":
        return _lua_metatable(value, walker, walker.text(target))
    if value.type != "function_definition":
        return []
    found = _lua_name(target, walker)
    if found is None:
        return []
    params = value.child_by_field_name("parameters")
    end = value.end_byte if params is None else params.end_byte
    return [Def(node, "method" if found[1] else "function", found[0], end, owner=found[1])]


def _lua_table(table: Node, walker: Walker, owner: str) -> list[Def]:
    """The function-valued fields of a table constructor, owned by the table's name
    (`owner`, "" for none); a nested table's by `owner.key`."""
    found: list[Def] = []
    for entry in table.named_children:
        key = entry.child_by_field_name("name") if entry.type == "field" else None
        value = entry.child_by_field_name("value") if entry.type == "field" else None
        if key is None or value is None or key.type != "identifier":
            continue  # `[expr] = …` and list items have no name
        label = walker.text(key)
        if value.type == "table_constructor":
            found += _lua_table(value, walker, f"{owner}.{label}" if owner else label)
        elif value.type == "function_definition":
            params = value.child_by_field_name("parameters")
            end = value.end_byte if params is None else params.end_byte
            found.append(Def(entry, "method" if owner else "function", label, end, owner=owner))
    return found


def _lua_metatable(call: Node, walker: Walker, target: str) -> list[Def]:
    """`setmetatable(T, { __index = function … })`: the metamethods, owned by the table they
    serve, T (or `target`, the name the call's value is given, when T is a table itself)."""
    name = call.child_by_field_name("name")
    arguments = call.child_by_field_name("arguments")
    if name is None or arguments is None or walker.text(name) != "setmetatable":
        return []
    tables = arguments.named_children
    if len(tables) != 2:
        return []
    served, meta = tables
    found = _lua_table(served, walker, target) if served.type == "table_constructor" else []
    if meta.type == "table_constructor":
        owner = target if served.type == "table_constructor" else walker.text(served)
        found += _lua_table(meta, walker, owner)
    return found


def _lua_call(node: Node, walker: Walker, scope: str) -> list[Def]:
    """A file-level `setmetatable(M, {…})`, alone or returned."""
    del scope
    if node.type == "function_call":
        return _lua_metatable(node, walker, "")
    values = _child(node, frozenset({"expression_list"}))
    calls = [] if values is None else values.named_children
    return [d for call in calls if call.type == "function_call"
            for d in _lua_metatable(call, walker, "")]  # fmt: skip


LUA = Rules(
    handlers={
        "function_declaration": _lua_function,
        "assignment_statement": _lua_assignment,
        "function_call": _lua_call,
        "return_statement": _lua_call,
    },
    # `local f = function() … end`; file-level `do … end` and `if … end` blocks
    transparent=frozenset(
        {
            "variable_declaration",
            "do_statement",
            "block",
            "if_statement",
            "elseif_statement",
            "else_statement",
        }
    ),
)
