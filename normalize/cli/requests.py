"""What a launching command was asked, as a frozen request: `Run`, `Agent`, `Resume`, `Batch`.

`app.py` (and `batch.py`) turn a command line into one of these and hand it to
`launch`. Each request's `check()` holds the rules about which flags go
together as a table — `RULES[kind]`, rows of (when, what it says) — read
top to bottom, the first row that holds refusing the request with its one line
(`UsageError`, exit 2). Rules about a value alone (a mode's spelling, a file that
must exist) stay with the code that reads the value.

A `Resume` goes on in exactly one way: plain, a follow-up, a fork, a rewind, a
hand-over or an answer (`ResumeWay`); two at once are refused by its table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from normalize.cli.options import ALL_HOSTS
from normalize.errors import UsageError


@dataclass(frozen=True, kw_only=True)
class Launch:
    """What every launching command takes: where, under which rules, shown how."""

    workspace: Path | None = None
    approve: str | None = None
    sandbox: str | None = None
    network: tuple[str, ...] = ()
    no_network: bool = False
    json_output: bool = False
    quiet: bool = False
    otel: bool = False
    memory: bool = True

    def network_setting(self) -> bool | tuple[str, ...] | None:
        """`--network` (True: every host), `--network HOST`… (those), `--no-network` (False), or
        nothing (None: the workflow's)."""
        if self.no_network or not self.network:
            return False if self.no_network else None
        if ALL_HOSTS in self.network:
            return True
        from normalize.sandbox.hosts import check_host  # the sandbox loads when hosts are named

        try:
            return tuple(dict.fromkeys(check_host(host) for host in self.network))
        except ValueError as exc:
            raise UsageError(f"--network {exc}; for every host, put --network after the task "
                             f"or write --network=*") from None

    def check(self) -> None:
        """Refuse flags that do not go together: the first row of this kind's table that holds."""
        for rule in RULES[type(self)]:
            if rule.when(self):
                raise UsageError(rule.says(self))


@dataclass(frozen=True, kw_only=True)
class Run(Launch):
    """`normalize run WORKFLOW`."""

    workflow: str
    variables: tuple[str, ...] = ()
    goal: str = ""
    max_turns: int | None = None
    model: str | None = None
    base_url: str | None = None
    dry_run: bool = False
    commit: bool = False
    output_schema: Path | None = None
    output_retries: int | None = None


@dataclass(frozen=True, kw_only=True)
class Agent(Launch):
    """`normalize agent TASK` (with `--items`, a batch of it)."""

    task: str = ""
    task_file: Path | None = None
    workflow: str | None = None
    model: str | None = None
    base_url: str | None = None
    max_turns: int | None = None
    budget: float | None = None
    context: str | None = None
    project_instructions: bool = True
    repo_map: int | None = None
    output_schema: Path | None = None
    output_retries: int | None = None
    commit: bool = False
    attempts: int | None = None
    pick: str | None = None
    harness: str | None = None
    items: str | None = None
    item_budget: float | None = None
    concurrency: int = 4

    def models(self) -> list[str]:
        """`--model A,B,C`'s models (one or none: every attempt the same)."""
        return [m.strip() for m in (self.model or "").split(",") if m.strip()]


@dataclass(frozen=True)
class FollowUp:
    """`resume ID "INSTRUCTION"`: a finished or stopped task goes on with it."""

    instruction: str


@dataclass(frozen=True)
class Fork:
    """`resume ID --fork [--rewind N] [--in-place]`: a new task (its child) goes on."""

    at: int | None = None
    in_place: bool = False


@dataclass(frozen=True)
class Rewind:
    """`resume ID --rewind N`: files and state back to step N, then on."""

    step: int


@dataclass(frozen=True)
class HandOver:
    """`resume ID --driver NAME`: another driver takes the task."""

    driver: str


@dataclass(frozen=True)
class Answer:
    """`resume ID --answer TEXT`: what the task waits for, answered."""

    text: str


ResumeWay = FollowUp | Fork | Rewind | HandOver | Answer | None
"""How a `Resume` goes on: one of these, or None (plainly, where it stopped)."""


@dataclass(frozen=True, kw_only=True)
class Resume(Launch):
    """`normalize resume ID`: the task goes on in one way (`way`)."""

    task: str
    ways: tuple[ResumeWay, ...] = ()
    """Every way the flags asked for; the table refuses more than one."""
    in_place: bool = False
    model: str | None = None
    base_url: str | None = None
    max_turns: int | None = None
    budget: float | None = None
    store: str | None = None
    """`--store URL`: the task's record is brought from there first."""

    @classmethod
    def of(cls, task: str, *, instruction: str | None = None, fork: bool = False,
           rewind: int | None = None, driver: str | None = None, answer: str | None = None,
           **flags: object) -> Resume:
        """A request from the flags as given: `--fork --rewind N` is one way (a fork at N)."""
        ways: list[ResumeWay] = []
        if instruction is not None:
            ways.append(FollowUp(instruction))
        if fork:
            ways.append(Fork(rewind, in_place=bool(flags.get("in_place"))))
        elif rewind is not None:
            ways.append(Rewind(rewind))
        if driver is not None:
            ways.append(HandOver(driver))
        if answer is not None:
            ways.append(Answer(answer))
        return cls(task=task, ways=tuple(ways), **flags)  # type: ignore[arg-type]

    @property
    def way(self) -> ResumeWay:
        """The one way it goes on (None: plainly); `check()` first."""
        return self.ways[0] if self.ways else None

    @property
    def driver(self) -> str | None:
        return self.way.driver if isinstance(self.way, HandOver) else None


@dataclass(frozen=True, kw_only=True)
class Batch(Launch):
    """`normalize batch WORKFLOW --items FILE`."""

    workflow: str
    items: str
    items_format: str | None = None
    variables: tuple[str, ...] = ()
    goal: str = ""
    model: str | None = None
    executor: str = "local"
    address: str | None = None
    concurrency: int = 4
    budget: float | None = None
    item_budget: float | None = None
    max_attempts: int = 3
    item_cpus: float = 1.0
    item_memory: int | None = None
    on_item_error: str | None = None
    item_workspace: str | None = None
    output_schema: Path | None = None
    store: str | None = None


# -- the tables ------------------------------------------------------------------------------

R = TypeVar("R", bound=Launch)


@dataclass(frozen=True)
class FlagRule(Generic[R]):
    """One row: when `when` holds for a request, it is refused with `says`'s line."""

    when: Callable[[R], bool]
    says: Callable[[R], str]


_FLAG = {FollowUp: "a follow-up INSTRUCTION", Fork: "--fork", Rewind: "--rewind",
         HandOver: "--driver", Answer: "--answer"}


def _two_ways(request: Resume) -> str:
    first, second = (_FLAG[type(way)] for way in request.ways[:2])
    return (f"{first} and {second} are two ways to resume; give one (--fork takes --rewind N "
            f"for where the fork starts)")


def _negative(value: float | None) -> bool:
    return value is not None and value <= 0


def _usd(flag: str, value: float | None) -> str:
    return f"{flag} {value:g}: must be more than 0 (USD)"


def _max_children() -> int:
    from normalize.subtasks.children import MAX_CHILDREN  # (not loaded for a resume or a batch)

    return MAX_CHILDREN


def _refused_model(request: Resume) -> bool:
    driver = request.driver
    if driver is None or (request.model is None and request.base_url is None):
        return False
    from normalize.contract.driver import driver_traits  # (the registry: only when it matters)

    return not driver_traits(driver).model_settings


def _model_refused(request: Resume) -> str:
    from normalize.contract.driver import model_refused

    return model_refused("--model" if request.model is not None else "--base-url",
                         str(request.driver))


NETWORK: list[FlagRule[Launch]] = [
    FlagRule(lambda r: r.no_network and bool(r.network),
         lambda _: "--network and --no-network contradict each other; give one"),
]

AGENT: list[FlagRule[Agent]] = [
    FlagRule(lambda r: r.items is not None and not r.task.strip(),
         lambda _: "TASK is empty: say what the agent should do with each item"),
    FlagRule(lambda r: _negative(r.budget), lambda r: _usd("--budget", r.budget)),
    FlagRule(lambda r: r.items is not None and _negative(r.item_budget),
         lambda r: _usd("--item-budget", r.item_budget)),
    FlagRule(lambda r: r.items is None and r.attempts is None and r.pick is not None,
         lambda _: "--pick goes with --attempts N"),
    FlagRule(lambda r: r.items is None and r.attempts is None and len(r.models()) > 1,
         lambda r: f"--model {r.model}: several models go with --attempts N"),
    FlagRule(lambda r: r.items is None and r.attempts is not None
         and not 2 <= r.attempts <= _max_children(),
         lambda r: f"--attempts {r.attempts}: choose 2 to {_max_children()}"),
    FlagRule(lambda r: r.items is None and r.attempts is not None and r.pick is not None
         and not r.pick.strip(),
         lambda _: "--pick is empty: give the command that judges each attempt"),
]

RESUME: list[FlagRule[Resume]] = [
    FlagRule(lambda r: r.in_place and not isinstance(r.way, Fork),
         lambda _: "--in-place goes with --fork"),
    FlagRule(lambda r: len(r.ways) > 1, _two_ways),
    FlagRule(_refused_model, _model_refused),
    FlagRule(lambda r: r.store is not None and r.task == "last",
             lambda _: "resume --store needs a task id or BATCH/N: `last` is this data home's"),
]

BATCH: list[FlagRule[Batch]] = [
    FlagRule(lambda r: _negative(r.budget), lambda r: _usd("--budget", r.budget)),
    FlagRule(lambda r: _negative(r.item_budget), lambda r: _usd("--item-budget", r.item_budget)),
]

RULES: dict[type[Launch], list[FlagRule[Launch]]] = {
    Run: [*NETWORK],
    Agent: [*NETWORK, *AGENT],  # type: ignore[list-item]
    Resume: [*NETWORK, *RESUME],  # type: ignore[list-item]
    Batch: [*NETWORK, *BATCH],  # type: ignore[list-item]
}
"""Each kind's rules, in the order they are read."""
