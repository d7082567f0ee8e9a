"""One walker that turns a syntax tree into symbols, driven by per-language rules.

The walker visits only the top level and the bodies of containers (classes,
impls, namespaces); it never descends into function bodies, which keeps a
5,000-line file well under the parse time itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from normalize.tools.code.symbols import Symbol

if TYPE_CHECKING:
    from tree_sitter import Node

MAX_SIGNATURE = 200
"""Signatures longer than this many characters are cut with `…`."""

COMMENTS = frozenset({"comment", "line_comment", "block_comment"})
NAMESPACE_KINDS = frozenset({"module", "namespace"})
_SIGNATURE_NOISE = frozenset(
    {"decorator", "annotation", "marker_annotation", "attribute_item", *COMMENTS}
)
_SPACES = re.compile(r"\s+")
_OPEN_SPACE = re.compile(r"([(\[])\s+")
_SPACE_CLOSE = re.compile(r",?\s+([)\]])")
_COMMENT_MARKS = re.compile(r"^\s*(?:/\*+!?|\*+/|\*|//[/!]?|#+|-{2,})\s?|\s*\*+/\s*$")
_XML_TAG = re.compile(r"</?[A-Za-z][^>]*>")  # C#'s `/// <summary>…</summary>`
MAX_DOC = 120
_TRAILING_EQUALS = re.compile(r"\s+=$")


@dataclass
class Def:
    """What a language rule found: one definition, before it becomes a `Symbol`.

    `head_end` is the byte where the signature ends (usually the body's start).
    `members` is the node whose children are nested symbols. `span` overrides
    the node giving the line range, `sig_start` the byte where the signature
    starts (by default the node's first token that is not a decorator).
    """

    node: Node
    kind: str
    name: str
    head_end: int
    members: Node | None = None
    owner: str = ""
    span: Node | None = None
    sig_start: int | None = None
    prefix: str = ""
    suffix: str = ""
    doc: str = ""


Handler = Callable[["Node", "Walker", str], list[Def]]
"""(node, walker, scope) → definitions; scope is "module" or "class"."""

Unwrap = Callable[["Node"], "Node | None"]
"""A wrapper node (decorators, `export`, `template<…>`) → the definition inside."""


@dataclass(frozen=True)
class Rules:
    """How one language's tree maps to symbols.

    `wrappers` map a node type to (find the inner definition, whether the
    signature starts at the wrapper); the wrapper's span always counts.
    `transparent` nodes (preprocessor conditionals) are looked through.
    `leading` siblings (Rust attributes, TS member decorators) extend the next
    symbol's span upward. With `doc_comments`, the comments right above a
    symbol (no blank line between) are its doc comment.
    """

    handlers: Mapping[str, Handler]
    wrappers: Mapping[str, tuple[Unwrap, bool]] = field(default_factory=dict)
    transparent: frozenset[str] = frozenset()
    leading: frozenset[str] = frozenset()
    doc_comments: bool = True
    """Whether comments right above a definition are its documentation (not in Python)."""


class Walker:
    """Builds the symbols of one parsed file."""

    def __init__(self, src: bytes, rules: Rules, parsed: bytes | None = None) -> None:
        self.src = src
        self.rules = rules
        self.parsed = src if parsed is None else parsed
        """The bytes the parser saw: `src` with macros blanked (same offsets)."""

    def text(self, node: Node) -> str:
        return self.src[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def block(self, parent: Node, scope: str) -> list[Symbol]:
        """The symbols among `parent`'s children."""
        symbols: list[Symbol] = []
        lead: Node | None = None
        comments: list[Node] = []
        for child in parent.named_children:
            kind = child.type
            if kind in self.rules.leading:
                lead = lead or child
                continue
            if kind in COMMENTS:
                if comments and child.start_point.row > comments[-1].end_point.row + 1:
                    comments = []
                comments.append(child)
                continue
            found = self.visit(child, scope, None, False, lead)
            if comments and self.rules.doc_comments:
                found = [self._with_doc(symbol, comments) for symbol in found]
            symbols.extend(found)
            lead = None
            comments = []
        return symbols

    def _with_doc(self, symbol: Symbol, comments: list[Node]) -> Symbol:
        """`symbol` with the comment block ending on the line above it as its doc comment."""
        gap = symbol.line - comments[-1].end_point.row - 2  # blank lines between
        javadoc = self.src.startswith(b"/**", comments[-1].start_byte)
        if gap > (1 if javadoc else 0):
            return symbol
        start = comments[0].start_point.row + 1
        if start >= symbol.line:
            return symbol
        doc = symbol.doc or doc_line(" ".join(self.text(c) for c in comments))
        return replace(symbol, doc=doc, doc_line=start)

    def visit(
        self, node: Node, scope: str, wrap: Node | None, wrap_sig: bool, lead: Node | None
    ) -> list[Symbol]:
        kind = node.type
        if kind in self.rules.transparent or kind == "ERROR":  # recover what the error holds
            return self.block(node, scope)
        unwrap = self.rules.wrappers.get(kind)
        if unwrap is not None:
            find_inner, sig_at_wrapper = unwrap
            inner = find_inner(node)
            if inner is None:
                return []
            return self.visit(inner, scope, wrap or node, wrap_sig or sig_at_wrapper, lead)
        handler = self.rules.handlers.get(kind)
        if handler is None:
            return []
        defs = handler(node, self, scope)
        if len(defs) != 1:
            wrap = None
        return [self.symbol(d, scope, wrap, wrap_sig, lead) for d in defs]

    def symbol(
        self, found: Def, scope: str, wrap: Node | None, wrap_sig: bool, lead: Node | None
    ) -> Symbol:
        span = wrap or found.span or found.node
        if wrap is not None and wrap_sig:
            start = first_token(wrap)
        elif found.sig_start is not None:
            start = found.sig_start
        else:
            start = first_token(found.node)
        start = self._unblank(start)
        head = self.src[start : max(start, found.head_end)].decode("utf-8", "replace")
        signature = one_line(found.prefix + head + found.suffix)
        kind = "method" if found.kind == "function" and scope == "class" else found.kind
        children: tuple[Symbol, ...] = ()
        if found.members is not None:
            inner_scope = "module" if kind in NAMESPACE_KINDS else "class"
            children = tuple(self.block(found.members, inner_scope))
        return Symbol(
            name=found.name,
            kind=kind,
            line=(lead or span).start_point.row + 1,
            end_line=end_line(span),
            signature=signature,
            children=children,
            owner=found.owner,
            doc=found.doc,
        )

    def _unblank(self, start: int) -> int:
        """Move a signature's start back over macros blanked before parsing on its line."""
        if self.parsed is self.src:
            return start
        line_start = self.src.rfind(b"\n", 0, start) + 1
        before = self.src[line_start:start]
        if before.strip() and not self.parsed[line_start:start].strip():
            return line_start + len(before) - len(before.lstrip())
        return start


def first_token(node: Node) -> int:
    """The byte where `node`'s header starts, past decorators, annotations and comments."""
    for child in node.children:
        if child.type in _SIGNATURE_NOISE:
            continue
        if child.type == "modifiers":
            for modifier in child.children:
                if modifier.type not in _SIGNATURE_NOISE:
                    return modifier.start_byte
            continue
        return child.start_byte
    return node.start_byte


def doc_line(comment: str) -> str:
    """The first line of text in a comment, without its markers (`///`, `/**`, `*`, `#`)."""
    for raw in comment.splitlines():
        line = _COMMENT_MARKS.sub("", raw).strip()
        line = _XML_TAG.sub("", _COMMENT_MARKS.sub("", line)).strip()
        if line:
            return line if len(line) <= MAX_DOC else line[: MAX_DOC - 1] + "…"
    return ""


def end_line(node: Node) -> int:
    """The 1-based last line of `node` (a node ending at column 0 ends on the line before)."""
    point = node.end_point
    last = point.row + 1 if point.column else point.row
    return max(node.start_point.row + 1, last)


def one_line(text: str) -> str:
    """A header on one line: whitespace collapsed, no trailing `{`/`;`, capped in length."""
    text = _SPACES.sub(" ", text).strip()
    text = _SPACE_CLOSE.sub(r"\1", _OPEN_SPACE.sub(r"\1", text))
    text = _TRAILING_EQUALS.sub("", text.rstrip("{; ").rstrip())  # Scala/Kotlin `def f(): T =`
    if len(text) > MAX_SIGNATURE:
        text = text[: MAX_SIGNATURE - 1].rstrip() + "…"
    return text


def head_end(node: Node, body: Node | None) -> int:
    """Where a header ends: at its body, or at the node's end when it has none."""
    return node.end_byte if body is None else body.start_byte


def simple(
    kind: str, *, members: bool = False, body: str | None = "body", name: str = "name"
) -> Handler:
    """A handler for the common shape: a `name` field and an optional `body` field.

    `body=None` means the whole node is the header (type aliases, constants).
    """

    def handle(node: Node, walker: Walker, scope: str) -> list[Def]:
        del scope
        name_node = node.child_by_field_name(name)
        if name_node is None:
            return []
        body_node = None if body is None else node.child_by_field_name(body)
        return [
            Def(
                node,
                kind,
                walker.text(name_node),
                head_end(node, body_node),
                members=body_node if members else None,
            )
        ]

    return handle
