"""normalize.tools.code: outlines, symbol lookup and the outline formatter."""

from __future__ import annotations

import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from normalize.tools.code import (
    Symbol,
    find_symbol,
    language_for,
    outline,
    outline_text,
    supported_languages,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "code"


def symbols_of(name: str) -> list[Symbol]:
    path = FIXTURES / name
    found = outline(path, path.read_text(encoding="utf-8"))
    assert found is not None
    return found


def big_python(chunks: int = 250) -> str:
    """A Python file of `chunks` * 20 lines, each a class with two methods and a function."""
    parts = []
    for i in range(chunks):
        parts.append(
            f"class C{i}:\n    @property\n    def a{i}(self) -> int:\n        return {i}\n\n"
            f"    def b{i}(self, y: int) -> int:\n        return y\n\n\n"
            f"def f{i}(a, b):\n    total = a + b\n    for k in range(3):\n"
            f"        total += k\n    if total > 10:\n        total -= 1\n"
            f"    while total > 100:\n        total //= 2\n    return total\n\n\n"
        )
    return "".join(parts)


def test_importing_the_package_loads_no_grammar() -> None:
    code = (
        "import sys, normalize.tools.code, normalize.tools.view, normalize.tools.grep\n"
        "loaded = [m for m in sys.modules if m.startswith('tree_sitter')]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_languages() -> None:
    assert supported_languages() == [
        "bash", "c", "cpp", "csharp", "go", "java", "javascript", "kotlin", "lua", "php",
        "python", "ruby", "rust", "scala", "swift", "tsx", "typescript",
    ]  # fmt: skip
    assert language_for("a/b.py") == "python"
    assert language_for("x.TSX") == "tsx"
    assert language_for("x.h") == "cpp"
    assert language_for("README.md") is None
    assert outline("notes.txt", "def f(): pass") is None


# (fixture, {top-level name: kind})
TOP_LEVEL = [
    ("sample.py", {"MAX_ITEMS": "constant", "Inventory": "class", "mean": "function",
                   "fetch_all": "function"}),
    ("sample.js", {"Emitter": "class", "mean": "function", "loadConfig": "function"}),
    ("sample.ts", {"Job": "interface", "JobResult": "type", "Priority": "enum",
                   "Queue": "class", "mean": "function", "double": "function",
                   "Internal": "namespace"}),
    ("sample.go", {"MaxConns": "constant", "Server": "struct", "Handler": "interface",
                   "Start": "method", "Stop": "method", "Mean": "function"}),
    ("sample.rs", {"Point": "struct", "Shape": "trait", "Kind": "enum", "mean": "function",
                   "tests": "module"}),
    ("sample.java", {"Account": "class"}),
    ("sample.c", {"SQUARE": "macro", "stack": "struct", "point": "struct",
                  "stack_push": "function", "mean": "function"}),
    ("sample.cpp", {"geo": "namespace"}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "expected"), TOP_LEVEL, ids=[t[0] for t in TOP_LEVEL])
def test_outline_finds_top_level_symbols(name: str, expected: dict[str, str]) -> None:
    kinds = {s.name: s.kind for s in symbols_of(name) if s.kind not in ("impl", "declaration")}
    assert kinds == expected


# (fixture, spec, kind, line, end_line, signature)
LOOKUPS = [
    ("sample.py", "Inventory/add", "method", 16, 20,
     "def add(self, name: str, count: int = 1) -> None:"),
    ("sample.py", "Inventory/Report/render", "method", 29, 31,
     "def render(self, inventory: Inventory) -> str:"),
    ("sample.py", "Inventory", "class", 10, 31, "class Inventory:"),
    ("sample.py", "Inventory.total", "method", 22, 24, "def total(self) -> int:"),
    ("sample.py", "fetch_all", "function", 39, 43,
     "async def fetch_all(names: list[str], limit: int = 10) -> list[str]:"),
    ("sample.js", "Emitter/on", "method", 9, 13, "on(event, handler)"),
    ("sample.js", "loadConfig", "function", 26, 29, "const loadConfig = async (path) =>"),
    ("sample.ts", "Queue/push", "method", 20, 26, "push(job: T): boolean"),
    ("sample.ts", "Job/run", "method", 5, 5, "run(input: string): Promise<string>"),
    ("sample.ts", "Internal/helper", "function", 44, 46, "export function helper(): string"),
    ("sample.ts", "Queue", "class", 15, 35, "export class Queue<T extends Job>"),
    ("sample.go", "Server/Start", "method", 24, 30,
     "func (s *Server) Start(ctx context.Context) error"),
    ("sample.go", "Server", "struct", 13, 16, "type Server struct"),
    ("sample.go", "Handler/Serve", "method", 20, 20,
     "Serve(ctx context.Context, req string) (string, error)"),
    ("sample.rs", "Point", "struct", 6, 10, "pub struct Point"),
    ("sample.rs", "Point/distance", "method", 17, 19,
     "pub fn distance(&self, other: &Point) -> f64"),
    ("sample.rs", "Point::fmt", "method", 23, 25,
     "fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result"),
    ("sample.rs", "tests/helper", "function", 42, 44, "pub fn helper() -> u32"),
    ("sample.java", "Account/deposit", "method", 15, 20, "public void deposit(long cents)"),
    ("sample.java", "Account/toString", "method", 22, 25, "public String toString()"),
    ("sample.java", "Account/Listener/changed", "method", 40, 40,
     "void changed(Account account)"),
    ("sample.java", "Account/Account", "constructor", 11, 13, "public Account(String owner)"),
    ("sample.c", "stack_push", "function", 20, 27, "int stack_push(struct stack *s, int value)"),
    ("sample.c", "point", "struct", 13, 16, "typedef struct { … } point"),
    ("sample.cpp", "geo/Circle/area", "method", 12, 14, "double area() const"),
    ("sample.cpp", "Circle/describe", "method", 22, 24, "std::string Circle::describe() const"),
    ("sample.cpp", "geo/mean", "function", 26, 33,
     "template <typename T> T mean(const std::vector<T>& xs)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("name", "spec", "kind", "line", "end_line", "signature"),
    LOOKUPS,
    ids=[f"{t[0]}:{t[1]}" for t in LOOKUPS],
)
def test_find_symbol(
    name: str, spec: str, kind: str, line: int, end_line: int, signature: str
) -> None:
    symbol = find_symbol(symbols_of(name), spec)
    assert symbol is not None
    assert (symbol.kind, symbol.line, symbol.end_line, symbol.signature) == (
        kind,
        line,
        end_line,
        signature,
    )


def test_methods_declared_outside_their_type_know_their_owner() -> None:
    start = find_symbol(symbols_of("sample.go"), "Start")
    assert start is not None and start.owner == "Server"
    impls = [s for s in symbols_of("sample.rs") if s.kind == "impl"]
    assert [(s.name, s.signature) for s in impls] == [
        ("Point", "impl Point"),
        ("Point", "impl fmt::Display for Point"),
    ]


def test_definitions_beat_declarations() -> None:
    # sample.c declares stack_push on line 18 and defines it on 20
    assert [s.kind for s in symbols_of("sample.c") if s.name == "stack_push"] == [
        "declaration",
        "function",
    ]
    circle = find_symbol(symbols_of("sample.cpp"), "geo/Circle")
    assert circle is not None
    assert [(c.name, c.kind) for c in circle.children] == [
        ("Circle", "method"),
        ("area", "method"),
        ("describe", "declaration"),
    ]


def test_python_docstrings_and_decorators() -> None:
    inventory = find_symbol(symbols_of("sample.py"), "Inventory")
    assert inventory is not None
    assert inventory.doc == "Items kept by name, with counts."
    assert inventory.line == 10  # the @dataclass line, not `class` on 11
    assert [c.name for c in inventory.children] == ["add", "total", "Report"]


def test_python_definitions_under_conditions_are_found() -> None:
    source = (
        "try:\n    from fast import parse\nexcept ImportError:\n    def parse(text): ...\n"
        "if TYPE_CHECKING:\n    class Proto: ...\n"
        "def outer():\n    def inner(): ...\n"
    )
    symbols = outline("m.py", source)
    assert symbols is not None
    assert [(s.name, s.line) for s in symbols] == [("parse", 4), ("Proto", 6), ("outer", 7)]


def test_find_symbol_misses() -> None:
    symbols = symbols_of("sample.py")
    assert find_symbol(symbols, "nope") is None
    assert find_symbol(symbols, "Inventory/nope") is None
    assert find_symbol(symbols, "") is None
    assert find_symbol(symbols, "mean/Inventory") is None


def test_outline_survives_broken_and_empty_code() -> None:
    assert outline("a.py", "") == []
    broken = outline("a.py", "def ok():\n    return 1\n\ndef broken(:\n    pass\n")
    assert broken is not None and broken[0].name == "ok"
    weird = outline("a.go", "package x\nfunc (\n")
    assert weird is not None


def test_outline_text_format() -> None:
    text = outline_text(symbols_of("sample.py"))
    lines = text.splitlines()
    assert lines[0] == "    7  MAX_ITEMS = 100"
    assert "10-31  class Inventory:  # Items kept by name, with counts." in lines
    add = "16-20    def add(self, name: str, count: int = 1) -> None:  # Add `count` of `name`."
    assert add in lines
    assert "29-31      def render(self, inventory: Inventory) -> str:" in lines
    capped = outline_text(symbols_of("sample.py"), max_lines=2, docs=False).splitlines()
    assert capped == ["    7  MAX_ITEMS = 100", "10-31  class Inventory:", "… 6 more symbols"]


def test_five_thousand_lines_outline_fast() -> None:
    text = big_python()
    assert text.count("\n") == 5000
    outline("warm.py", "x = 1\n")  # the grammar loads once per process
    timings = []
    for _ in range(3):  # CPU time: other processes on a busy machine do not count
        started = time.process_time()
        symbols = outline("big.py", text)
        timings.append(time.process_time() - started)
    assert symbols is not None and len(symbols) == 500
    assert min(timings) < 0.1, f"outline took {min(timings) * 1000:.0f} ms"


def test_outline_from_many_threads() -> None:
    names = [t[0] for t in TOP_LEVEL] * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(symbols_of, names))
    assert [len(r) for r in results[:8]] == [len(r) for r in results[8:16]]
