"""Per-language rules: which syntax nodes are symbols, what they are called, what they hold."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from normalize.tools.code import more_languages as more
from normalize.tools.code.walker import (
    Def,
    Handler,
    Rules,
    Unwrap,
    Walker,
    head_end,
    simple,
)

if TYPE_CHECKING:
    from tree_sitter import Node

_CONSTANT = re.compile(r"[A-Z][A-Z0-9_]*")
_STRING_QUOTES = re.compile(r"^[rRbBuUfF]*(\"\"\"|'''|\"|')|(\"\"\"|'''|\"|')$")
MAX_DOC = 120
_SPACE = re.compile(r"\s+")


def _field(name: str) -> Unwrap:
    return lambda node: node.child_by_field_name(name)


def _first_named(node: Node) -> Node | None:
    return node.named_child(0) if node.named_child_count else None


def _last_named(node: Node) -> Node | None:
    count = node.named_child_count
    return node.named_child(count - 1) if count else None


# --- Python -----------------------------------------------------------------


def _py_docstring(body: Node | None, walker: Walker) -> str:
    first = None if body is None else _first_named(body)
    if first is None or first.type != "expression_statement":
        return ""
    string = _first_named(first)
    if string is None or string.type != "string":
        return ""
    text = _STRING_QUOTES.sub("", walker.text(string))
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    return line if len(line) <= MAX_DOC else line[: MAX_DOC - 1] + "…"


def _py_overload(node: Node, walker: Walker) -> bool:
    """Whether a function is an `@overload` stub (`@overload`, `@typing.overload`, …)."""
    parent = node.parent
    if parent is None or parent.type != "decorated_definition":
        return False
    return any(
        child.type == "decorator" and walker.text(child).rstrip().endswith("overload")
        for child in parent.named_children
    )


def _py_definition(kind: str) -> Handler:
    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is None:
            return []
        end = head_end(node, body)
        for child in node.children:  # the header ends at its colon (a comment may follow)
            if child.type == ":":
                end = child.end_byte
            if body is not None and child.start_byte >= body.start_byte:
                break
        members = body if kind == "class" else None
        doc = _py_docstring(body, walker)
        found = "overload" if kind == "function" and _py_overload(node, walker) else kind
        return [Def(node, found, walker.text(name), end, members=members, doc=doc)]

    return handle


def _py_constant(node: Node, walker: Walker, scope: str) -> list[Def]:
    assignment = _first_named(node)
    if scope != "module" or assignment is None or assignment.type != "assignment":
        return []
    left = assignment.child_by_field_name("left")
    if left is None or left.type != "identifier" or not _CONSTANT.fullmatch(walker.text(left)):
        return []
    newline = walker.src.find(b"\n", node.start_byte, node.end_byte)
    end = node.end_byte if newline < 0 else newline
    suffix = " …" if newline >= 0 else ""
    return [Def(node, "constant", walker.text(left), end, suffix=suffix)]


_PY_BLOCKS = frozenset(
    "if_statement elif_clause else_clause try_statement except_clause finally_clause block".split()
)

PYTHON = Rules(
    handlers={
        "function_definition": _py_definition("function"),
        "class_definition": _py_definition("class"),
        "expression_statement": _py_constant,
    },
    wrappers={"decorated_definition": (_field("definition"), False)},
    # definitions under `if TYPE_CHECKING:`, `try: … except ImportError:` and the like
    transparent=_PY_BLOCKS,
    doc_comments=False,
)


# --- JavaScript / TypeScript ------------------------------------------------

_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)


def _js_variables(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`const f = (…) => {…}`, `const C = class {…}`, through chains: named functions, classes."""
    del scope
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    found: list[Def] = []
    for declarator in declarators:
        name = declarator.child_by_field_name("name")
        value = declarator.child_by_field_name("value")
        while value is not None and value.type == "assignment_expression":
            value = value.child_by_field_name("right")  # `var proto = module.exports = …`
        if name is None or name.type != "identifier" or value is None:
            continue
        body = value.child_by_field_name("body")
        if value.type in _FUNCTION_VALUES:
            kind, members = "function", None
        elif value.type == "class":
            kind, members = "class", body
        else:
            continue
        own = declarator if len(declarators) > 1 else node
        found.append(Def(own, kind, walker.text(name), head_end(value, body), members=members))
    return found


def _js_field(name_field: str) -> Handler:
    """A class field holding a function: `handle = (e) => {…}`."""

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        name = node.child_by_field_name(name_field)
        value = node.child_by_field_name("value")
        if name is None or value is None or value.type not in _FUNCTION_VALUES:
            return []
        body = value.child_by_field_name("body")
        return [Def(node, "method", walker.text(name), head_end(value, body))]

    return handle


def _js_export(node: Node) -> Node | None:
    return node.child_by_field_name("declaration") or node.child_by_field_name("value")


def _member_path(node: Node, walker: Walker) -> list[str] | None:
    """`a.b.c` → ["a", "b", "c"]; None when any part is computed (`a[b]`, calls)."""
    parts: list[str] = []
    current: Node | None = node
    while current is not None and current.type == "member_expression":
        prop = current.child_by_field_name("property")
        if prop is None:
            return None
        parts.append(walker.text(prop))
        current = current.child_by_field_name("object")
    if current is None or current.type not in ("identifier", "this"):
        return None
    parts.append(walker.text(current))
    return parts[::-1]


def _js_object_members(obj: Node, walker: Walker, owner: str) -> list[Def]:
    """The function-valued entries of an object literal: `{a: function(){}, b(){}}`."""
    found: list[Def] = []
    for entry in obj.named_children:
        if entry.type == "method_definition":
            name = entry.child_by_field_name("name")
            body = entry.child_by_field_name("body")
            if name is not None:
                found.append(
                    Def(entry, "function", walker.text(name), head_end(entry, body), owner=owner)
                )
        elif entry.type == "pair":
            key = entry.child_by_field_name("key")
            value = entry.child_by_field_name("value")
            if key is None or value is None or value.type not in _FUNCTION_VALUES:
                continue
            label = _STRING_QUOTES.sub("", walker.text(key))
            body = value.child_by_field_name("body")
            found.append(Def(entry, "function", label, head_end(value, body), owner=owner))
    return found


def _js_assignment(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`obj.prop = function…`, `X.prototype.m = function…`, `exports.x`, `module.exports = {…}`."""
    left = node.child_by_field_name("left")
    value = node.child_by_field_name("right")
    if scope != "module" or left is None or value is None:
        return []
    if value.type == "assignment_expression":  # `req.get = req.header = function header(…)`
        inner = _js_assignment(value, walker, scope)
        if len(inner) != 1:
            return inner
        path = _member_path(left, walker)
        if path is not None and len(path) >= 2 and path[-2] != "exports":
            owner = ".".join(p for p in path[:-1] if p != "prototype")
            alias = Def(node, inner[0].kind, path[-1], inner[0].head_end, owner=owner)
            return [alias, inner[0]]
        return inner
    path = _member_path(left, walker)
    if path is None or len(path) < 2:
        return []
    if path[:2] == ["module", "exports"]:
        path = ["exports", *path[2:]]
    owner_path = [p for p in path[:-1] if p != "prototype"]
    exported = owner_path == ["exports"] or owner_path == ["this"]
    owner = "" if exported else ".".join(owner_path)
    if value.type == "object" and (path == ["exports"] or path[-1] == "prototype"):
        return _js_object_members(value, walker, "" if path == ["exports"] else owner)
    if path == ["exports"]:
        name_node = value.child_by_field_name("name")
        if name_node is None or value.type not in (*_FUNCTION_VALUES, "class"):
            return []
        path = ["exports", walker.text(name_node)]
    body = value.child_by_field_name("body")
    if value.type in _FUNCTION_VALUES:
        kind = "function" if exported or not owner else "method"
        return [Def(node, kind, path[-1], head_end(value, body), owner=owner)]
    if value.type == "class":
        return [Def(node, "class", path[-1], head_end(value, body), members=body, owner=owner)]
    return []


def _js_call(node: Node, walker: Walker, scope: str) -> list[Def]:
    """Named function expressions passed to a top-level call: `f(req, "ip", function ip(){})`."""
    if scope != "module":
        return []
    found: list[Def] = []
    stack = [node]
    while stack:
        current = stack.pop()
        for child in current.named_children:
            if child.type in ("call_expression", "arguments"):
                stack.append(child)
            elif child.type == "function_expression":
                name = child.child_by_field_name("name")
                body = child.child_by_field_name("body")
                if name is not None:
                    found.append(Def(child, "function", walker.text(name), head_end(child, body)))
    return sorted(found, key=lambda d: d.node.start_byte)


def _js_default_export(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`export default function () {…}`: an unnamed function or class named `default`."""
    del scope
    if node.parent is None or node.parent.type != "export_statement":
        return []
    name = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    kind = "class" if node.type == "class" else "function"
    label = "default" if name is None else walker.text(name)
    return [Def(node, kind, label, head_end(node, body), members=body if kind == "class" else None)]


def _js_method(node: Node, walker: Walker, scope: str) -> list[Def]:
    """A method; one named by a string, `"~validate"(data) {…}`, is named without its quotes."""
    found = simple("method")(node, walker, scope)
    name = node.child_by_field_name("name")
    if found and name is not None and name.type == "string":
        found[0].name = found[0].name[1:-1]
    return found


def _ts_signature(kind: str) -> Handler:
    """A body-less signature: an `overload` when a run of same-named signatures after it ends
    in the implementation (`f(): T;`, `f(x: U): T;`, `f(x?: U) {…}`), else `kind` (an
    interface's or a `declare`d member)."""

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        name = node.child_by_field_name("name")
        if name is None:
            return []
        label = walker.text(name)
        found = "overload" if _ts_implemented(node, label, walker) else kind
        return [Def(node, found, label, node.end_byte)]

    return handle


_TS_SIGNATURES = frozenset({"function_signature", "method_signature"})


def _ts_implemented(node: Node, name: str, walker: Walker) -> bool:
    """Whether the definitions after `node` (past `export`, comments and `;`) are signatures
    named `name` and then a definition of that name with a body."""
    exported = node.parent is not None and node.parent.type == "export_statement"
    after = (node.parent if exported and node.parent is not None else node).next_named_sibling
    while after is not None:
        if after.type not in ("comment", "empty_statement"):
            found = after.child_by_field_name("declaration") if after.type == "export_statement" \
                else after
            label = None if found is None else found.child_by_field_name("name")
            if found is None or label is None or walker.text(label) != name:
                return False
            if found.type not in _TS_SIGNATURES:
                return found.child_by_field_name("body") is not None
        after = after.next_named_sibling
    return False


_JS_HANDLERS: dict[str, Handler] = {
    "class_declaration": simple("class", members=True),
    "class": _js_default_export,
    "function_expression": _js_default_export,
    "arrow_function": _js_default_export,
    "assignment_expression": _js_assignment,
    "call_expression": _js_call,
    "function_declaration": simple("function"),
    "generator_function_declaration": simple("function"),
    "method_definition": _js_method,
    "lexical_declaration": _js_variables,
    "variable_declaration": _js_variables,
    "field_definition": _js_field("property"),
}
_JS_WRAPPERS: dict[str, tuple[Unwrap, bool]] = {
    "export_statement": (_js_export, True),
    "expression_statement": (_first_named, False),
}

JAVASCRIPT = Rules(handlers=_JS_HANDLERS, wrappers=_JS_WRAPPERS, leading=frozenset({"decorator"}))

TYPESCRIPT = Rules(
    handlers={
        **_JS_HANDLERS,
        "abstract_class_declaration": simple("class", members=True),
        "function_signature": _ts_signature("declaration"),
        "method_signature": _ts_signature("method"),
        "abstract_method_signature": simple("method"),
        "public_field_definition": _js_field("name"),
        "interface_declaration": simple("interface", members=True),
        "type_alias_declaration": simple("type", body=None),
        "enum_declaration": simple("enum"),
        "internal_module": simple("namespace", members=True),
        "module": simple("module", members=True),
    },
    wrappers={**_JS_WRAPPERS, "ambient_declaration": (_first_named, True)},
    leading=frozenset({"decorator"}),
)


# --- Go ---------------------------------------------------------------------


def _go_receiver(node: Node, walker: Walker) -> str:
    """The type name in a method's receiver: `(s *Server[T])` → `Server`."""
    receiver = node.child_by_field_name("receiver")
    stack = [] if receiver is None else [receiver]
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return walker.text(current)
        stack.extend(reversed(current.named_children))
    return ""


def _go_method(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    name = node.child_by_field_name("name")
    if name is None:
        return []
    end = head_end(node, node.child_by_field_name("body"))
    owner = _go_receiver(node, walker)
    return [Def(node, "method", walker.text(name), end, owner=owner)]


def _go_type_spec(spec: Node, walker: Walker) -> Def | None:
    name = spec.child_by_field_name("name")
    shape = spec.child_by_field_name("type")
    if name is None:
        return None
    kind, end, members = "type", spec.end_byte, None
    if shape is not None and shape.type == "struct_type":
        fields = _first_named(shape)
        kind, end = "struct", shape.end_byte if fields is None else fields.start_byte
    elif shape is not None and shape.type == "interface_type":
        brace = next((c for c in shape.children if c.type == "{"), None)
        kind, end, members = (
            "interface",
            shape.end_byte if brace is None else brace.start_byte,
            shape,
        )
    return Def(spec, kind, walker.text(name), end, members=members)


def _go_group(keyword: str, specs: tuple[str, ...]) -> Handler:
    """`type X struct {…}` or a grouped `type (…)`/`const (…)`: one symbol per spec."""

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        found: list[Def] = []
        children = [c for c in node.named_children if c.type in specs]
        for spec in children:
            if keyword == "type":
                made = _go_type_spec(spec, walker)
            else:
                name = spec.child_by_field_name("name")
                made = (
                    None
                    if name is None
                    else Def(spec, "constant", walker.text(name), spec.end_byte)
                )
            if made is None:
                continue
            if len(children) == 1:
                made.span, made.sig_start = node, node.start_byte
            else:
                made.prefix = keyword + " "
            found.append(made)
        return found

    return handle


GO = Rules(
    handlers={
        "function_declaration": simple("function"),
        "method_declaration": _go_method,
        "type_declaration": _go_group("type", ("type_spec", "type_alias")),
        "const_declaration": _go_group("const", ("const_spec",)),
        "method_elem": simple("method", body=None),
        "method_spec": simple("method", body=None),
    },
)


# --- Rust -------------------------------------------------------------------


_RUST_TYPE_WRAPPERS = {
    "generic_type": "type",
    "scoped_type_identifier": "name",
    "reference_type": "type",
    "pointer_type": "type",
}
"""Types an impl's target is wrapped in (`&'a mut P`, `path::P<T>`) → the field holding it."""


def _rust_impl(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`impl<T> Trait for path::Type<T>` is named after `Type`."""
    del scope
    target = node.child_by_field_name("type")
    while target is not None and target.type in _RUST_TYPE_WRAPPERS:
        target = target.child_by_field_name(_RUST_TYPE_WRAPPERS[target.type])
    if target is None:
        return []
    body = node.child_by_field_name("body")
    return [Def(node, "impl", walker.text(target), head_end(node, body), members=body)]


def _rust_macro(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    name = node.child_by_field_name("name")
    if name is None:
        return []
    return [Def(node, "macro", walker.text(name), name.end_byte)]


RUST = Rules(
    handlers={
        "function_item": simple("function"),
        "function_signature_item": simple("function"),
        "struct_item": simple("struct"),
        "union_item": simple("struct"),
        "enum_item": simple("enum"),
        "trait_item": simple("trait", members=True),
        "impl_item": _rust_impl,
        "mod_item": simple("module", members=True),
        "type_item": simple("type", body=None),
        "const_item": simple("constant", body=None),
        "static_item": simple("constant", body=None),
        "macro_definition": _rust_macro,
    },
    leading=frozenset({"attribute_item"}),
)


# --- Java -------------------------------------------------------------------

JAVA = Rules(
    handlers={
        "class_declaration": simple("class", members=True),
        "interface_declaration": simple("interface", members=True),
        "enum_declaration": simple("enum", members=True),
        "record_declaration": simple("record", members=True),
        "annotation_type_declaration": simple("interface", members=True),
        "method_declaration": simple("method"),
        "constructor_declaration": simple("constructor"),
        "annotation_type_element_declaration": simple("method", body=None),
    },
    transparent=frozenset({"enum_body_declarations"}),
)


# --- C / C++ ----------------------------------------------------------------

_C_NAMES = frozenset(
    {"identifier", "field_identifier", "destructor_name", "operator_name", "type_identifier"}
)
_C_TYPE_KINDS = {
    "struct_specifier": "struct",
    "union_specifier": "struct",
    "class_specifier": "class",
    "enum_specifier": "enum",
}


def _c_function_name(node: Node, walker: Walker) -> tuple[str, str] | None:
    """(name, owner) of the function a declarator declares: `int *Box::get(…)` → (get, Box)."""
    current = node.child_by_field_name("declarator")
    top = current
    while current is not None and current.type != "function_declarator":
        inner = current.child_by_field_name("declarator")
        if inner is None and current.type == "reference_declarator":
            inner = _last_named(current)
        current = inner
    target = top if current is None else current.child_by_field_name("declarator")
    if current is not None:
        target = _c_name_after_macro(current) or target
    owner = ""
    while target is not None and target.type == "qualified_identifier":
        scope = target.child_by_field_name("scope")
        if scope is not None:
            owner = walker.text(scope.child_by_field_name("name") or scope)
        target = target.child_by_field_name("name")
    if target is not None and target.type == "template_function":
        target = target.child_by_field_name("name")
    if target is not None and target.type == "operator_cast":  # `operator bool() const`
        cast = target.child_by_field_name("type")
        return ("operator " + _SPACE.sub(" ", walker.text(cast)) if cast else "operator"), owner
    if current is None or target is None or target.type not in _C_NAMES:
        return None
    kind = node.child_by_field_name("type")
    if kind is not None and kind.type == "qualified_identifier" and walker.text(kind).endswith(
        "::operator"
    ):  # `inline Env::operator napi_env() const` parses with `Env::operator` as the type
        scope = kind.child_by_field_name("scope")
        owner = walker.text(scope) if scope is not None else owner
        return f"operator {walker.text(target)}", owner
    return walker.text(target), owner


def _c_name_after_macro(declarator: Node) -> Node | None:
    """The name in `MACRO type name (…)`, which tree-sitter reads as the function `type` with
    `name` an ERROR before its parameters (a space before `(` is what trips it)."""
    stray = next((c for c in declarator.children if c.type == "ERROR"), None)
    if stray is None or stray.named_child_count != 1:
        return None
    name = stray.named_children[0]
    return name if name.type == "identifier" else None


def _c_function(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    found = _c_function_name(node, walker)
    if found is None:
        return []
    name, owner = found
    end = head_end(node, node.child_by_field_name("body"))
    test = None if owner else _macro_test(node, name, walker)
    if test is not None:  # `TEST(StackTest, PushesOne) {…}` is the test StackTest/PushesOne
        return [Def(node, "test", test[1], end, owner=test[0])]
    return [Def(node, "method" if owner else "function", name, end, owner=owner)]


def _macro_test(node: Node, name: str, walker: Walker) -> tuple[str, str] | None:
    """(suite, test) of a test macro with a body: an all-caps name, bare-word arguments."""
    if not _CONSTANT.fullmatch(name):
        return None
    declarator = node.child_by_field_name("declarator")
    params = None if declarator is None else declarator.child_by_field_name("parameters")
    if params is None:
        return None
    words: list[str] = []
    for param in params.named_children:
        kind = param.child_by_field_name("type")
        if param.type != "parameter_declaration" or param.named_child_count != 1 or kind is None:
            return None
        if kind.type != "type_identifier":
            return None
        words.append(walker.text(kind))
    if not 1 <= len(words) <= 2:
        return None
    return ("", words[0]) if len(words) == 1 else (words[0], words[1])


def _c_type(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    name = node.child_by_field_name("name")
    body = node.child_by_field_name("body")
    if name is None or body is None:
        return []
    kind = _C_TYPE_KINDS[node.type]
    members = None if kind == "enum" else body
    label = _SPACE.sub(" ", walker.text(name))  # a specialisation's arguments, on one line
    return [Def(node, kind, label, body.start_byte, members=members)]


def _c_declaration(node: Node, walker: Walker, scope: str) -> list[Def]:
    """A function prototype, or a declaration whose type defines a struct/class/enum."""
    found = _c_function_name(node, walker)
    if found is not None:
        return [Def(node, "declaration", found[0], node.end_byte, owner=found[1])]
    spec = node.child_by_field_name("type")
    if spec is not None and spec.type in _C_TYPE_KINDS:
        return _c_type(spec, walker, scope)
    return []


def _c_typedef(node: Node, walker: Walker, scope: str) -> list[Def]:
    """`typedef struct {…} Name;` is the struct `Name`; other typedefs are types."""
    del scope
    declarator = _typedef_name(node.child_by_field_name("declarator"))
    if declarator is None:
        return []
    name = walker.text(declarator)
    spec = node.child_by_field_name("type")
    body = None if spec is None else spec.child_by_field_name("body")
    if spec is None or body is None or spec.type not in _C_TYPE_KINDS:
        return [Def(node, "type", name, node.end_byte)]
    kind = _C_TYPE_KINDS[spec.type]
    tail = walker.src[body.end_byte : node.end_byte].decode("utf-8", "replace")
    members = None if kind == "enum" else body
    return [Def(node, kind, name, body.start_byte, members=members, suffix=" { … }" + tail)]


def _typedef_name(declarator: Node | None) -> Node | None:
    """The name a typedef's declarator introduces: `PSTR` in `*PSTR`, `fn_t` in `(*fn_t)(…)`,
    `int16_t` in `typedef signed short int16_t` (which tree-sitter-c reads as a primitive)."""
    while declarator is not None and declarator.type not in ("type_identifier", "primitive_type"):
        if declarator.type == "parenthesized_declarator":
            declarator = next(iter(declarator.named_children), None)
        else:
            declarator = declarator.child_by_field_name("declarator")
    return declarator


def _cpp_namespace(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    body = node.child_by_field_name("body")
    name = node.child_by_field_name("name")
    label = "(anonymous)" if name is None else walker.text(name)
    return [Def(node, "namespace", label, head_end(node, body), members=body)]


def _c_macro(node: Node, walker: Walker, scope: str) -> list[Def]:
    del scope
    name = node.child_by_field_name("name")
    params = node.child_by_field_name("parameters")
    if name is None or params is None:
        return []
    return [Def(node, "macro", walker.text(name), params.end_byte)]


_C_HANDLERS: dict[str, Handler] = {
    "function_definition": _c_function,
    "declaration": _c_declaration,
    "field_declaration": _c_declaration,
    "type_definition": _c_typedef,
    "preproc_function_def": _c_macro,
    **dict.fromkeys(_C_TYPE_KINDS, _c_type),
}
_C_TRANSPARENT = frozenset(
    {"ERROR", "preproc_if", "preproc_ifdef", "preproc_else", "preproc_elif", "preproc_elifdef"}
)

C = Rules(handlers=_C_HANDLERS, transparent=_C_TRANSPARENT)

CPP = Rules(
    handlers={
        **_C_HANDLERS,
        "namespace_definition": _cpp_namespace,
        "alias_declaration": simple("type", body=None),
    },
    wrappers={
        "template_declaration": (_last_named, True),
        "linkage_specification": (_field("body"), False),
    },
    transparent=_C_TRANSPARENT | {"declaration_list"},
)

RULES: dict[str, Rules] = {
    "ruby": more.RUBY,
    "csharp": more.CSHARP,
    "php": more.PHP,
    "bash": more.BASH,
    "kotlin": more.KOTLIN,
    "swift": more.SWIFT,
    "scala": more.SCALA,
    "lua": more.LUA,
    "python": PYTHON,
    "javascript": JAVASCRIPT,
    "typescript": TYPESCRIPT,
    "tsx": TYPESCRIPT,
    "go": GO,
    "rust": RUST,
    "java": JAVA,
    "c": C,
    "cpp": CPP,
}
