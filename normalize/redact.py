"""Secret redaction for everything normalize stores or shows: journals, task files, logs.

A `Redactor` replaces with `[REDACTED]`:

- API-key shapes: Anthropic and OpenAI (`sk-…`, `sk-ant-…`, `sk-proj-…`), GitHub
  (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`), GitLab, AWS access key ids
  (`AKIA…`, `ASIA…`), Slack (`xoxa-`, `xoxb-`, `xoxp-`, `xoxr-`, `xoxs-`, `xapp-`), Google
  (`AIza…`, `GOCSPX-`, `ya29.`), Stripe, npm, PyPI, Hugging Face, SendGrid, Azure, Groq
  (`gsk_`), xAI (`xai-`), Perplexity (`pplx-`), Replicate (`r8_`), Vault (`hvs.`, `hvb.`,
  `hvr.`), Shopify (`shpat_`…), DigitalOcean (`dop_v1_`…), Grafana (`glsa_`, `glc_`),
  Linear (`lin_api_`), Telegram bot tokens, JWTs, PEM private-key blocks;
- the value of `Authorization:` / `Proxy-Authorization:` headers and `Bearer` tokens;
- assignments to secret-looking names: `password=…`, `API_KEY=…`, `--token=…`
  (no spaces), or a quoted value after `=` or `:` (`"secret": "…"`,
  `token = "…"`); a type hint such as `password: str` is left alone;
- the password in `scheme://user:password@host` (`redis://:password@host` too), the
  secret part of Slack and Discord webhook URLs, `.netrc` passwords (after `login`),
  docker's `"auth": "…"`, `curl -u user:password` and `mysql … -pPASSWORD`;
- exact strings known to be secret: `Redactor.for_workspace` collects them from
  the `.env*` files at the workspace root and from environment variables whose
  names contain KEY, TOKEN, SECRET or PASSWORD.

Everything is one compiled regex (collected values first, as a literal
alternation), so a text is scanned once.

The rules are written here, not loaded from a maintained rule set: on the 57
shapes of tests/secrets/secret_shapes.py, gitleaks' rule file (222 rules, MIT;
221 compile under `re`) caught 30, kingfisher-secret-scanner 1.5.0 (rules
compiled into a native library) 19, detect-secrets 1.5.0's plugins 13, and
gitleaks' rules ran 5-10 times slower than this regex. Their prefixes are the
reference for the provider shapes above.

`inert` is the other half of "fit to show": control characters (escape
sequences, BEL, backspace, C1) become visible placeholders.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

__all__ = [
    "REDACTED",
    "DeltaRedaction",
    "Redactor",
    "default_redactor",
    "dotenv_files",
    "inert",
    "inert_obj",
    "redact",
    "redact_obj",
]

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8
"""Collected values shorter than this are not redacted (too likely to be ordinary text)."""

T = TypeVar("T")

_NAME = (r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey"
         r"|(?:access|secret|private)[_-]?key|credentials?|accountkey)")
# The same names, written to start with a character class so the scan skips fast.
_NAME_FAST = (
    r"[AaPpSsTt](?:(?<=[Pp])(?i:ass(?:w(?:or)?d|phrase)|rivate[_-]?key)"
    r"|(?<=[Ss])(?i:ecret(?:[_-]?key)?)"
    r"|(?<=[Tt])(?i:oken)|(?<=[Aa])(?i:pi[_-]?key|pikey|ccess[_-]?key))"
)
_NOT_A_VALUE = r"(?!(?:None|null|nil|true|false|True|False|undefined)\b|\[REDACTED\])"
# An unquoted value after `name = ` or `name: ` (INI, YAML, TOML, .env, credentials
# files) counts only when it fills the rest of its line; type hints and code do not.
_NOT_CODE = (r"(?!(?:str|int|bytes|bool|float|Any|SecretStr|string|object|required|optional"
             r"|yes|no|on|off|\|-?|>-?)[ \t]*(?:#[^\r\n]*)?(?:\r?\n|\Z))")
_LINE_END = r"(?=[ \t]*(?:#[^\r\n]*)?(?:\r?\n|\Z))"
_PLAIN = r"[^\s\"'#,;(){}\[\]<>]+"  # an unquoted value: one word, no code punctuation

# (tag, pattern). Each pattern starts with a literal or a character class (sre
# then skips positions that cannot start it cheaply) and ends with the empty
# group `(?P<tag>)`, which names the alternative that matched. A group
# `<tag>_v` (or `<tag>_v2`, `<tag>_v3` in other branches) marks the part to
# redact; without one the whole match goes. A lookbehind at a match's start
# must be negative: a stream may have shown the text before it already.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("pem", r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?"
            r"-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----"),
    (
        "header",
        r"[Aa](?i:uthorization)[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?P<header_v>(?!\[REDACTED\])[^\s\"'][^\r\n\"']*)",
    ),
    ("bearer", r"[Bb](?i:earer)[ \t]+(?P<bearer_v>(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,})"),
    # a prefix distinctive enough may be glued to the text before it (`id_ghp_…`,
    # `v1.ghp_…`, `prefixAKIA…`, `missing-sk-proj-…`); a bare `sk-` may not (`task-…`)
    ("sk", r"s(?:(?<![A-Za-z0-9_-]s)k-[A-Za-z0-9_-]{20,}"
           r"|(?<![A-Za-z0-9]s)k-(?:proj|ant|svcacct|admin)-[A-Za-z0-9_-]{20,})"),
    ("stripe", r"[rsw](?<![A-Za-z0-9_][rsw])(?:(?<=[rs])k_(?:live|test)_[A-Za-z0-9]{16,}"
               r"|(?<=w)hsec_[A-Za-z0-9]{16,})"),
    ("github", r"g(?<![A-Za-z0-9]g)(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,}"
               r"|l(?:pat|dt|ptt|rt)-[A-Za-z0-9_-]{20,})"),
    ("aws", r"A(?<![A-Z0-9]A)(?:KIA|SIA)[0-9A-Z]{16}(?![0-9A-Za-z])"),
    ("google", r"A(?<!\wA)Iza[0-9A-Za-z_-]{35}"),
    ("slack", r"x(?<!\wx)(?:ox[abposr]-[A-Za-z0-9-]{10,}|app-[0-9]-[A-Za-z0-9-]{10,})"),
    ("jwt", r"e(?<!\we)yJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("tokens", r"[nphS](?<!\w[nphS])(?:(?<=n)pm_[A-Za-z0-9]{36}"
               r"|(?<=p)ypi-AgE[A-Za-z0-9_-]{50,}|(?<=h)f_[A-Za-z]{30,}"
               r"|(?<=S)G\.[\w-]{22}\.[\w-]{43})"),
    ("azure_ad", r"~(?<=[A-Za-z0-9_.]{3}[0-9]Q~)[A-Za-z0-9_~.-]{31,34}"),
    ("azure", r"[ASas](?:(?<=[Aa])ccount[Kk]ey|(?<=[Ss])hared[Aa]ccess[Kk]ey|(?<=[Ss])ig)="
              r"(?P<azure_v>[A-Za-z0-9+/%=_-]{16,})"),
    ("url", r":(?<=\w:)//[^\s:/@]*:(?P<url_v>[^\s@/]+)(?=@)"),  # `redis://:pw@host` too
    # provider prefixes (the shapes of gitleaks' rules of the same names)
    ("groq", r"g(?<!\wg)sk_[A-Za-z0-9]{40,}"),
    ("xai", r"x(?<!\wx)ai-[A-Za-z0-9]{40,}"),
    ("perplexity", r"p(?<!\wp)plx-[A-Za-z0-9]{40,}"),
    ("replicate", r"r(?<!\wr)8_[A-Za-z0-9]{30,}"),
    ("vault", r"h(?<!\wh)v[sbr]\.[A-Za-z0-9_-]{24,}"),
    ("gcp_oauth", r"(?:G(?<!\wG)OCSPX-[A-Za-z0-9_-]{24,}|y(?<!\wy)a29\.[A-Za-z0-9_-]{12,})"),
    ("shopify", r"s(?<!\ws)hp(?:at|ss|ca|pa)_[a-fA-F0-9]{32}"),
    ("digitalocean", r"d(?<!\wd)o[opr]_v1_[a-f0-9]{64}"),
    ("grafana", r"(?:g(?<![A-Za-z0-9]g)l(?:sa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"
                r"|c_[A-Za-z0-9+/]{32,}={0,2})|e(?<!\we)yJrIjoi[A-Za-z0-9]{60,400}={0,2})"),
    ("linear", r"l(?<!\wl)in_api_[A-Za-z0-9]{40}"),
    ("telegram", r":(?<=[0-9]{5}:)(?P<telegram_v>A[A-Za-z0-9_-]{34})(?![\w-])"),
    ("webhook", r"(?:h(?<![\w-]h)ooks\.slack\.com/(?:services|workflows|triggers)/"
                r"(?P<webhook_v>[A-Za-z0-9+/_-]{16,})"
                r"|d(?<![\w-]d)iscord(?:app)?\.com/api/webhooks/[0-9]+/(?P<webhook_v2>[\w-]{20,}))"),
    # credentials in files and command lines that no prefix marks
    ("docker", r"a(?<![\w-]a)uth\"[ \t]*:[ \t]*\""
               r"(?P<docker_v>(?!\[REDACTED\])[A-Za-z0-9+/]{8,}={0,2})(?=\")"),
    ("netrc", r"l(?<![^\s]l)ogin[ \t]+[^\s]+(?:[ \t]+|[ \t]*\r?\n[ \t]*)password[ \t]+"
              r"(?P<netrc_v>(?!\[REDACTED\])[^\s]+)"),
    ("curl", r"-(?<![^ \t]-)(?:u[ \t]*|-user[ \t=]+)[\"']?[^\s:\"'-][^\s:\"']*:"
             r"(?P<curl_v>(?![0-9]+(?![^\s\"']))(?!\[REDACTED\])[^\s\"']+)"),
    ("mysql", r"m(?<!\wm)(?:ysql(?:dump|admin|import|check|show)?|ariadb(?:-dump|-admin)?)"
              r"[ \t][^\r\n|;&]*?(?<=[ \t])-p(?P<mysql_v>(?!\[REDACTED\])[^\s]+)"),
    (
        "assign",  # `name="v"`, `"name": "v"`, `name = 'v'`, unquoted `name=v`, `name: v`
        rf"{_NAME_FAST}(?:[\"']?[ \t]*[:=][ \t]*(?P<quote>[\"'])"
        r"(?P<assign_v>(?!\[REDACTED\])[^\"'\r\n]+)(?=(?P=quote))"
        rf"|=(?P<assign_v2>{_NOT_A_VALUE}[^\s\"'&,;)}}\]]+)"
        rf"|[\"']?[ \t]*:[ \t]*(?P<assign_v3>{_NOT_A_VALUE}{_NOT_CODE}{_PLAIN}){_LINE_END}"
        rf"|[ \t]*(?:[ \t]=|=[ \t])[ \t]*"
        rf"(?P<assign_v4>{_NOT_A_VALUE}(?![A-Za-z_.]+{_LINE_END}){_PLAIN}){_LINE_END})",
    ),
)
_VALUES = {
    tag: [g for g in (f"{tag}_v", f"{tag}_v2", f"{tag}_v3", f"{tag}_v4") if f"(?P<{g}>" in pattern]
    for tag, pattern in _PATTERNS
}
# Lower-case strings one of which every match above contains, on its own line(s):
# a text is scanned for these first (fast, in C), and the regex runs only on the
# lines that hold one.
_ANCHORS = (
    "-----begin", "authoriz", "bearer", "sk-", "k_live_", "k_test_", "gh", "github_pat_",
    "glpat-", "glptt-", "gldt-", "glrt-", "akia", "asia", "aiza", "xox", "xapp-", "eyj",
    "npm_", "pypi-", "hf_", "sg.", "q~", "sig=", "://", "passw", "passphrase", "sec", "token",
    "key", "gsk_", "xai-", "pplx-", "r8_", "hvs.", "hvb.", "hvr.", "gocspx-", "ya29.", "shp",
    "_v1_", "glsa_", "glc_", "lin_api_", ":a", "hooks.slack.com",
    "discord", 'auth"', "login", "-u", "mysql", "mariadb",
)
SCAN_DIRECT = 512  # texts shorter than this skip the anchor scan

_SECRET_KEY_RE = re.compile(rf"(?i)(?:{_NAME}|authorization|connection_?string)$")


@functools.lru_cache(maxsize=1024)
def _secret_key(key: str) -> bool:
    """Whether a value under `key` is secret whole (keys repeat: the answer is kept)."""
    return _SECRET_KEY_RE.search(key) is not None


_ENV_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|PRIVATE|DSN|CONNECTION_STRING"
                          r"|OTLP_(?:[A-Z]+_)?HEADERS", re.IGNORECASE)
_DOTENV_NAME_RE = re.compile(r"KEY|TOKEN|SECRET|PASS|PWD|AUTH|CREDENTIAL|PRIVATE|DSN", re.I)
_DOTENV_SKIPPED = (".example", ".sample", ".template", ".dist")
# Walking the workspace for `.env*` files: directories never entered, and bounds.
_SKIP_DIRS = frozenset({
    ".git", ".hg", ".svn", ".normalize", "node_modules", ".venv", "venv", "__pycache__",
    ".tox", ".nox", ".mypy_cache", ".pytest_cache", ".ruff_cache", "dist", "build",
    "target", "site-packages",
})
WALK_MAX_ENTRIES = 20_000
WALK_MAX_DEPTH = 6
DOTENV_MAX_BYTES = 256 * 1024


@functools.lru_cache(maxsize=16)
def _compile(values: frozenset[str]) -> re.Pattern[str]:
    """The one regex of the patterns and `values` (~10 ms to build: once per set of values)."""
    alternatives = [f"{pattern}(?P<{tag}>)" for tag, pattern in _PATTERNS]
    literals = sorted(set(values), key=lambda v: (-len(v), v))
    if literals:
        first = "".join(sorted({re.escape(v[0]) for v in literals}))
        literal = "|".join(map(re.escape, literals))
        alternatives.insert(0, f"(?=[{first}])(?:{literal})(?P<literal>)")
    return re.compile("|".join(alternatives))


def dotenv_files(root: Path) -> list[Path]:
    """The `.env*` files at and below `root` (not examples), skipping vendored and VCS dirs.

    The walk is bounded (depth and entries seen), so a huge tree costs little.
    """
    found: list[Path] = []
    seen = 0
    stack: list[tuple[Path, int]] = [(root, 0)]
    while stack and seen < WALK_MAX_ENTRIES:
        directory, depth = stack.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            seen += 1
            try:
                if entry.is_dir(follow_symlinks=False):
                    if depth < WALK_MAX_DEPTH and entry.name not in _SKIP_DIRS:
                        stack.append((Path(entry.path), depth + 1))
                elif (entry.name.startswith(".env") and not entry.name.endswith(_DOTENV_SKIPPED)
                      and entry.is_file() and entry.stat().st_size <= DOTENV_MAX_BYTES):
                    found.append(Path(entry.path))
            except OSError:
                continue
    return sorted(found)


MEMO_SIZE = 4096  # redacted strings remembered by a Redactor
MEMO_TEXT = 2048  # longer strings are redacted afresh each time


class Redactor:
    """Replaces secrets in text with `[REDACTED]`; see the module docstring for what counts."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = frozenset(v for v in values if len(v) >= MIN_SECRET_LENGTH)
        self._literals = tuple(sorted(self.values, key=len, reverse=True))
        self.longest = max(map(len, self.values), default=0)
        # a task's state repeats most of its strings from one checkpoint to the next
        self._memo: dict[str, str] = {}
        self._plain: set[str] = set()  # strings an event showed as they are (`unchanged`)

    @functools.cached_property
    def _regex(self) -> re.Pattern[str]:
        """Built on first use: most texts hold no anchor, and many runs redact none."""
        return _compile(self.values)

    @classmethod
    def for_workspace(cls, root: Path | str, env: Mapping[str, str] | None = None, *,
                      walk: bool = True) -> Redactor:
        """A redactor that also knows the workspace's `.env*` values and secret env variables.

        `.env*` files (not `.env.example` and the like) are found at and below
        `root` (`dotenv_files`); a value counts when its name looks secret or
        the value holds a digit, so `HOST=localhost` stays readable while tokens
        and passwords do not. From the environment (`os.environ` unless `env`
        is given) a value counts when its name holds KEY, TOKEN, SECRET, PASSW,
        CREDENTIAL, PRIVATE, DSN, CONNECTION_STRING or OTLP_…HEADERS (a tracing
        backend's key). Values shorter than 8
        characters never count. `walk=False` reads no file (the environment only).
        """
        values: list[str] = []
        for path in dotenv_files(Path(root)) if walk else []:
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

    def __call__(self, obj: T) -> T:
        """`redact_obj`: a Redactor is the `redact` callable the store and emitter take."""
        return self.redact_obj(obj)

    def redact(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED]`."""
        done = self._memo.get(text)
        if done is None:
            done = self._redact(text)
            if len(text) <= MEMO_TEXT:
                if len(self._memo) >= MEMO_SIZE:
                    self._memo.clear()
                self._memo[text] = done
        return done

    def _redact(self, text: str) -> str:
        """Run the regex only on the lines that hold an anchor (or a collected value)."""
        if len(text) < SCAN_DIRECT:  # one look for an anchor, then the regex if there is one
            return self._regex.sub(_replacement, text) if self.may_hold_secret(text) else text
        lower = text.lower()
        if len(lower) != len(text):  # a character whose lower case is longer: no shortcut
            return self._regex.sub(_replacement, text)
        spans: list[tuple[int, int]] = []
        for needles, haystack in ((_ANCHORS, lower), (self._literals, text)):
            for needle in needles:
                at = haystack.find(needle)
                while at >= 0:
                    start = text.rfind("\n", 0, at) + 1
                    end = _line_end(text, at)
                    if needle == "-----begin":  # a key block runs to its END line
                        close = lower.find("-----end", at)
                        end = len(text) if close < 0 else _line_end(text, close)
                    spans.append((start, end))
                    at = haystack.find(needle, end)
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        done = 0
        region_start, region_end = spans[0]
        for start, end in [*spans[1:], (len(text) + 1, len(text) + 1)]:
            if start <= region_end:
                region_end = max(region_end, end)
                continue
            out.append(text[done:region_start])
            out.append(self._regex.sub(_replacement, text[region_start:region_end]))
            done = region_end
            region_start, region_end = start, end
        out.append(text[done:])
        return "".join(out)

    def may_hold_secret(self, text: str) -> bool:
        """Whether `text` holds an anchor or a collected value (else it has no secret)."""
        lower = text.lower()
        return (any(anchor in lower for anchor in _ANCHORS)
                or any(value in text for value in self._literals))

    def stream(self) -> DeltaRedaction:
        """A redaction for text that arrives in pieces (streamed model deltas)."""
        return DeltaRedaction(self)

    def redact_obj(self, obj: T) -> T:
        """A copy of `obj` with strings redacted in dicts, lists and tuples, however nested.

        A string value under a secret-looking key (`api_key`, `password`,
        `Authorization`) is redacted whole.
        """
        return cast(T, self._walk(obj))

    def _walk(self, obj: Any) -> Any:
        if isinstance(obj, str):
            return self.redact(obj)
        if isinstance(obj, dict):  # keys too: a path can be a key, and a path can be a key's name
            return {self.redact(key) if isinstance(key, str) else key: self._value(key, value)
                    for key, value in obj.items()}
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

    def unchanged(self, values: Mapping[str, Any]) -> bool:
        """Whether showing `values` (an event's fields) changes nothing, decided in one look.

        Their strings are joined by newlines, which no anchor or control
        character spans, and scanned once: no anchor, no collected value, no
        control character and no secret-named key over a string means no
        field would change. Keys that are names (`key`, `args`) are matched
        by the regex itself, not by anchors, which they would hit. Strings
        found plain are remembered (events repeat a step's command and names).
        """
        texts: list[str] = []
        names: list[str] = []  # nested keys that are names: most hold an anchor ("key")
        for name, value in values.items():
            if isinstance(value, str) and value and _secret_key(name):
                return False
            if not _texts(value, texts, names):
                return False
        known = self._plain
        texts = [text for text in texts if text not in known]
        names = [name for name in names if name not in known]
        joined = "\n".join(texts)
        if joined and (_CONTROL.search(joined) is not None or self.may_hold_secret(joined)):
            return False
        if names and self._regex.search("\n".join(names)) is not None:
            return False
        if len(known) >= MEMO_SIZE:
            known.clear()
        known.update(text for text in (*texts, *names) if len(text) <= MEMO_TEXT)
        return True

    def shown_field(self, name: str, value: Any) -> Any:
        """An event field's value as shown: redacted and inert; `value` itself when that
        changes nothing (nothing is copied then), else a copy sharing what did not change."""
        if isinstance(value, str) and value and _secret_key(name):
            return REDACTED
        return self._shared(value)

    def _shared(self, obj: Any) -> Any:
        if isinstance(obj, str):
            shown = inert(self.redact(obj))
            return obj if shown == obj else shown
        if isinstance(obj, dict):
            out: dict[Any, Any] | None = None
            for number, (key, value) in enumerate(obj.items()):
                new_key = self._shared(key) if isinstance(key, str) else key
                new = self.shown_field(key, value) if isinstance(key, str) else \
                    self._shared(value)
                if out is None and (new is not value or new_key is not key):
                    out = dict(list(obj.items())[:number])
                if out is not None:
                    out[new_key] = new
            return obj if out is None else out
        if isinstance(obj, list | tuple):
            items = [self._shared(item) for item in obj]
            if all(new is old for new, old in zip(items, obj, strict=True)):
                return obj
            return items if isinstance(obj, list) else tuple(items)
        return obj


def _line_end(text: str, at: int) -> int:
    end = text.find("\n", at)
    return len(text) if end < 0 else end + 1


HOLD_CHARS = 256  # the least a stream holds back: longer than any shape's context
HOLD_MAX = 65536  # past this much held text, a stream is cut even inside a word


class DeltaRedaction:
    """Redacts text streamed in pieces, holding back a tail so a split secret is caught.

    `feed(kind, text)` returns what can be shown now of the stream `kind`
    (`text_delta`, `thinking_delta`): everything but the last `HOLD_CHARS` (or
    the longest collected value), never cut inside a word, a match, or an
    unclosed private-key block. `flush()` returns the rest of every stream,
    redacted; call it when the message ends.
    """

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.hold = max(HOLD_CHARS, redactor.longest + 1)
        self._pending: dict[str, str] = {}

    def feed(self, kind: str, text: str) -> str:
        buf = self._pending.get(kind, "") + text
        cut, clean = self._cut(buf)
        self._pending[kind] = buf[cut:]
        if not cut:
            return ""
        return buf[:cut] if clean else self.redactor.redact(buf[:cut])

    def _cut(self, buf: str) -> tuple[int, bool]:
        """Where to cut `buf`, and whether it is clean (no anchor: nothing to redact)."""
        cut = len(buf) - self.hold
        if cut <= 0:
            return 0, False
        if len(buf) <= HOLD_MAX:  # a word (a token) is shown whole or not yet
            space = max(buf.rfind(c, 0, cut) for c in " \n\t")
            cut = space + 1 if space >= 0 else 0
        begin = buf.rfind("-----BEGIN ", 0, cut)
        if begin >= 0:  # a key block is held until its END line is whole
            end = buf.find("-----END ", begin)
            if end < 0 or buf.find("-----", end + 9) < 0:
                cut = begin
        if not self.redactor.may_hold_secret(buf):
            return cut, True
        for match in self.redactor._regex.finditer(buf, 0, len(buf)):
            if match.start() >= cut:
                break
            if match.end() > cut:
                return match.start(), False
        return cut, False

    @property
    def pending(self) -> bool:
        return any(self._pending.values())

    def flush(self) -> list[tuple[str, str]]:
        """The held-back text of each stream, redacted (streams with none are left out)."""
        out = [(kind, self.redactor.redact(text)) for kind, text in self._pending.items() if text]
        self._pending.clear()
        return out


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


# -- inert text: what normalize shows never drives the terminal --------------------------------

# C0 controls (but tab and newline) and DEL as their Unicode control pictures (one column each,
# so a line keeps its width); a C1 control as the escape it abbreviates (0x9b, CSI, is `␛[`).
_INERT_TABLE: dict[int, str] = {
    **{code: chr(0x2400 + code) for code in range(0x20) if chr(code) not in "\t\n"},
    0x7F: "\u2421",
    **{code: "\u241b" + chr(code - 0x40) for code in range(0x80, 0xA0)},
}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _texts(obj: Any, out: list[str], names: list[str], *, keys: bool = True) -> bool:
    """Collect the strings in `obj` (keys that are names apart, in `names`); False at a
    secret-named key over a string (unless `keys` is False)."""
    if isinstance(obj, str):
        out.append(obj)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if isinstance(key, str):
                if keys and isinstance(value, str) and value and _secret_key(key):
                    return False
                (names if key.isidentifier() else out).append(key)
            if not _texts(value, out, names, keys=keys):
                return False
    elif isinstance(obj, list | tuple):
        for item in obj:
            if not _texts(item, out, names, keys=keys):
                return False
    return True


def inert_already(values: Mapping[str, Any]) -> bool:
    """Whether `values` hold no control character to make inert (one scan, no copy)."""
    texts: list[str] = []
    for value in values.values():
        _texts(value, texts, texts, keys=False)
    return _CONTROL.search("\n".join(texts)) is None


def inert(text: str) -> str:
    """`text` with every control character shown as a visible placeholder instead of acting.

    An escape sequence (OSC 0 title, OSC 52 clipboard, `CSI 2J`), BEL, backspace, a bare CR
    and the C1 controls reach no terminal: `\x1b]0;t\x07` reads `␛]0;t␇`, `\x9b2J` reads
    `␛[2J`. Tab and newline stay; a CR before a newline is dropped (a Windows line end).
    """
    if _CONTROL.search(text) is None:
        return text
    return text.replace("\r\n", "\n").translate(_INERT_TABLE)


def inert_obj(obj: T) -> T:
    """A copy of `obj` with every string (dict keys too) made `inert`, however nested."""
    return cast(T, _inert_walk(obj))


def _inert_walk(obj: Any) -> Any:
    if isinstance(obj, str):
        return inert(obj)
    if isinstance(obj, dict):
        return {_inert_walk(key): _inert_walk(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_inert_walk(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_inert_walk(item) for item in obj)
    return obj
