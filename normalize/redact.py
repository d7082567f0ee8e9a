"""Secret redaction for everything normalize stores or shows: journals, task files, logs.

A `Redactor` replaces with `[REDACTED]`:

- API-key shapes: Anthropic and OpenAI (`sk-…`, `sk-ant-…`, `sk-proj-…`), GitHub
  (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), AWS access key ids
  (`AKIA…`, `ASIA…`), Slack (`xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`), Google
  (`AIza…`), JWTs, PEM private-key blocks;
- the value of `Authorization:` / `Proxy-Authorization:` headers and `Bearer` tokens;
- assignments to secret-looking names: `password=…`, `API_KEY=…`, `--token=…`
  (no spaces), or a quoted value after `=` or `:` (`"secret": "…"`,
  `token = "…"`); a type hint such as `password: str` is left alone;
- the password in `scheme://user:password@host`;
- exact strings known to be secret: `Redactor.for_workspace` collects them from
  the `.env*` files at the workspace root and from environment variables whose
  names contain KEY, TOKEN, SECRET or PASSWORD.

Everything is one compiled regex (collected values first, as a literal
alternation), so a text is scanned once.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = ["REDACTED", "Redactor", "default_redactor", "redact", "redact_obj"]

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Collected values shorter than this are not redacted (too likely to be ordinary text)."""

T = TypeVar("T")

_NAME = r"(?:password|passwd|secret|token|api[_-]?key|apikey|(?:access|secret|private)[_-]?key)"
# The same names, written to start with a character class so the scan skips fast.
_NAME_FAST = (
    r"[AaPpSsTt](?:(?<=[Pp])(?i:assw(?:or)?d|rivate[_-]?key)|(?<=[Ss])(?i:ecret(?:[_-]?key)?)"
    r"|(?<=[Tt])(?i:oken)|(?<=[Aa])(?i:pi[_-]?key|pikey|ccess[_-]?key))"
)
_NOT_A_VALUE = r"(?!(?:None|null|nil|true|false|True|False|undefined)\b|\[REDACTED\])"

# (tag, pattern). Each pattern starts with a literal or a character class (sre
# then skips positions that cannot start it cheaply) and ends with the empty
# group `(?P<tag>)`, which names the alternative that matched. A group
# `<tag>_v` (or `<tag>_v2` in a second branch) marks the part to redact;
# without one the whole match goes.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("pem", r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
    (
        "header",
        r"[Aa](?i:uthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?P<header_v>(?!\[REDACTED\])[^\s\"'][^\r\n\"']*)",
    ),
    ("bearer", r"[Bb](?i:earer)[ \t]+(?P<bearer_v>(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,})"),
    ("sk", r"s(?<![A-Za-z0-9_-]s)k-[A-Za-z0-9_-]{20,}"),
    ("github", r"g(?<!\wg)(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,})"),
    ("aws", r"A(?<!\wA)(?:KIA|SIA)[0-9A-Z]{16}\b"),
    ("google", r"A(?<!\wA)Iza[0-9A-Za-z_-]{35}"),
    ("slack", r"x(?<!\wx)ox[abprs]-[A-Za-z0-9-]{10,}"),
    ("jwt", r"e(?<!\we)yJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("url", r":(?<=\w:)//[^\s:/@]+:(?P<url_v>[^\s@/]+)(?=@)"),
    (
        "assign",  # `name="v"`, `"name": "v"`, `name = 'v'`, or unquoted `name=v`
        rf"{_NAME_FAST}(?:[\"']?[ \t]*[:=][ \t]*(?P<quote>[\"'])"
        r"(?P<assign_v>(?!\[REDACTED\])[^\"'\r\n]+)(?=(?P=quote))"
        rf"|=(?P<assign_v2>{_NOT_A_VALUE}[^\s\"'&,;)}}\]]+))",
    ),
)
_VALUES = {
    tag: [g for g in (f"{tag}_v", f"{tag}_v2") if f"(?P<{g}>" in pattern]
    for tag, pattern in _PATTERNS
}

_SECRET_KEY_RE = re.compile(rf"(?i)(?:{_NAME}|authorization)$")


@functools.lru_cache(maxsize=1024)
def _secret_key(key: str) -> bool:
    """Whether a value under `key` is secret whole (keys repeat: the answer is kept)."""
    return _SECRET_KEY_RE.search(key) is not None
_ENV_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
_DOTENV_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|AUTH|CREDENTIAL|PRIVATE|DSN", re.I)
_DOTENV_SKIPPED = (".example", ".sample", ".template", ".dist")


def _compile(values: Iterable[str]) -> re.Pattern[str]:
    alternatives = [f"{pattern}(?P<{tag}>)" for tag, pattern in _PATTERNS]
    literals = sorted(set(values), key=lambda v: (-len(v), v))
    if literals:
        first = "".join(sorted({re.escape(v[0]) for v in literals}))
        literal = "|".join(map(re.escape, literals))
        alternatives.insert(0, f"(?=[{first}])(?:{literal})(?P<literal>)")
    return re.compile("|".join(alternatives))


MEMO_SIZE = 4096  # redacted strings remembered by a Redactor
MEMO_TEXT = 2048  # longer strings are redacted afresh each time


class Redactor:
    """Replaces secrets in text with `[REDACTED]`; see the module docstring for what counts."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)
        self._regex = _compile(self.values)
        # a task's state repeats most of its strings from one checkpoint to the next
        self._memo: dict[str, str] = {}

    @classmethod
    def for_workspace(cls, root: Path | str, env: Mapping[str, str] | None = None) -> Redactor:
        """A redactor that also knows the `.env*` values at `root` and secret env variables.

        From `.env*` files (not `.env.example` and the like) a value counts when
        its name looks secret or the value holds a digit, so `HOST=localhost`
        stays readable while tokens and passwords do not; from the environment
        (`os.environ` unless `env` is given) a value counts when its name holds
        KEY, TOKEN, SECRET or PASSWORD. Values shorter than 8 characters never count.
        """
        values: list[str] = []
        root = Path(root)
        try:
            candidates = sorted(root.glob(".env*"))
        except OSError:
            candidates = []
        for path in candidates:
            if path.name.endswith(_DOTENV_SKIPPED) or not path.is_file():
                continue
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            for name, value in parse_dotenv(text):
                if _DOTENV_NAME_RE.search(name) or any(c.isdigit() for c in value):
                    values.append(value)
        environ = os.environ if env is None else env
        values.extend(value for name, value in environ.items() if _ENV_NAME_RE.search(name))
        return cls(values)

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED]`."""
        done = self._memo.get(text)
        if done is None:
            done = self._regex.sub(_replacement, text)
            if len(text) <= MEMO_TEXT:
                if len(self._memo) >= MEMO_SIZE:
                    self._memo.clear()
                self._memo[text] = done
        return done

    def redact_obj(self, obj: T) -> T:
        """A copy of `obj` with strings redacted in dicts, lists and tuples, however nested.

        A string value under a secret-looking key (`api_key`, `password`,
        `Authorization`) is redacted whole.
        """
        return cast(T, self._walk(obj))

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):
            return {key: self._value(key, value) for key, value in obj.items()}
        if isinstance(obj, list):
            return [self._walk(item) for item in obj]
        if isinstance(obj, tuple):
            return tuple(self._walk(item) for item in obj)
        return obj

    def _value(self, key: object, value: Any) -> Any:
        if isinstance(key, str) and isinstance(value, str) and value:
            if _secret_key(key):
                return REDACTED
        return self._walk(value)


def _replacement(match: re.Match[str]) -> str:
    for group in _VALUES.get(match.lastgroup or "", ()):
        start, end = match.span(group)
        if start >= 0:
            whole, base = match.group(), match.start()
            return whole[: start - base] + REDACTED + whole[end - base :]
    return REDACTED


def parse_dotenv(text: str) -> list[tuple[str, str]]:
    """`NAME=value` pairs of a `.env` file: `export`, quotes and `# comments` handled."""
    pairs: list[tuple[str, str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if name.strip() and value:
            pairs.append((name.strip(), value))
    return pairs


_DEFAULT: Redactor | None = None


def default_redactor() -> Redactor:
    """A shared redactor that knows the shapes of secrets but no collected values."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = Redactor()
    return _DEFAULT


def redact(text: str, redactor: Redactor | None = None) -> str:
    """`text` redacted by `redactor`, or by the shape-only default redactor."""
    return (redactor or default_redactor()).redact(text)


def redact_obj(obj: T, redactor: Redactor | None = None) -> T:
    """`obj` (dicts, lists, strings, nested) redacted by `redactor` or the default one."""
    return (redactor or default_redactor()).redact_obj(obj)
