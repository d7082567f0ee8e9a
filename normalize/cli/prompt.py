"""The prompt a person types commands at: prompt-toolkit with history and completion.

    reader = PromptReader(workspace, history=data_home() / "history")
    line = reader("[abc 1] › ")      # one command; a heredoc comes back with its body

Completion offers the verbs for the first word, then paths relative to the
workspace, and symbols inside a source file (`calc.py/Calc/me<TAB>`). A line
ending in `<<TAG` keeps reading until a line that is exactly TAG. `help`
prints the command reference; Ctrl-D (end of input) finishes; Ctrl-C at the
prompt stops the run. Importing this module imports prompt-toolkit, so the
CLI imports it only when a person is at the prompt (see `console.prompt_reader`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory, History, InMemoryHistory

from normalize.intents import VERBS, command_reference, verb_for

if TYPE_CHECKING:
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output

    from normalize.tools.code.symbols import Symbol

HELP_WORDS = frozenset({"help", "?"})
BODY_PROMPT = "… "
SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", ".tox"})
MAX_ENTRIES = 200  # completions offered from one directory
MAX_OUTLINE_BYTES = 2_000_000


def heredoc_tag(line: str) -> str | None:
    """The TAG of a line that ends with `<<TAG` (`<<'TAG'`, `<<-TAG` too), else None."""
    marker = line.rfind("<<")
    if marker < 0:
        return None
    tag = line[marker + 2:].strip().lstrip("-").strip("'\"")
    return tag if tag.isidentifier() else None


def verb_words() -> list[str]:
    """Every word a command may start with: verbs, then aliases, then `help`."""
    names = [v.name for v in VERBS]
    aliases = [a for v in VERBS for a in v.aliases]
    return [*names, *aliases, "help"]


class CommandCompleter(Completer):
    """Verbs first; then workspace paths, and symbols after a source file's `/`."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self._outlines: dict[Path, tuple[float, list[Symbol]]] = {}

    def get_completions(self, document: Document,
                        complete_event: CompleteEvent) -> Iterator[Completion]:
        del complete_event
        text = document.text_before_cursor
        if "\n" in text:
            return
        words = text.split(" ")
        word = words[-1]
        if len(words) == 1:
            for candidate in verb_words():
                if candidate.startswith(word):
                    yield Completion(candidate, start_position=-len(word))
            return
        verb = verb_for(words[0])
        if verb is None or "<<" in text or verb.name in ("note", "plan", "ask", "done"):
            return
        for candidate, display in self.paths(word):
            yield Completion(candidate, start_position=-len(word), display=display)

    def paths(self, word: str) -> Iterable[tuple[str, str]]:
        """(completion, display) pairs for a path or `path/Symbol` prefix."""
        head, _, tail = word.rpartition("/")
        parts = head.split("/") if head else []
        for cut in range(1, len(parts) + 1):  # a source file inside the word: symbols
            candidate = self.workspace / "/".join(parts[:cut])
            if candidate.is_file():
                yield from self._symbols(candidate, parts[:cut], parts[cut:], tail)
                return
        base = self.workspace / head if head else self.workspace
        try:
            entries = sorted(os.scandir(base), key=lambda e: e.name)
        except OSError:
            return
        prefix = f"{head}/" if head else ""
        shown = 0
        for entry in entries:
            name = entry.name
            if not name.startswith(tail) or name in SKIP_DIRS:
                continue
            if name.startswith(".") and not tail.startswith("."):
                continue
            is_dir = entry.is_dir()
            shown += 1
            if shown > MAX_ENTRIES:
                return
            yield prefix + name + ("/" if is_dir else ""), name + ("/" if is_dir else "")

    def _symbols(self, path: Path, file_parts: list[str], inner: list[str],
                 tail: str) -> Iterable[tuple[str, str]]:
        level = self._outline(path)
        for part in inner:
            found = next((s for s in level if s.name == part), None)
            if found is None:
                return
            level = list(found.children)
        prefix = "/".join([*file_parts, *inner]) + "/"
        for symbol in level:
            if symbol.name.startswith(tail):
                more = "/" if symbol.children else ""
                yield prefix + symbol.name + more, f"{symbol.name}{more}  ({symbol.kind})"

    def _outline(self, path: Path) -> list[Symbol]:
        try:
            stat = path.stat()
            if stat.st_size > MAX_OUTLINE_BYTES:
                return []
            cached = self._outlines.get(path)
            if cached is not None and cached[0] == stat.st_mtime:
                return cached[1]
            from normalize.tools.code import outline

            symbols = outline(path, path.read_text(encoding="utf-8", errors="replace")) or []
        except OSError:
            return []
        self._outlines[path] = (stat.st_mtime, symbols)
        return symbols


class PromptReader:
    """A `read_line` for the user driver, backed by a prompt-toolkit session.

    `hold` takes the live view down while the person types; `on_interrupt`
    is called on Ctrl-C at the prompt (the CLI cancels the run); `out` is
    where `help` prints. `input`/`output` are prompt-toolkit's, for tests.
    """

    def __init__(
        self,
        workspace: Path,
        *,
        history: Path | None = None,
        out: TextIO | None = None,
        hold: Callable[[], AbstractContextManager[None]] | None = None,
        on_interrupt: Callable[[], None] | None = None,
        input: Input | None = None,
        output: Output | None = None,
    ) -> None:
        self.out = out
        self.hold = hold or contextlib.nullcontext
        self.on_interrupt = on_interrupt
        store: History = InMemoryHistory()
        if history is not None:
            with contextlib.suppress(OSError):
                from normalize.fsutil import private_dirs

                private_dirs(history.parent)  # what a person typed is theirs alone
                os.close(os.open(history, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
                store = FileHistory(str(history))
        self.session: PromptSession[str] = PromptSession(
            history=store, completer=CommandCompleter(workspace), complete_while_typing=False,
            input=input, output=output)
        self.body: PromptSession[str] = PromptSession(input=input, output=output)

    def __call__(self, prompt: str) -> str | None:
        with self.hold():
            return self._read(prompt)

    def _read(self, prompt: str) -> str | None:
        while True:
            line = self._prompt(self.session, prompt)
            if line is None:
                return None
            if line.strip() in HELP_WORDS:
                self._help()
                continue
            tag = heredoc_tag(line)
            if tag is None or (prompt == BODY_PROMPT):
                return line
            lines = [line]
            while True:
                more = self._prompt(self.body, BODY_PROMPT)
                if more is None:  # Ctrl-D in a body: take what was typed
                    return "\n".join(lines)
                lines.append(more)
                if more == tag:
                    return "\n".join(lines)

    def _prompt(self, session: PromptSession[str], prompt: str) -> str | None:
        try:
            return session.prompt(prompt)
        except EOFError:
            return None
        except KeyboardInterrupt:
            if self.on_interrupt is not None:
                self.on_interrupt()
            return None

    def _help(self) -> None:
        if self.out is None:
            return
        self.out.write(command_reference(markdown=False))
        self.out.write("\nCtrl-D or `done` finishes; Ctrl-C stops the run.\n")
        self.out.flush()
