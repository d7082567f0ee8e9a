"""The person's hooks: programs run at points of a task's life (`[[hooks]]`, issue 28).

Each hook is `{event, match, command, timeout, in_workspace}`. It gets one JSON
object on stdin (shapes in the README's Hooks section, close to Claude Code's)
and starts through normalize's door for programs (`normalize.programs`): a bare
program name is never taken from the workspace, it runs in an empty directory
(in the workspace only when it asks, and then a Python imports nothing from
there), with a scrubbed environment, and it is killed, with everything it
started, at its timeout. A `before_action` hook blocks the action by exiting 2
(its stderr is the reason) or by printing `{"decision": "block", "reason": …}`;
anything else lets the action through. A `before_compact` hook vetoes a
compaction of the model's context the same way. A hook can only block, never allow what
the permissions refuse. Every run is a `hook_ran` event; a failing or hanging
hook is reported and the task goes on.
"""

from __future__ import annotations

import fnmatch
import json
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from normalize.errors import ConfigError
from normalize.keys import BOOL, NUM, STR, STR_OR_STRS, declared, key
from normalize.programs import ProgramError, run
from normalize.serial import Record

if TYPE_CHECKING:  # the events (and the redaction they load) only once a hook runs
    from normalize.events import Event

__all__ = ["EVENTS", "Hook", "HookRunner", "parse_hooks"]

EVENTS = ("before_action", "after_action", "before_request", "before_compact", "waiting",
          "run_end")
BLOCKING = frozenset({"before_action", "before_compact"})  # the events whose hooks may say no
DEFAULT_TIMEOUT = 30.0
BLOCK_EXIT = 2
OUTPUT_LIMIT = 64 * 1024  # what is read of a hook's stdout and stderr


def _argv(value: list[str] | str) -> tuple[str, ...] | str:
    return tuple(value) if isinstance(value, list) else value


@dataclass(frozen=True, kw_only=True)
class Hook(Record):
    """One hook: when it runs, which actions it selects, what it runs, for how long.

    Checked once where it is configured (`parse_hooks`); a workflow's hooks are
    stored with its spec and read back by their fields.
    """

    event: str = key(MISSING, STR, f"when it runs: {', '.join(f'`{e}`' for e in EVENTS)}",
                     omit_default=False)
    match: str | None = key(None, STR, "a glob over the action's command text (not set: "
                                       "every action)", omit_default=False)
    command: tuple[str, ...] | str = key(MISSING, STR_OR_STRS, "an argv, or a string the "
                                                                "shell runs",
                                         omit_default=False, unwrap=_argv)
    timeout: float = key(DEFAULT_TIMEOUT, NUM, "seconds; then it is killed, with all it "
                                               "started", omit_default=False)
    in_workspace: bool = key(False, BOOL, "run in the workspace (a Python there imports none of "
                                          "its modules) instead of an empty directory")
    source: str = ""  # where it was configured (not a key)

    @property
    def shown(self) -> str:
        return self.command if isinstance(self.command, str) else shlex.join(self.command)

    def selects(self, subject: str | None) -> bool:
        return self.match is None or subject is None or fnmatch.fnmatchcase(subject, self.match)


KEYS = tuple(declared(Hook))
"""The keys of a `[[hooks]]` table (`Hook` declares them, with their types)."""


def parse_hooks(tables: object, where: str) -> tuple[Hook, ...]:
    """`[[hooks]]` tables checked one by one; a bad one is one line naming its place."""
    if not isinstance(tables, list):
        raise ConfigError(f"{where}: `hooks` must be an array of tables ([[hooks]])")
    return tuple(_hook(table, f"{where}: hooks[{index}]") for index, table in enumerate(tables))


def _hook(table: object, where: str) -> Hook:
    if not isinstance(table, Mapping):
        raise ConfigError(f"{where}: must be a table")
    unknown = [key for key in table if key not in KEYS]
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r}; expected {', '.join(KEYS)}")
    event = table.get("event")
    if event not in EVENTS:
        raise ConfigError(f"{where}: event = {event!r}: expected one of {', '.join(EVENTS)}")
    command = _command(table.get("command"), where)
    timeout = table.get("timeout", DEFAULT_TIMEOUT)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise ConfigError(f"{where}: timeout = {timeout!r}: seconds, more than 0")
    match = table.get("match")
    if match is not None and not isinstance(match, str):
        raise ConfigError(f"{where}: match must be a glob string")
    in_workspace = table.get("in_workspace", False)
    if not isinstance(in_workspace, bool):
        raise ConfigError(f"{where}: in_workspace = {in_workspace!r}: true or false")
    return Hook(event=str(event), command=command, match=match, timeout=float(timeout),
                in_workspace=in_workspace, source=where)


def _command(command: object, where: str) -> tuple[str, ...] | str:
    """A hook's `command`: an argv (a non-empty list of strings) or a shell string."""
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        return tuple(command)
    if isinstance(command, str) and command.strip():
        return command
    raise ConfigError(f"{where}: command must be a non-empty string or list of strings")


@dataclass(frozen=True)
class _Ran:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    error: str | None = None


class HookRunner:
    """Runs a task's hooks and reports each run through `emit`."""

    def __init__(self, hooks: Sequence[Hook], workspace: Path, task_id: str = "",
                 env_allow: Sequence[str] = ()) -> None:
        self.hooks = tuple(hooks)
        self.workspace = workspace
        self.task_id = task_id
        self.env_allow = tuple(env_allow)  # variables the person lets through the scrub
        self.emit: Callable[[Event], object] = _nowhere

    def active(self, event: str) -> bool:
        return any(hook.event == event for hook in self.hooks)

    def before_action(self, action: Any) -> str | None:
        """The reason a `before_action` hook blocks `action` (an `Action`), if one does."""
        if not self.active("before_action"):
            return None
        return self.run("before_action", _action(action), action.text or action.tool)

    def after_action(self, action: Any, result: Any) -> None:
        """Tell `after_action` hooks what `action` did (`result`: an `ActionResult`)."""
        if self.active("after_action"):
            self.run("after_action", {**_action(action), "tool_response": {
                "status": result.status.value, "output": result.shown[:OUTPUT_LIMIT],
                "error": result.error, "exit_code": result.exit_code}},
                action.text or action.tool)

    def before_request(self, payload: Mapping[str, Any]) -> str | None:
        """Context `before_request` hooks add to this one request (never kept in history)."""
        if not self.active("before_request"):
            return None
        data = self._data("before_request", payload)
        said = [_context(self._one(hook, data)) for hook in self.hooks
                if hook.event == "before_request"]
        return "\n\n".join(text for text in said if text) or None

    def before_compact(self, payload: Mapping[str, Any]) -> str | None:
        """The reason a `before_compact` hook vetoes compacting the context, if one does."""
        if not self.active("before_compact"):
            return None
        return self.run("before_compact", {"trigger": "auto", **payload})

    def waiting(self, wait: Any, command: str) -> None:
        """Tell `waiting` hooks what the task waits for (`wait`: a `Wait`)."""
        if self.active("waiting"):
            self.run("waiting", {"kind": wait.kind, "question": wait.question,
                                 "command": command})

    def run_end(self, task: Any, status: Any) -> None:
        """Tell `run_end` hooks how the run ended (`task`: a `Task`, `status`: its status)."""
        if self.active("run_end"):
            usage = task.usage
            self.run("run_end", {
                "status": status.value, "exit_code": int(status.exit_status),
                "summary": task.summary, "error": task.error, "turns": task.turn,
                "cost_usd": round(usage.cost_usd, 6), "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens, "result": task.result})

    def run(self, event: str, payload: Mapping[str, Any], subject: str | None = None
            ) -> str | None:
        """Run `event`'s hooks in order; the first block's reason (`BLOCKING` events only)."""
        data = self._data(event, payload)
        for hook in self.hooks:
            if hook.event != event or not hook.selects(subject):
                continue
            ran = self._one(hook, data)
            reason = _block_reason(ran) if event in BLOCKING else None
            if reason is not None:
                return reason
        return None

    def _data(self, event: str, payload: Mapping[str, Any]) -> str:
        return json.dumps({"hook_event_name": event, "task_id": self.task_id,
                           "cwd": str(self.workspace), **payload}, default=str)

    def _one(self, hook: Hook, data: str) -> _Ran:
        """One hook run, reported as a `hook_ran` event."""
        from normalize.events import HookRan  # here: loading a workflow's hooks stays light

        started = time.monotonic()
        ran = _spawn(hook, data, self.workspace, self.env_allow)
        reason = _block_reason(ran) if hook.event in BLOCKING else None
        outcome = "timed_out" if ran.timed_out else "blocked" if reason is not None else \
            "failed" if ran.error or ran.exit_code != 0 else "ok"
        said = reason if reason is not None else ran.error or (
            f"killed after {hook.timeout:g}s" if ran.timed_out else
            (ran.stderr.strip()[-500:] or None) if outcome == "failed" else None)
        self.emit(HookRan(event=hook.event, command=hook.shown, exit_code=ran.exit_code,
                          duration=round(time.monotonic() - started, 6),
                          outcome=outcome,  # type: ignore[arg-type]
                          reason=said))
        return ran


def _nowhere(_event: Event) -> None:
    """Where hook events go before a run hands its emitter over."""


def _action(action: Any) -> dict[str, Any]:
    return {"tool_name": action.tool, "tool_input": action.params, "command": action.text}


def _context(ran: _Ran) -> str | None:
    """What a before_request hook adds: `additional_context` of its JSON, or its plain stdout."""
    text = ran.stdout.strip()
    if ran.timed_out or ran.error or ran.exit_code != 0 or not text:
        return None
    if text.startswith("{"):
        try:
            said = json.loads(text)
        except ValueError:
            return text
        if isinstance(said, dict):
            extra = said.get("additional_context")
            return str(extra) if extra else None
    return text


def _block_reason(ran: _Ran) -> str | None:
    """Why a blocking hook said no: exit 2 (stderr), or `{"decision": "block"}` on stdout."""
    if ran.timed_out or ran.error:
        return None
    if ran.exit_code == BLOCK_EXIT:
        return ran.stderr.strip() or "blocked by a hook"
    if ran.exit_code == 0 and ran.stdout.strip().startswith("{"):
        try:
            said = json.loads(ran.stdout)
        except ValueError:
            return None
        if isinstance(said, dict) and said.get("decision") == "block":
            return str(said.get("reason") or "blocked by a hook")
    return None


def _spawn(hook: Hook, data: str, workspace: Path, allow: Sequence[str] = ()) -> _Ran:
    """Run one hook through the door; at its timeout it is killed with all it started."""
    argv = ["/bin/sh", "-c", hook.command] if isinstance(hook.command, str) \
        else list(hook.command)
    try:
        ended = run(argv, timeout=hook.timeout, untrusted=(workspace,),
                    cwd=workspace if hook.in_workspace else None, input=data.encode(),
                    allow=allow)
    except ProgramError as exc:
        return _Ran(None, "", "", False, str(exc))
    if ended.timed_out:
        return _Ran(None, "", "", True)
    return _Ran(ended.code, _text(ended.stdout), _text(ended.stderr), False)


def _text(output: bytes) -> str:
    return output[:OUTPUT_LIMIT].decode(errors="replace")
