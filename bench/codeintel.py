"""Outline quality against Universal Ctags: recall and precision per language, and view exactness.

    python bench/codeintel.py                    # the vendored fixtures (tests/fixtures/code)
    python bench/codeintel.py --download         # and PINS: a real package per language,
                                                 # fetched once into --cache, then offline
    python bench/codeintel.py --download --only c,lua --misses   # some languages, what differs
    python bench/codeintel.py --tree DIR ...     # any directories

Pinned (PINS; test files and directories left out): PyPI wheels click==8.1.7 and
networkx==3.6.1 (Python); PyPI sdists lz4==4.3.3 (C: lz4libs and the bindings),
jpype1==1.5.1 (Java, C++) and pythonnet==3.0.5 (C#); npm express@4.21.2 (JavaScript),
zod@3.25.76 (TypeScript src/, JavaScript v3/ and v4/), node-addon-api@8.3.1 (C++),
expo-modules-core@2.2.3 (Kotlin, Swift); Debian golang-github-spf13-cobra-dev=1.6.1-1 (Go),
librust-regex-dev=1.7.1-1 (Rust), ruby-thor=1.2.1-2 (Ruby), php-monolog=2.9.1-1 (PHP),
bash-completion=1:2.11-6 (Bash; scripts named `.sh` when unpacked) and
lua-penlight=1.13.1-3 (Lua). No registry reached here ships Scala sources.

What is compared: definitions outside function bodies, types and callables
(class, struct, interface, enum, trait, module, typedef; function, method,
constructor, prototype), matched by name within each file (a multiset, so two
overloads must both be found). ctags tags whose scope is a function or method
are inside a body and are left out. Recall is the share of ctags' definitions
the outline has; precision the share of the outline's that ctags has. View
exactness: for each matched definition, `name@LINE` (LINE from ctags) must pick
exactly one symbol whose lines hold LINE — what `view PATH/name@LINE` shows.
A TypeScript overload run (`f(): T;`, `f(x: U): T;`, then the implementation)
counts once, as ctags tags it once; Python's `@overload` stubs count each, as
ctags tags each `def`.

Figures are printed twice: against ctags' raw output, and against it corrected
by CORRECTIONS, each rule a ctags error stated with a reason and an example
(and counted: how often it changed a tag). A rule may only fix what ctags gets
wrong; a disagreement it cannot state as ctags' error stays a miss.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from normalize.tools.code import find_symbols, language_for, outline

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "code"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "normalize-codeintel"
"""Downloaded archives and their unpacked trees: a rerun reads them and fetches nothing."""
TYPES = frozenset({"class", "struct", "interface", "enum", "trait", "module", "typedef", "union",
                   "record", "object", "protocol", "type", "singleton", "extension"})  # fmt: skip
CALLABLES = frozenset({"function", "method", "constructor", "prototype", "singletonMethod",
                       "declaration", "func", "subroutine", "member", "methodSpec",
                       "alias", "getter", "setter"})  # fmt: skip
"""JavaScript's `get x() {…}` is ctags' `getter`: an accessor, a method in the outline."""
BODY_SCOPES = frozenset({"function", "method", "func", "constructor", "singletonMethod"})
"""A tag scoped to one of these is inside a body (Python's methods are ctags' `member`s)."""
CTAGS_LANGUAGE = {
    "python": "Python", "javascript": "JavaScript", "typescript": "TypeScript",
    "tsx": "TypeScript", "go": "Go", "rust": "Rust", "java": "Java", "c": "C", "cpp": "C++",
    "ruby": "Ruby", "csharp": "C#", "php": "PHP", "bash": "Sh", "kotlin": "Kotlin", "lua": "Lua",
}  # fmt: skip
"""Swift and Scala have no parser in Universal Ctags 5.9: they are listed without figures."""
@dataclass(frozen=True)
class Pin:
    """A real package's sources: where they come from and which files each language scores."""

    label: str
    registry: str  # "pypi" (a wheel), "sdist" (PyPI source), "npm", "debian"
    spec: str  # what the registry's client is asked for, version pinned
    licence: str
    select: dict[str, str]  # language → globs (space-separated) under the unpacked root
    suffix: str = ""  # given to selected files of no known language (shell scripts)


PINS = (
    Pin("click 8.1.7", "pypi", "click==8.1.7", "BSD-3-Clause", {"python": "click/*.py"}),
    Pin("networkx 3.6.1", "pypi", "networkx==3.6.1", "BSD-3-Clause",
        {"python": "networkx/**/*.py"}),
    Pin("express 4.21.2", "npm", "express@4.21.2", "MIT", {"javascript": "package/**/*.js"}),
    Pin("zod 3.25.76", "npm", "zod@3.25.76", "MIT",
        {"javascript": "package/v3/**/*.js package/v4/**/*.js",
         "typescript": "package/src/**/*.ts"}),
    Pin("lz4 4.3.3", "sdist", "lz4==4.3.3", "BSD-3-Clause (lz4libs: BSD-2-Clause)",
        {"c": "lz4-4.3.3/**/*.c"}),
    Pin("node-addon-api 8.3.1", "npm", "node-addon-api@8.3.1", "MIT", {"cpp": "package/*.h"}),
    Pin("jpype1 1.5.1", "sdist", "jpype1==1.5.1", "Apache-2.0",
        {"cpp": "jpype1-1.5.1/native/common/**/*.cpp jpype1-1.5.1/native/python/**/*.cpp",
         "java": "jpype1-1.5.1/native/java/**/*.java"}),
    Pin("pythonnet 3.0.5", "sdist", "pythonnet==3.0.5", "MIT",
        {"csharp": "pythonnet-3.0.5/src/runtime/**/*.cs"}),
    Pin("cobra 1.6.1", "debian", "golang-github-spf13-cobra-dev=1.6.1-1", "Apache-2.0",
        {"go": "usr/share/gocode/src/github.com/spf13/cobra/**/*.go"}),
    Pin("regex 1.7.1", "debian", "librust-regex-dev=1.7.1-1", "MIT OR Apache-2.0",
        {"rust": "usr/share/cargo/registry/regex-1.7.1/src/**/*.rs"}),
    Pin("thor 1.2.1", "debian", "ruby-thor=1.2.1-2", "MIT",
        {"ruby": "usr/share/rubygems-integration/all/gems/thor-1.2.1/lib/**/*.rb"}),
    Pin("monolog 2.9.1", "debian", "php-monolog=2.9.1-1", "MIT",
        {"php": "usr/share/php/Monolog/**/*.php"}),
    Pin("bash-completion 2.11", "debian", "bash-completion=1:2.11-6", "GPL-2.0-or-later",
        {"bash": "usr/share/bash-completion/bash_completion* "
                 "usr/share/bash-completion/completions/*"}, suffix=".sh"),
    Pin("penlight 1.13.1", "debian", "lua-penlight=1.13.1-3", "MIT",
        {"lua": "usr/share/lua/5.1/pl/*.lua"}),
    Pin("expo-modules-core 2.2.3", "npm", "expo-modules-core@2.2.3", "MIT",
        {"kotlin": "package/android/src/**/*.kt", "swift": "package/ios/**/*.swift"}),
)  # fmt: skip
"""One real package per language at least, fetched by `--download` and cached (`--cache`).
Scala has none: no registry reached here ships Scala sources, and ctags 5.9 has no Scala
(or Swift) parser to compare with."""


@dataclass
class Score:
    """One language's counts."""

    files: int = 0
    ctags: int = 0
    ours: int = 0
    matched: int = 0
    viewed: int = 0
    exact: int = 0
    missed: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)


CORRECTIONS = (
    ("C1", "c cpp", "a scopeless function tag on a bare `NAME(…)` line (no type, no `;` or `{`) "
     "is a macro call ctags misreads, losing what follows; ctags is re-run with `-D NAME(...)=`",
     "DECLARE_LIST(int_list, int) → DECLARE_LIST dropped, the next real_function found"),
    ("CS1", "csharp", "a field tag named after the one parameter of an expression-bodied method "
     "`T NAME(Type p) => …` (a parameter type that is no built-in word; `=>` on that line or "
     "the next) is that method, which ctags loses: it becomes NAME (not after `operator`)",
     "static bool IsExported(Type type) => … → field `type` becomes method IsExported"),
    ("CS2", "csharp", "a class tag named after the type parameter of a `where` constraint on its "
     "line is the class declared there", "class EnumOps<T> where T : Enum → class `T` becomes "
     "EnumOps"),
    ("J1", "javascript", "a tag on a column-0 `OBJ.NAME = …` line is at file level whatever scope "
     "ctags guessed", "req.accepts = function(){ → scope `req` kind function, kept"),
    ("J2", "javascript", "a tag named after the object of `OBJ.NAME = function` takes NAME; a "
     "computed `OBJ[key] = function` has no name and is dropped",
     "res.get = function(field){ → `res` becomes get"),
    ("J3", "javascript typescript", "a tag whose scope resolves to a function or method is "
     "inside that body, as is one scoped to an `AnonymousFunction…` or to what J4 put in a body",
     "var ret = {…} scoped acceptParams (class)"),
    ("J4", "javascript", "a scopeless tag on an indented line is inside a construct ctags lost "
     "(an anonymous function, a call's argument)", "    router.use(path, function mounted_app("),
    ("J5", "javascript typescript", "an object literal ctags calls a class (`X = {`, `var x = {`, "
     "`module.exports = {`, `key: {`) is a value, not a type; its members are kept",
     "module.exports = { → class `exports` dropped"),
    ("J6", "javascript", "a class ctags infers from `X.prototype.y = …` is not defined there",
     "View.prototype.lookup = function → class View dropped, method lookup kept"),
    ("J7", "javascript typescript", "a constant, variable or property whose value is a function "
     "or arrow function is a function", "const loadConfig = async (path) => { → function"),
    ("J8", "javascript", "a column-0 `OBJ.NAME = function` or `= (…) =>` (or a chain `a.x =` / "
     "`a.y = …`) ctags left untagged is added",
     "req.get =\\n req.header = function header(name) {"),
    ("J9", "javascript typescript", "`export default function (…)` is added as `default`, the "
     "outline's name for it (ctags skips anonymous functions)", "export default function () {}"),
    ("J10", "javascript", "`OBJ.P = function N(` is one definition ctags tags twice, as P and N; "
     "it counts once, as P (as N for `module.exports = function N`, which has no P)",
     "module.exports = function query(options) { → `exports` dropped"),
    ("J11", "typescript", "a definite-assignment field `name!: T` makes ctags lose the rest of its "
     "class; ctags is re-run on the file with each such `!` blanked (same lines and columns)",
     "readonly _type!: Output; → ZodType's methods found"),
    ("J12", "typescript", "a class property whose value is a function with a block body makes "
     "ctags lose every later member of its class; ctags is re-run with its `=` and `=>` (or "
     "`function`) blanked, which reads as the method it is", "static create = (p): T => { → "
     "`static create   (p): T    {`, the methods after it found"),
    ("J13", "typescript", "a method named by a string makes ctags read its first parameter as a "
     "property and lose the rest of the class; ctags is re-run with the name's quotes and "
     "signs made word characters (same columns), the tag given the name back, unquoted",
     "\"~validate\"(data: unknown) { → method ~validate"),
    ("J14", "javascript", "a method named by a keyword (`default`, `catch`, `get`, …) makes ctags "
     "read its first parameter as a field and lose the rest of the class; at the first line "
     "where ctags put such a field, ctags is re-run with the name's last letter made `_` (same "
     "columns), until none is left, the tag given the name back",
     "default(def) { → field `def` becomes method default, ZodType's later methods found"),
    ("J15", "javascript", "a member access `.function` before a `)` makes ctags open a function "
     "there and scope every later tag of the file inside the enclosing body; ctags is re-run "
     "with it read as `.functio_` (same columns)", "if (t !== ZodParsedType.function) { → "
     "ZodFunction's later methods and the file's functions after it found"),
    ("J16", "javascript", "a function declared at column 0 with a name ctags reads as a keyword "
     "(get, set, async, let, static, prototype) is never tagged; it is added",
     "export function set(valueType, params) { → function set"),
    ("J17", "javascript", "an arrow function with a block body as an object's property, "
     "`key: (…) => {`, inside a class's method makes ctags end the method at its `}`: the "
     "method's later lines read as class members and the rest of the class is lost; where "
     "ctags tagged such a property inside a method, it is re-run with the `:`, `async` and "
     "`=>` blanked (same columns), which reads as the method shorthand it is",
     "addIssue: (arg) => { in ZodEffects._parse → `get path()` back in _parse's body"),
    ("L1", "lua", "ctags' Lua parser has no scopes: a tag inside another function's "
     "`function … end` (by a keyword scan of the file, strings and comments skipped) is in its "
     "body", "local function inner() inside function array2d.unpack"),
    ("L2", "lua", "a tag whose name is no Lua name (`Date[c]`, `%s*`, `{iter`) is a computed "
     "key or a `function` word inside a string", "'%s*function%s*(' → `%s*` dropped"),
    ("L3", "lua", "a `function NAME(…)` declaration whose line holds an `=` after its name "
     "(`return type(s) == 'string'`, `x = 1`) is never tagged: ctags' Lua parser reads the line "
     "as an assignment; outside function bodies it is added",
     "local function is_text(s) return type(s) == 'string' end → function is_text"),
    ("R1", "ruby", "a tag scoped to a method whose `def` is indented as deep as its own is that "
     "method's sibling: ctags lost the method's `end` (in a `<<-HELP` heredoc)",
     "def show_diff scoped Thor.Shell.file_collision_help → at class level"),
    ("S1", "bash", "a function tag whose name holds `=`, `{` or `}` is an array assignment "
     "`x=()` or a `${x%%(…}` expansion ctags reads as `name()`",
     "COMPREPLY=() → `COMPREPLY=` dropped"),
)
"""The rules the corrected figures apply to ctags' output: (id, languages, reason, example)."""
APPLIED: Counter[str] = Counter()
"""How many tags each rule changed in the last corrected measure."""
PROPERTY = re.compile(r"^((?:[A-Za-z_$][\w$]*\.)+)([A-Za-z_$][\w$]*)\s*=")
COMPUTED = re.compile(r"^\s*[A-Za-z_$][\w$.]*\[[^\]]*\]\s*=\s*(async\s+)?function")
OBJECT_VALUE = re.compile(r"[:=]\s*\{\s*(//.*)?$|[:=]\s*\{.*\}\s*[;,]?\s*$")
OPENS, CLOSES = "([{<", ")]}>"
CHAINED = re.compile(r"\s*[A-Za-z_$][\w$.]*\s*=(?![=>])")
SIMPLE_ARROW = re.compile(r"\s*(?:async\s+)?(?:function\b|[\w$]+\s*=>)")
NAMED_VALUE = re.compile(r"\s*(?:async\s+)?function\s*\*?\s*([A-Za-z_$][\w$]*)\s*\(")
LUA_NOISE = re.compile(r"--\[(=*)\[.*?\]\1\]|\[(=*)\[.*?\]\2\]|--[^\n]*|"
                       r"\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'", re.DOTALL)
"""Lua's comments and strings, long brackets included: no keyword counts inside them."""
LUA_DECLARED = re.compile(r"^\s*(?:local\s+)?function\s+(?P<name>[A-Za-z_][\w.:]*)\s*\(")
"""A Lua function declaration's line, for L3."""
SHELL_NOISE = re.compile(r"[={}]")
EXPRESSION_BODIED = re.compile(
    r"(?<![\w.])(?<!operator )(?P<method>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\s*(?:<[^()]*>)?\s*\("
    r"\s*(?:(?:ref|in|out|this|params)\s+)*[^,()]*?\b(?P<param>[A-Za-z_@]\w*)\s*\)"
    r"\s*(?:where\b[^=]*)?=>"
)
"""`IsExported(Type type) =>`: the method and its one parameter, for CS1."""
CONSTRAINED_CLASS = re.compile(r"\b(?:class|struct|interface)\s+(?P<type>\w+)\s*<[^>]*>.*?"
                               r"\bwhere\s+(?P<param>\w+)\s*:")
"""`class EnumOps<T> where T : Enum`: the class and its constrained parameter, for CS2."""
DEFINITE = re.compile(r"(?<=[\w$\]])!(?=\s*:)")
"""The `!` of a definite-assignment field, `readonly _type!: Output;`, for J11."""
STRING_METHOD = re.compile(r"^[ \t]+(?:async[ \t]+)?(?P<name>\"[^\"\n]*\"|'[^'\n]*')(?=[ \t]*[<(])",
                           re.MULTILINE)
"""A method named by a string, `"~validate"(data) {`, for J13."""
KEYWORD_METHOD = re.compile(
    r"^[ \t]+(?:(?:static|async)[ \t]+)*\*?[ \t]*(?P<name>default|catch|new|for|if|switch|do|"
    r"return|const|function|var|let|this|export|extends|finally|try|while|else|class|static|get|"
    r"set|async)(?=[ \t]*\()"
)
"""A class member line that opens with a keyword and `(`, `default(def) {`, for J14 (where
ctags tagged a field on it: a statement `if (x) {` in a body ctags read right it never does)."""
KEYWORD_FUNCTION = re.compile(r"(?:export\s+(?:default\s+)?)?(?:async\s+)?function\s*\*?\s*"
                              r"(?P<name>get|set|async|let|static|prototype)\s*\(")
"""`export function set(`, for J16."""
ARROW_PROPERTY = re.compile(r"^[ \t]+[A-Za-z_$][\w$]*[ \t]*(?P<colon>:)(?P<rest>.*)$")
"""An object's `key: …` line, for J17 (its value an arrow function with a block body)."""
FUNCTION_MEMBER = re.compile(r"(?<=\.)function(?=\s*\))")
"""`ZodParsedType.function)`, for J15."""
CLASS_PROPERTY = re.compile(
    r"^[ \t]+(?:(?:static|readonly|private|public|protected|override|declare)[ \t]+)*"
    r"[A-Za-z_$][\w$]*[ \t]*(?P<eq>=)(?![=>])", re.MULTILINE
)
"""A class member's `NAME =` (no `const`, no `this.`), for J12."""
COMMENT_LINE = re.compile(r"^\s*//.*")
"""A line that is only a comment, which J7 reads past (`const f = (\n// …\ncls) => …`)."""
BARE_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\(.*\)\s*$")


def skip_brackets(text: str, start: int) -> int:
    """The index past the bracket group opening at `start` (`=>` is no bracket), else -1."""
    depth, i = 0, start
    while i < len(text):
        if text.startswith("=>", i):
            i += 2
            continue
        depth += (text[i] in OPENS) - (text[i] in CLOSES)
        i += 1
        if depth == 0:
            return i
    return -1


def arrow_at(text: str) -> int:
    """Where the `=>` is of the arrow function `text` starts with (TypeScript's generics,
    parameter types and a return type that may hold `=>` itself included), else -1."""
    i = len(text) - len(text.lstrip())
    if text.startswith("async", i):
        i = len(text) - len(text[i + 5 :].lstrip())
    if text.startswith("<", i):
        i = skip_brackets(text, i)
    i = -1 if i < 0 else len(text) - len(text[i:].lstrip())
    if i < 0 or not text.startswith("(", i) or (end := skip_brackets(text, i)) < 0:
        return -1
    i = len(text) - len(text[end:].lstrip())
    if text.startswith("=>", i):
        return i
    if not text.startswith(":", i):
        return -1
    depth = 0  # a return type, up to the arrow at its own depth
    while (i := i + 1) < len(text):
        if text.startswith("=>", i) and depth == 0:
            return i
        if text.startswith("=>", i):
            i += 1
            continue
        depth += (text[i] in OPENS) - (text[i] in CLOSES)
        if depth < 0 or (depth == 0 and text[i] in ";,="):
            return -1
    return -1


def starts_function(text: str) -> bool:
    """Whether `text` starts with a function or an arrow function."""
    return bool(SIMPLE_ARROW.match(text)) or arrow_at(text) >= 0


def function_value(text: str, js: bool) -> bool:
    """Whether the declaration starting `text` (its line and the next ones) has a function
    value: what follows its `=` (or, in JavaScript, `:`) at bracket depth 0. TypeScript's
    `x: () => T` is a type, and `const f: () => T = () => …` is typed and then a function."""
    i, depth = 0, 0
    while i < len(text):
        if text.startswith("=>", i):
            i += 2
            continue
        char = text[i]
        if depth == 0 and (char == "=" or (js and char == ":")) and text[i + 1 : i + 2] != "=":
            value = text[i + 1 :]
            while chain := CHAINED.match(value):  # `var proto = module.exports = function`
                value = value[chain.end() :]
            return text[i - 1 : i] not in ("!", "<", ">", "=") and starts_function(value)
        depth += (char in OPENS) - (char in CLOSES)
        if depth < 0 or (depth == 0 and char in ";{"):
            return False
        i += 1
    return False


def ctags_tags(path: Path, lang: str, macros: frozenset[str] = frozenset()) -> list[dict[str, str]]:
    """ctags' raw JSON tags for one file."""
    argv = [shutil.which("ctags") or "ctags", "--output-format=json", "--fields=+nKZ",
            f"--language-force={lang}", "--extras=-{anonymous}", "-f", "-", str(path)]  # fmt: skip
    if lang in ("C", "C++"):
        argv[1:1] = [f"--kinds-{lang}=+p", *(f"-D{name}(...)=" for name in sorted(macros))]
    out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    return [json.loads(line) for line in out.splitlines()]


def ctags_on_text(name: str, text: str, lang: str) -> list[dict[str, str]]:
    """ctags' tags for `text` as a file called `name`."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / name
        copy.write_text(text, encoding="utf-8")
        return ctags_tags(copy, lang)


def ctags_readable(text: str) -> str:
    """Rules J11-J13: TypeScript as ctags can read it, every line and column kept."""
    out = list(text)

    def blank(start: int, end: int) -> None:
        out[start:end] = " " * (end - start)

    for match in DEFINITE.finditer(text):
        APPLIED["J11"] += 1
        blank(*match.span())
    for match in STRING_METHOD.finditer(text):
        APPLIED["J13"] += 1
        start, end = match.span("name")
        out[start:end] = re.sub(r"\W", "_", match["name"])
    for match in CLASS_PROPERTY.finditer(text):
        after = text[match.end() :]
        word = re.match(r"\s*function\b", after)
        arrow = -1 if word else arrow_at(after)
        if word is None and (arrow < 0 or not after[arrow + 2 :].lstrip().startswith("{")):
            continue
        APPLIED["J12"] += 1
        blank(*match.span("eq"))
        if word:
            blank(match.end() + word.end() - 8, match.end() + word.end())
        else:
            blank(match.end() + arrow, match.end() + arrow + 2)
    return "".join(out)


def ctags_on_javascript(path: Path, tags: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rules J15, J17 then J14: ctags' tags for a copy of a JavaScript file it can read, every
    line and column kept, each method renamed given its name back."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if found := len(FUNCTION_MEMBER.findall(text)):
        APPLIED["J15"] += found
        text = FUNCTION_MEMBER.sub("functio_", text)
        tags = ctags_on_text(path.name, text, "JavaScript")
    lines, blanked = text.split("\n"), 0
    named: dict[int, tuple[str, str]] = {}
    methods = {f"{t['scope']}.{t['name']}" for t in tags
               if t.get("kind") == "method" and t.get("scopeKind") == "class"}  # fmt: skip
    for number in sorted({int(t["line"]) for t in tags if t.get("kind") == "property"
                          and any(t.get("scope", "").startswith(m + ".") for m in methods)}):
        if (method := arrow_property_as_method(lines[number - 1])) is not None:
            lines[number - 1], blanked = method, blanked + 1
    if blanked:
        APPLIED["J17"] += blanked
        tags = ctags_on_text(path.name, "\n".join(lines), "JavaScript")
    while fields := sorted(int(t["line"]) for t in tags if t.get("kind") == "field"
                           and KEYWORD_METHOD.match(lines[int(t["line"]) - 1])):  # fmt: skip
        number = fields[0]  # what comes after ctags' first error is no evidence
        match = KEYWORD_METHOD.match(lines[number - 1])
        assert match is not None
        end = match.end("name")
        named[number] = (match["name"][:-1] + "_", match["name"])
        lines[number - 1] = lines[number - 1][: end - 1] + "_" + lines[number - 1][end:]
        APPLIED["J14"] += 1
        tags = ctags_on_text(path.name, "\n".join(lines), "JavaScript")
    return names_given_back(tags, named)


def arrow_property_as_method(line: str) -> str | None:
    """J17: `key: async (p) => {` as `key        (p)    {`, else None (no such property)."""
    prop = ARROW_PROPERTY.match(line)
    if prop is None:
        return None
    rest = prop["rest"]
    arrow = arrow_at(rest)
    if arrow < 0 or not rest[arrow + 2 :].lstrip().startswith("{"):
        return None
    head = re.sub(r"^(\s*)async\b", lambda m: m[1] + "     ", rest[:arrow])
    return line[: prop.start("colon")] + " " + head + "  " + rest[arrow + 2 :]


def names_given_back(
    tags: list[dict[str, str]], named: dict[int, tuple[str, str]]
) -> list[dict[str, str]]:
    """Tags on a line of `named` (line → (name written in the copy, real name)) that carry
    the written name get the real one back."""
    for tag in tags:
        written, name = named.get(int(tag["line"]), ("", ""))
        if tag["name"] == written:
            tag["name"] = name
    return tags


def pattern(tag: dict[str, str]) -> str:
    return tag.get("pattern", "/^$/")[2:-2].replace("\\/", "/")


def macro_calls(tags: list[dict[str, str]]) -> frozenset[str]:
    """C1: names of scopeless function tags on a bare `NAME(…)` line."""
    return frozenset(
        tag["name"] for tag in tags
        if tag.get("kind") == "function" and "scope" not in tag and "typeref" not in tag
        and (m := BARE_CALL.match(pattern(tag))) and m.group(1) == tag["name"]
    )  # fmt: skip


def correct_js(tags: list[dict[str, str]], lines: list[str], js: bool) -> list[dict[str, str]]:
    """Rules J1-J10 on one JavaScript or TypeScript file's tags."""
    functions = [t for t in tags if t.get("kind") in ("function", "method")]
    callables = {(t.get("scope"), t["name"]) for t in functions}
    callables |= {(None, t["scope"] + "." + t["name"]) for t in functions if t.get("scope")}
    out: list[dict[str, str]] = []
    hidden = {t["name"] for t in tags if js and t["kind"] in ("class", "function")
              and "scope" not in t and pattern(t)[:1].isspace()}  # fmt: skip
    for tag in tags:
        tag, text = dict(tag), pattern(tag)
        prop = PROPERTY.match(text)
        if js and tag["kind"] == "class" and prop and ".prototype." in prop.group(1):
            APPLIED["J6"] += 1
            continue
        if js and prop:
            APPLIED["J1"] += tag.pop("scopeKind", None) in BODY_SCOPES
            tag.pop("scope", None)
            if tag["name"] == prop.group(1).split(".")[0]:
                tag["name"] = prop.group(2)
                APPLIED["J2"] += 1
        if js and prop and (named := NAMED_VALUE.match(text[prop.end():])):
            own, left = named.group(1), prop.group(2)
            dropped = left if prop.group(0).startswith("module.exports") else own
            if own != left and tag["name"] == dropped:
                APPLIED["J10"] += 1
                continue
        if js and not prop and tag["kind"] in ("function", "class") and COMPUTED.match(text):
            APPLIED["J2"] += 1
            continue
        scope = tag.get("scope")
        parts = scope.split(".") if scope else []
        prefixes = {".".join(parts[:n]) for n in range(1, len(parts) + 1)} | set(parts)
        anonymous = bool(parts) and (parts[0] in hidden or parts[0].startswith("AnonymousFunc"))
        if anonymous or any((None, p) in callables for p in prefixes):
            APPLIED["J3"] += tag.get("scopeKind") != "function"
            tag["scopeKind"] = "function"
        if js and not scope and text[:1].isspace():
            tag["scopeKind"] = "function"
            APPLIED["J4"] += 1
        if tag["kind"] == "class" and OBJECT_VALUE.search(text):
            APPLIED["J5"] += 1
            continue
        line = int(tag["line"])
        following = "\n".join(COMMENT_LINE.sub("", t) for t in lines[line - 1 : line + 11])
        if tag["kind"] in ("constant", "variable", "property") and function_value(following, js):
            tag["kind"] = "function"
            APPLIED["J7"] += 1
        out.append(tag)
    tagged = {int(t["line"]) for t in tags}
    for number, text in enumerate(lines, 1):
        prop = PROPERTY.match(text)
        rest = text[prop.end():] if prop else ""
        chained = not rest.strip() and number < len(lines) and PROPERTY.match(lines[number])
        if js and prop and (starts_function(rest) or chained):
            if number not in tagged:
                APPLIED["J8"] += 1
                out.append({"name": prop.group(2), "line": str(number), "kind": "function"})
        keyword = KEYWORD_FUNCTION.match(text) if js else None
        if keyword and not any(int(t["line"]) == number and t["name"] == keyword["name"]
                               for t in tags):  # fmt: skip
            APPLIED["J16"] += 1
            out.append({"name": keyword["name"], "line": str(number), "kind": "function"})
        if re.match(r"export\s+default\s+(async\s+)?function\s*\(", text):
            APPLIED["J9"] += 1
            out.append({"name": "default", "line": str(number), "kind": "function"})
    return out


def lua_function_depths(text: str) -> list[int]:
    """Per line (1-based, index 0 unused), how many `function … end` bodies enclose it."""
    text = re.sub(LUA_NOISE, lambda m: re.sub(r"[^\n]", " ", m[0]), text)
    depths, stack = [0], []
    for line in text.split("\n"):
        depths.append(stack.count("function"))
        for word in re.findall(r"\b(function|do|then|repeat|end|until|elseif)\b", line):
            if word in ("function", "do", "then", "repeat"):
                stack.append(word)
            elif stack:  # `elseif` closes its `then`; its own `then` opens the next
                stack.pop()
    return depths


def correct_csharp(tags: list[dict[str, str]], lines: list[str]) -> list[dict[str, str]]:
    """Rules CS1 and CS2 on one C# file's tags (a method's `=>` may be on the next line)."""
    out = []
    for tag in tags:
        line = int(tag["line"])
        body = EXPRESSION_BODIED.search(" ".join(lines[line - 1 : line + 1]))
        if tag.get("kind") == "field" and body and body["param"] == tag["name"]:
            tag = {**tag, "name": body["method"], "kind": "method"}
            APPLIED["CS1"] += 1
        constrained = CONSTRAINED_CLASS.search(pattern(tag))
        if tag.get("kind") in ("class", "struct", "interface") and constrained and \
                constrained["param"] == tag["name"]:
            tag = {**tag, "name": constrained["type"]}
            APPLIED["CS2"] += 1
        out.append(tag)
    return out


def correct_ruby(tags: list[dict[str, str]]) -> list[dict[str, str]]:
    """Rule R1 on one Ruby file's tags."""
    def indent(tag: dict[str, str]) -> int:
        text = pattern(tag)
        return len(text) - len(text.lstrip())

    methods = {(t.get("scope"), t["name"]): t for t in tags if t.get("kind") == "method"}
    out = []
    for tag in tags:
        tag = dict(tag)
        while tag.get("scopeKind") == "method":
            parent, _, name = tag["scope"].rpartition(".")
            enclosing = methods.get((parent or None, name))
            if enclosing is None or indent(enclosing) != indent(tag):
                break
            APPLIED["R1"] += 1
            tag["scope"], tag["scopeKind"] = parent, enclosing.get("scopeKind", "class")
        out.append(tag)
    return out


def correct_lua(tags: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    """Rules L1-L3 on one Lua file's tags."""
    depths, out, tagged = lua_function_depths(text), [], {int(t["line"]) for t in tags}
    for number, line in enumerate(text.split("\n"), 1):
        declared = LUA_DECLARED.match(line)
        if declared and "=" in line[declared.end() :] and number not in tagged \
                and not depths[number]:
            APPLIED["L3"] += 1
            out.append({"name": declared["name"], "line": str(number), "kind": "function"})
    for tag in tags:
        line = int(tag["line"])
        if not re.fullmatch(r"[A-Za-z_][\w.:]*", tag["name"]):
            APPLIED["L2"] += 1
        elif line < len(depths) and depths[line]:
            APPLIED["L1"] += 1
        else:
            out.append(tag)
    return out


def ctags_definitions(
    path: Path, language: str, corrected: bool = False
) -> list[tuple[str, int]] | None:
    """(name, line) of ctags' definitions outside function bodies; None without a parser.

    With `corrected`, the CORRECTIONS rules are applied to ctags' output first.
    """
    if shutil.which("ctags") is None or language not in CTAGS_LANGUAGE:
        return None
    lang = CTAGS_LANGUAGE[language]
    tags = ctags_tags(path, lang)
    if corrected and lang in ("C", "C++"):
        macros: frozenset[str] = frozenset()
        while (more := macros | macro_calls(tags)) != macros:
            APPLIED["C1"] += len(more - macros)
            macros = more
            tags = ctags_tags(path, lang, macros)
    if corrected and lang in ("JavaScript", "TypeScript"):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if lang == "TypeScript":
            text = path.read_text(encoding="utf-8", errors="replace")
            if (fixed := ctags_readable(text)) != text:
                named = {text.count("\n", 0, m.start()) + 1: (re.sub(r"\W", "_", m["name"]),
                                                              m["name"][1:-1])
                         for m in STRING_METHOD.finditer(text)}  # fmt: skip
                tags = names_given_back(ctags_on_text(path.name, fixed, lang), named)
        else:
            tags = ctags_on_javascript(path, tags)
        tags = correct_js(tags, lines, lang == "JavaScript")
    if corrected and lang == "C#":
        tags = correct_csharp(tags, path.read_text(encoding="utf-8", errors="replace").split("\n"))
    if corrected and lang == "Ruby":
        tags = correct_ruby(tags)
    if corrected and lang == "Lua":
        tags = correct_lua(tags, path.read_text(encoding="utf-8", errors="replace"))
    if corrected and lang == "Sh":
        shell = [t for t in tags if not SHELL_NOISE.search(t["name"])]
        APPLIED["S1"] += len(tags) - len(shell)
        tags = shell
    found = []
    for tag in tags:
        kind = tag.get("kind", "")
        scope = tag.get("scopeKind")
        if kind not in TYPES | CALLABLES or scope in BODY_SCOPES or (
            scope == "member" and lang == "Python"
        ):
            continue
        if kind == "member" and lang != "Python":  # Python's methods; elsewhere data members
            continue
        if kind == "alias" and lang == "PHP":  # a `use A\\B;` import, not a definition
            continue
        name = tag["name"]
        if name.startswith("operator") and lang in ("C++", "C#"):  # `operator !=`: `operator!=`
            name = "operator " + name[8:].strip() if name[8:9].isspace() and name[9:10].isalpha() \
                else name.replace(" ", "")
        else:
            name = name.split(".")[-1].split(":")[-1]  # Lua's `M.new`, `M:add`
        if name.startswith("__anon") or name == "<lambda>":
            continue
        found.append((name, int(tag["line"])))
    return sorted(set(found))  # JavaScript: `res.x = function x()` is tagged twice


def score_file(path: Path, score: Score, corrected: bool = False) -> None:
    language = language_for(path)
    assert language is not None
    text = path.read_text(encoding="utf-8", errors="replace")
    symbols = outline(path, text) or []
    theirs = ctags_definitions(path, language, corrected)
    score.files += 1
    # a TypeScript overload run is one definition, as ctags tags it: its stubs are not counted
    counted = TYPES | CALLABLES | {"test"} | ({"overload"} if language != "typescript" else set())
    ours_list = [s for top in symbols for s in top.walk() if s.kind in counted]
    # ctags names `TEST(Suite, Name) {…}` after its macro; the outline after the test
    # and Ruby's `class Thor::Group` after its last segment, as ctags does
    ours = Counter(s.signature.split("(")[0] if s.kind == "test" else
                   s.name.split("<")[0].split("::")[-1] if language == "ruby" else
                   s.name.split("<")[0] for s in ours_list)  # fmt: skip
    score.ours += sum(ours.values())
    if theirs is None:
        return
    wanted = Counter(name for name, _ in theirs)
    score.ctags += sum(wanted.values())
    both = wanted & ours
    score.matched += sum(both.values())
    score.missed += [f"{path.name}:{n}" for n in (wanted - ours).elements()]
    score.extra += [f"{path.name}:{n}" for n in (ours - wanted).elements()]
    for name, line in theirs:
        if not both.get(name):
            continue
        score.viewed += 1
        hits = find_symbols(symbols, f"{name}@{line}")
        score.exact += len(hits) == 1 and hits[0].first_line <= line <= hits[0].end_line


def fetch(pin: Pin, cache: Path) -> Path:
    """The pin's archive, from the cache or else its registry's client, unpacked once."""
    slug = re.sub(r"[^\w.-]+", "_", pin.spec)
    tree, archives = cache / "trees" / slug, cache / "archives" / slug
    if tree.is_dir():
        return tree
    archives.mkdir(parents=True, exist_ok=True)
    if not any(archives.iterdir()):
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", str(archives)]
        argv = {
            "pypi": [*pip, "--only-binary", ":all:", pin.spec],
            "sdist": [*pip, "--no-binary", ":all:", pin.spec],
            "npm": [shutil.which("npm") or "npm", "pack", "-q", pin.spec],
            "debian": [shutil.which("apt-get") or "apt-get", "download", "-q", pin.spec],
        }[pin.registry]
        subprocess.run(argv, cwd=archives, check=True, capture_output=True)
    scratch = Path(tempfile.mkdtemp(dir=cache, prefix=".unpack-"))
    for archive in archives.iterdir():
        if archive.suffix == ".whl":
            with zipfile.ZipFile(archive) as wheel:
                wheel.extractall(scratch)
        elif archive.suffix == ".deb":
            subprocess.run(["dpkg-deb", "-x", str(archive), str(scratch)], check=True)
        else:
            with tarfile.open(archive) as tar:
                tar.extractall(scratch, filter="data")
    for language in pin.select if pin.suffix else ():
        for path in selected(pin, scratch, language):
            if language_for(path) is None:
                path.rename(path.with_name(path.name + pin.suffix))
    tree.parent.mkdir(parents=True, exist_ok=True)
    scratch.rename(tree)
    return tree


def selected(pin: Pin, tree: Path, language: str) -> list[Path]:
    """The pin's files for one language: regular files of it (or, before the suffix is given,
    of none), no symlinks, no tests, sorted."""
    found = {path for glob in pin.select[language].split() for path in tree.glob(glob)}
    return sorted(path for path in found if path.is_file() and not path.is_symlink()
                  and language_for(path) in (language, pin.suffix and None)
                  and not TESTS.search(str(path.relative_to(tree))))  # fmt: skip


TESTS = re.compile(r"(^|/)(tests?|testing|__tests__|benchmarks?)/|test[^/]*$", re.IGNORECASE)
"""Test files and directories are left out of pinned packages: test macros are not the API."""


def measure_files(
    files: list[tuple[Path, str]], corrected: bool = False
) -> dict[str, Score]:
    """Scores per language over (path, language) pairs."""
    scores: dict[str, Score] = {}
    for path, language in files:
        score_file(path, scores.setdefault(language, Score()), corrected)
    return scores


def measure(trees: list[Path], corrected: bool = False) -> dict[str, Score]:
    """Scores per language over whole directories (the fixtures, `--tree`)."""
    return measure_files(tree_files(trees), corrected)


def tree_files(trees: list[Path]) -> list[tuple[Path, str]]:
    """Every outlined file under the trees, with its language (TSX scored as TypeScript)."""
    files = []
    for tree in trees:
        for path in sorted(tree.rglob("*")):
            language = language_for(path) if path.is_file() else None
            if language is None or ("test" in path.parts[-1].lower() and tree != FIXTURES):
                continue
            if tree == FIXTURES and "stress" in path.relative_to(tree).parts:
                continue  # written to break parsers, see tests/fixtures/code/stress/README.md
            files.append((path, "typescript" if language == "tsx" else language))
    return files


Row = tuple[str, str, Score, Score]
"""(language, repository, raw score, corrected score)."""


def ratio(part: int, whole: int) -> str:
    return f"{part / whole:.2f}" if whole else "–"


def table(rows: list[Row]) -> str:
    """The corrected figures, each with the raw one beside it where they differ."""
    out = ["| language | repository | files | ctags defs | outline defs | recall | precision "
           "| view exact |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for language, repo, raw, fixed in rows:
        if not fixed.ctags:
            out.append(f"| {language} | {repo} | {fixed.files} | (no ctags parser) | "
                       f"{fixed.ours} | – | – | – |")  # fmt: skip
            continue
        cells = []
        for now, was in ((ratio(fixed.matched, fixed.ctags), ratio(raw.matched, raw.ctags)),
                         (ratio(fixed.matched, fixed.ours), ratio(raw.matched, raw.ours))):
            cells.append(now if now == was else f"{now} (raw {was})")  # fmt: skip
        defs = f"{fixed.ctags}" + (f" (raw {raw.ctags})" if raw.ctags != fixed.ctags else "")
        out.append(f"| {language} | {repo} | {fixed.files} | {defs} | {fixed.ours} | "
                   f"{cells[0]} | {cells[1]} | {ratio(fixed.exact, fixed.viewed)} |")
    return "\n".join(out)


def rows(pins: tuple[Pin, ...], cache: Path | None, trees: list[Path]) -> list[Row]:
    """The fixtures' rows, then each pin's (fetched into `cache`), then each `--tree`'s."""
    sources: list[tuple[str, list[tuple[Path, str]]]] = []
    for label, tree in [("fixtures", FIXTURES), *((str(t), t) for t in trees)]:
        sources.append((label, tree_files([tree])))
    for pin in pins if cache else ():
        assert cache is not None
        tree = fetch(pin, cache)
        sources.append((pin.label, [(p, lang) for lang in pin.select
                                    for p in selected(pin, tree, lang)]))  # fmt: skip
    out: list[Row] = []
    for label, files in sources:
        raw, fixed = measure_files(files), measure_files(files, corrected=True)
        out += [(lang, label, raw[lang], fixed[lang]) for lang in sorted(fixed)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--download", action="store_true", help="fetch and score PINS too")
    parser.add_argument("--cache", type=Path, default=CACHE, help=f"default {CACHE}")
    parser.add_argument("--tree", type=Path, action="append", default=[])
    parser.add_argument("--misses", action="store_true", help="list what each side lacks")
    parser.add_argument("--only", default="", help="languages to score, comma-separated")
    args = parser.parse_args()
    if shutil.which("ctags") is None:
        sys.exit("ctags not found: apt-get install universal-ctags")
    only = set(args.only.split(",")) - {""}
    pins = tuple(p for p in PINS if not only or only & set(p.select))
    found = [r for r in rows(pins, args.cache if args.download else None, args.tree)
             if not only or r[0] in only]  # fmt: skip
    print(table(found) + "\n")
    for rule, langs, why, example in CORRECTIONS:
        print(f"{rule} [{langs}, applied {APPLIED[rule]}x] {why}; e.g. {example}")
    if args.misses:
        for language, repo, _, s in found:
            print(f"{language} {repo} (corrected): missed {s.missed} extra {s.extra}")


if __name__ == "__main__":
    main()
