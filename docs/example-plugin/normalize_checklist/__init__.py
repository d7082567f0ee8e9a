"""A normalize driver plugin: work through a checklist of commands, then write a report.

The checklist comes from the workflow that names the driver:

    [workflow]
    name = "release-check"
    driver = "checklist"

    [workflow.vars]
    checklist = ["grep TODO src", "view CHANGELOG.md", "test"]
    report = "CHECKLIST.md"
"""

from __future__ import annotations

from typing import Any, ClassVar

from normalize import (
    Action,
    ActionResult,
    ConfigError,
    Decision,
    DriverConfig,
    DriverServices,
    Notice,
    RunContext,
    Task,
    TaskStatus,
    UsageError,
    parse_command,
)

__all__ = ["ChecklistDriver"]


class ChecklistDriver:
    """Runs one checklist item per turn, writes a report, and ends."""

    name: ClassVar[str] = "checklist"

    def __init__(self, items: list[str], report: str) -> None:
        self.items = items
        self.report = report
        self.done: list[dict[str, Any]] = []  # one {"item", "status", "error"} per finished item
        self.reported = False
        self.report_error: str | None = None

    @classmethod
    def from_config(cls, config: DriverConfig, services: DriverServices) -> ChecklistDriver:
        del services  # this driver needs no person and no model
        variables = (config.get("spec") or {}).get("vars") or {}
        items = variables.get("checklist")
        if not isinstance(items, list) or not items or \
                not all(isinstance(item, str) for item in items):
            raise ConfigError('the checklist driver needs [workflow.vars] '
                              'checklist = ["COMMAND", ...] (a non-empty list of commands)')
        for item in items:
            try:
                parse_command(item)  # a typo fails the task before anything runs
            except UsageError as exc:
                raise ConfigError(f"checklist item {item!r}: {exc}") from None
        return cls(list(items), str(variables.get("report", "CHECKLIST.md")))

    def snapshot(self) -> dict[str, Any]:
        return {"done": [dict(d) for d in self.done], "reported": self.reported,
                "report_error": self.report_error}

    def restore(self, state: dict[str, Any]) -> None:
        self.done = [dict(d) for d in state.get("done", [])]
        self.reported = bool(state.get("reported", False))
        self.report_error = state.get("report_error")

    def adopt(self, history: list[dict[str, Any]]) -> None:
        """Taking a task over: items another driver already ran with success count as done."""
        succeeded = {h["command"] for h in history if h["status"] == "success"}
        for item in self.items:
            if item not in succeeded:
                break
            self.done.append({"item": item, "status": "success", "error": None, "adopted": True})

    def decide(self, task: Task, ctx: RunContext) -> Decision | None:
        del task
        if self.done and self.done[-1]["status"] != "success":
            last = self.done[-1]
            ctx.emit(Notice(level="warning",
                            message=f"checklist: `{last['item']}` {last['status']}: "
                                    f"{last['error'] or 'no detail'}"))
        position = len(self.done)
        if position < len(self.items):
            item = self.items[position]
            return Decision(actions=[parse_command(item)],
                            thinking=f"checklist item {position + 1} of {len(self.items)}")
        if not self.reported:
            body = "".join(f"- [{'x' if d['status'] == 'success' else ' '}] {d['item']}\n"
                           for d in self.done)
            write = Action(tool="write", params={"args": [self.report], "body": body},
                           text=f"write {self.report}")
            return Decision(actions=[write], thinking="writing the report")
        if self.report_error is not None:
            return Decision.finish(f"cannot write {self.report}: {self.report_error}",
                                   status=TaskStatus.FAILED)
        failed = [d["item"] for d in self.done if d["status"] != "success"]
        if failed:
            return Decision.finish(f"{len(failed)} of {len(self.items)} items failed: "
                                   f"{', '.join(failed)}", status=TaskStatus.FAILED)
        return Decision.finish(f"all {len(self.items)} items passed; see {self.report}")

    def on_result(self, task: Task, action: Action, result: ActionResult) -> None:
        del task, action  # results come in the order of the decision's actions
        if len(self.done) >= len(self.items):  # the report's write
            self.reported = True
            self.report_error = None if result.ok else (result.error or result.status.value)
            return
        self.done.append({"item": self.items[len(self.done)], "status": result.status.value,
                          "error": result.error})
