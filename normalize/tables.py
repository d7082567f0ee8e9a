"""A workflow's `[workflow]` sub-tables as typed values, each key declared once (`keys.key`).

The loader checks a file's tables against these declarations and keeps the
typed values on the `WorkflowSpec`; the README's table of keys is generated
from them (`docs_table`). A key left at None is not set: its scope inherits
it, or its consumer applies its own default (a cache strategy's TTL, say).
`[workflow.limits]` is `task.Limits`; `[workflow.llm]` is `LLMTable`
(the LLM driver's `LLMSettings` adds the model specs it names).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Self

from normalize.keys import (
    BOOL,
    FLAG_OR_NUM,
    FLAG_OR_STRS,
    INT,
    NUM,
    STR,
    STRS,
    TABLE,
    Rule,
    at_least,
    between,
    key,
    not_negative,
    one_of,
    parse_table,
    positive,
)
from normalize.sandbox.hosts import check_host
from normalize.serial import Record
from normalize.task import Limits

__all__ = [
    "APPROVAL_MODES",
    "CONTEXT_STRATEGIES",
    "MAX_REPO_MAP",
    "WORKFLOW_TABLES",
    "CacheSettings",
    "ContextSettings",
    "LLMTable",
    "PermissionsTable",
    "RetrySettings",
    "given",
]

CONTEXT_STRATEGIES = ("task_tree", "task_list", "flat", "conversation", "none")
CACHE_STRATEGIES = ("none", "memory", "persistent")
RETRY_STRATEGIES = ("none", "fixed", "exponential")
APPROVAL_MODES = ("ask", "auto", "yes", "never")
MAX_REPO_MAP = 16_384
"""The largest repo map (tokens) the prefix may hold: it is in every request."""


def given(table: object) -> dict[str, Any]:
    """The keys a typed table sets (not None), as the TOML table that would set them."""
    out: dict[str, Any] = {}
    for f in fields(table):  # type: ignore[arg-type]
        value = getattr(table, f.name)
        if value is not None:
            out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass(frozen=True)
class ContextSettings(Record):
    """`[workflow.context]` (or `context = "flat"`): what a model sees of the task each turn."""

    strategy: str | None = key(None, STR, "how the history becomes the prompt (root: "
                                          "`task_tree`)",
                               one_of(CONTEXT_STRATEGIES, "context strategy"))
    max_results: int | None = key(None, INT, "results kept in full (`flat`)", at_least(1))
    max_history: int | None = key(None, INT, "one-line entries of earlier actions kept",
                                  at_least(0))
    compact_after_chars: int | None = key(None, INT, "past this size old results shrink to "
                                                     "previews (`conversation`)", at_least(0))
    repo_map: int | None = key(None, INT, "tokens of the repository map in the prompt (0: "
                                          "none)", between(0, MAX_REPO_MAP))

    def options(self) -> dict[str, Any]:
        """The strategy's options (`make_context`'s keyword arguments), without repo_map."""
        return {k: v for k, v in given(self).items() if k not in ("strategy", "repo_map")}


@dataclass(frozen=True)
class CacheSettings(Record):
    """`[workflow.cache]` (or `cache = "memory"`): where long results wait for `fetch`."""

    strategy: str | None = key(None, STR, "where results are kept (root: `persistent`)",
                               one_of(CACHE_STRATEGIES, "cache strategy"))
    preview_length: int | None = key(None, INT, "characters of a long result shown before "
                                                "its fetch id")
    preview_lines: int | None = key(None, INT, "lines of a long result shown before its "
                                               "fetch id")
    asked_lines: int | None = key(None, INT, "lines a `fetch` returns at most")
    asked_chars: int | None = key(None, INT, "characters a `fetch` returns at most")
    ttl_seconds: float | None = key(None, NUM, "how long a kept result lives")
    max_bytes: int | None = key(None, INT, "the most the cache holds; the oldest go first")

    def options(self) -> dict[str, Any]:
        """`make_cache`'s keyword arguments besides the strategy."""
        return {k: v for k, v in given(self).items() if k != "strategy"}


@dataclass(frozen=True)
class RetrySettings(Record):
    """`[workflow.retry]` (or a step's `retry`): how a failed action is tried again."""

    strategy: str | None = key(None, STR, "how long to wait between attempts (root: `none`)",
                               one_of(RETRY_STRATEGIES, "retry strategy"))
    max_attempts: int | None = key(None, INT, "attempts in all, the first included",
                                   positive())
    base_delay: float | None = key(None, NUM, "seconds before the second attempt",
                                   not_negative())
    max_delay: float | None = key(None, NUM, "the longest wait, in seconds", not_negative())
    jitter: bool | float | None = key(None, FLAG_OR_NUM, "the share of each wait drawn at "
                                                          "random (`true`: 0.25)")


def _host_problem(value: Any) -> str:
    for host in value if isinstance(value, list) else []:
        try:
            check_host(host)
        except ValueError as exc:
            return str(exc)
    return ""


HOSTS = Rule(lambda v: not _host_problem(v), "network {reason}", "`true`, `false` or hosts",
             _host_problem)


@dataclass(frozen=True)
class PermissionsTable(Record):
    """`[workflow.permissions]`: what the workflow asks for (an untrusted one only narrows)."""

    mode: str | None = key(None, STR, "who approves actions",
                           one_of(APPROVAL_MODES, "approval mode"))
    allow: tuple[str, ...] | None = key(None, STRS, "commands allowed without asking")
    deny: tuple[str, ...] | None = key(None, STRS, "commands always refused")
    allow_shell: bool | None = key(None, BOOL, "whether `run` may use a shell")
    network: bool | list[str] | None = key(None, FLAG_OR_STRS, "what programs may reach",
                                           HOSTS)
    sandbox: str | None = key(None, STR, "`read-only`, `workspace` or `off`")
    env_allow: tuple[str, ...] | None = key(None, STRS, "environment variables programs keep")


@dataclass(frozen=True)
class LLMTable(Record):
    """`[workflow.llm]`: the model that decides, and how it is asked."""

    provider: str = key("anthropic", STR, "who serves the model (a registered provider)")
    model: str = key("claude-sonnet-4-5", STR, "the model (or `PROVIDER:MODEL`)")
    fallback: tuple[str, ...] = key((), STRS, "models tried in turn when it fails")
    base_url: str | None = key(None, STR, "the model server's address")
    thinking: bool = key(False, BOOL, "extended thinking, where the model has it")
    max_actions: int = key(5, INT, "commands run from one reply at most", at_least(1))
    allow_parallel: bool = key(True, BOOL, "whether read-only commands of a reply run at once")
    max_tokens: int = key(4096, INT, "tokens of one reply at most", at_least(1))
    temperature: float | None = key(None, NUM, "sampling temperature")
    system_prompt: str | None = key(None, STR, "the system prompt, instead of the built-in")
    system_prompt_file: str | None = key(None, STR, "… or a file beside the workflow holding it")
    prices: Mapping[str, Any] = key(None, TABLE, "prices per model, for the budget",
                                    factory=dict)
    context_window: int | None = key(None, INT, "the model's context window in tokens (the "
                                     "skills catalog takes about 2% of it); default: the "
                                     "window normalize knows for the model, else 32,000",
                                     at_least(1_000))

    @classmethod
    def from_config(cls, table: Mapping[str, Any]) -> Self:
        """Settings from a `[workflow.llm]` table; a bad key or type is a ConfigError."""
        return parse_table(cls, table, "workflow.llm", name=lambda k: f"workflow.llm.{k}")


WORKFLOW_TABLES: dict[str, type] = {
    "context": ContextSettings, "cache": CacheSettings, "retry": RetrySettings,
    "limits": Limits, "llm": LLMTable, "permissions": PermissionsTable,
}
"""`[workflow.NAME]` → its typed table (the loader's checks and the README's rows)."""
