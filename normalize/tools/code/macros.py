"""C and C++ macros that hide a declaration from the parser, blanked out before parsing.

Blanking replaces a macro's bytes with spaces, so every byte offset (and so
every line, name and signature taken from the original text) stays where it
was. Only the parse sees the blanks.

What counts as such a macro, without seeing the headers that define it:

- a function-like macro wrapping a return type at the start of a line,
  `CJSON_PUBLIC(cJSON *) cJSON_Parse(…)`: the macro name, its `(` and `)` go;
- an all-caps word between a type and a function name on a line that starts
  a declaration, `int CJSON_CDECL main(void)` (not after specifiers or macros alone:
  in `static U16 read16(…)` the caps word is the type);
- an all-caps word between `class`/`struct`/`union` and the name, `class FMT_API buffer`;
- an all-caps word after a parameter list, `size_t size() const FMT_NOEXCEPT {`;
- a macro statement alone on its line with no `;` (`DECLARE_LIST(a, int)`,
  `TEST_END`), unless a `{` follows: the parser would swallow what comes next;
- object-like macros defined in the same file as nothing or as attributes
  (`#define API __declspec(dllexport)`).
"""

from __future__ import annotations

import re

_CAPS = rb"[A-Z][A-Z0-9_]*[A-Z0-9]"
_WRAPPED_TYPE = re.compile(
    rb"^(?P<macro>" + _CAPS + rb")\((?P<type>[^()\n;]*)\)(?=[ \t*&]*[A-Za-z_]\w*[ \t]*\()",
    re.MULTILINE,
)
_CALLING_CONVENTION = re.compile(
    rb"^(?P<type>(?:[A-Za-z_][\w:<>]*[ \t*&]+)+?)(?P<macro>"
    + _CAPS
    + rb")(?=[ \t*&]+[A-Za-z_][\w:~]*[ \t]*\()",
    re.MULTILINE,
)
_CLASS_MACRO = re.compile(
    rb"\b(?:class|struct|union)[ \t]+(?P<macro>" + _CAPS + rb")(?=[ \t]+[A-Za-z_]\w*[ \t\n]*[:{<])"
)
_TRAILING_MACRO = re.compile(
    rb"\)[ \t]*(?:const[ \t]*)?(?:&{1,2}[ \t]*)?(?P<macro>" + _CAPS + rb"(?:\([^()\n]*\))?)"
    rb"(?=[ \t]*(?:[{;:=]|->|override|final|$))",
    re.MULTILINE,
)
_DEFINE = re.compile(
    rb"^[ \t]*#[ \t]*define[ \t]+(?P<name>\w+)(?P<value>[ \t][^\n]*)?$", re.MULTILINE
)
_ATTRIBUTE_VALUE = re.compile(
    rb"(?:__attribute__\s*\(\(.*\)\)|__declspec\s*\(.*\)|__cdecl|__stdcall|__fastcall|"
    rb"inline|__inline|__forceinline|static|extern|constexpr|noexcept|\s)*"
)
_BARE_STATEMENT = re.compile(
    rb"^[ \t]*(?P<macro>" + _CAPS + rb"(?:[ \t]*\((?:[^()\n]|\([^()\n]*\))*\))?)[ \t]*$(?!\s*\{)",
    re.MULTILINE,
)
_KEYWORDS = frozenset({b"TRUE", b"FALSE", b"NULL", b"EOF"})
_SPECIFIERS = frozenset(
    {b"static", b"inline", b"extern", b"const", b"volatile", b"__inline", b"__forceinline"}
)


def _is_type_word(word: bytes) -> bool:
    """Whether a word before an all-caps one is a type, so the caps word is a macro:
    `int CJSON_CDECL main`, not `static U16 read16` nor `FORCE_INLINE U32 hash4`."""
    return bool(word) and word not in _SPECIFIERS and re.fullmatch(_CAPS, word) is None


def blank_macros(src: bytes) -> bytes:
    """`src` with declaration-hiding macros replaced by spaces (same length, same lines)."""
    if b"(" not in src:
        return src
    out = bytearray(src)
    spans: list[tuple[int, int]] = []
    for match in _WRAPPED_TYPE.finditer(src):
        spans.append((match.start("macro"), match.start("type")))
        spans.append((match.end("type"), match.end("type") + 1))
    for match in _BARE_STATEMENT.finditer(src):
        before = src[: match.start()].rstrip(b" \t")
        if not before.endswith(b"\\"):  # not inside a multi-line #define
            spans.append(match.span("macro"))
    for match in _CALLING_CONVENTION.finditer(src):
        if any(_is_type_word(word) for word in re.split(rb"[ \t*&]+", match["type"])):
            spans.append(match.span("macro"))
    for pattern in (_CLASS_MACRO, _TRAILING_MACRO):
        for match in pattern.finditer(src):
            if match.group("macro") not in _KEYWORDS:
                spans.append(match.span("macro"))
    empty = {
        m["name"]
        for m in _DEFINE.finditer(src)
        if _ATTRIBUTE_VALUE.fullmatch(m["value"] or b"") and re.fullmatch(_CAPS, m["name"])
    }
    if empty:
        names = b"|".join(re.escape(name) for name in sorted(empty))
        for match in re.finditer(rb"(?<!define )\b(?:" + names + rb")\b(?!\s*\()", src):
            spans.append(match.span())
    for start, end in spans:
        out[start:end] = re.sub(rb"[^\n]", b" ", src[start:end])
    return bytes(out)


_CONDITIONAL = re.compile(
    rb"^[ \t]*#[ \t]*(?P<word>if|ifdef|ifndef|elif|elifdef|elifndef|else|endif)\b"
)


def first_branches(src: bytes) -> bytes:
    """`src` as if every `#if` took its first branch: directives and later branches blanked.

    For files whose braces only balance branch by branch (an `#ifdef` that
    opens a block another `#ifdef` closes), which the parser cannot follow.
    """
    out: list[bytes] = []
    stack: list[bool] = []  # per open conditional: are we past its first branch?
    for line in src.split(b"\n"):
        match = _CONDITIONAL.match(line)
        if match is not None:
            word = match["word"]
            if word.startswith(b"if"):
                stack.append(False)
            elif word == b"endif":
                if stack:
                    stack.pop()
            elif stack:
                stack[-1] = True
            out.append(b" " * len(line))
        elif any(stack):
            out.append(re.sub(rb"[^\r]", b" ", line))
        else:
            out.append(line)
    return b"\n".join(out)
