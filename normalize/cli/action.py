"""The GitHub Action's run step (`python3 -m normalize.cli.action`): run, report, summarise.

The Action (`action.yml` at the repository's root) hands its inputs over as
`INPUT_*` environment variables (never pasted into a script), and this runs
`normalize agent TASK` or `normalize run WORKFLOW` with `--json`, keeps the
events, the log and the HTML report in `NORMALIZE_OUT`, optionally makes a
branch with the change (`normalize commit`), and writes the step's outputs
(`GITHUB_OUTPUT`), the job summary (`GITHUB_STEP_SUMMARY`) and
`NORMALIZE_HOME` for the job's later steps (`GITHUB_ENV`). It always exits 0
so the artifacts are uploaded; the Action's last step fails the job with
normalize's exit status.

Everything it writes leaves the machine (outputs, summary, the uploaded
artifact), so it goes through `normalize.artefacts`, redacted. The task's
text (often an issue's or a pull request's title) comes after `--`: a title
such as `--task-file=PATH` is a task, never an option.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from normalize import artefacts

STATUS_WORDS = {0: "done", 1: "failed", 2: "usage error", 3: "limit reached",
                4: "waiting for an answer", 5: "stuck", 130: "interrupted"}


@dataclass
class Inputs:
    """The Action's inputs, as GitHub passes them (`INPUT_NAME`, empty when not given)."""

    task: str = ""
    workflow: str = ""
    model: str = ""
    approve: str = ""
    budget: str = ""
    max_turns: str = ""
    schema: str = ""
    vars: list[str] = field(default_factory=list)
    workspace: str = ""
    commit_branch: str = ""
    push: str = ""

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Inputs:
        def get(name: str) -> str:
            return env.get(f"INPUT_{name.upper()}", "").strip()

        lines = [line.strip() for line in get("vars").splitlines()]
        return cls(task=get("task"), workflow=get("workflow"), model=get("model"),
                   approve=get("approve"), budget=get("budget"), max_turns=get("max_turns"),
                   schema=get("schema"), vars=[line for line in lines if line],
                   workspace=get("workspace"), commit_branch=get("commit_branch"),
                   push=get("push"))


def command(inputs: Inputs) -> list[str]:
    """The normalize command line the inputs ask for."""
    if not inputs.task and not inputs.workflow:
        raise ValueError("give the Action a `task` (plain words) or a `workflow`")
    if inputs.workflow:
        argv = ["run", "--json"]
        argv += [f"--goal={inputs.task}"] if inputs.task else []
        argv += [f"--var={pair}" for pair in inputs.vars]
        last = inputs.workflow
    else:
        if inputs.vars:
            raise ValueError("`vars` are for a `workflow`; the task's text is `task`")
        argv = ["agent", "--json"]
        argv += [f"--budget={inputs.budget}"] if inputs.budget else []
        last = inputs.task
    options = {"--model": inputs.model, "--approve": inputs.approve,
               "--max-turns": inputs.max_turns, "--output-schema": inputs.schema,
               "--workspace": inputs.workspace}
    argv += [f"{flag}={value}" for flag, value in options.items() if value]
    return [*argv, "--", last]  # text from an issue's title is never an option


@dataclass
class Outcome:
    """What the events of one run say."""

    status: int
    task_id: str = ""
    state: str = ""
    summary: str = ""
    error: str = ""
    cost: float = 0.0
    question: str = ""
    result: Any = None

    @classmethod
    def read(cls, status: int, events: list[dict[str, Any]]) -> Outcome:
        out = cls(status)
        for event in events:
            kind = event.get("type")
            out.task_id = out.task_id or str(event.get("task_id") or "")
            if kind == "waiting_for_input":
                out.question = str(event.get("question") or "")
            elif kind == "run_ended":
                out.state = str(event.get("status") or "")
                out.summary = str(event.get("summary") or "")
                out.error = str(event.get("error") or "")
                out.cost = float(event.get("cost_usd") or 0.0)
                out.result = event.get("result")
        return out


def _events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def _normalize(*args: str, stdout: artefacts.LineWriter, stderr: artefacts.LineWriter) -> int:
    """Run normalize, its output written line by line through the door as it comes."""
    proc = subprocess.Popen([sys.executable, "-m", "normalize.cli.app", *args],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    errors = threading.Thread(target=_pump, args=(proc.stderr, stderr), daemon=True)
    errors.start()
    _pump(proc.stdout, stdout)
    errors.join()
    return proc.wait()


def _pump(source: IO[bytes], sink: artefacts.LineWriter) -> None:
    for line in source:
        sink.write(line)


def write_output(path: Path, values: dict[str, str]) -> None:
    """Append `name=value` lines to a `GITHUB_OUTPUT`-style file (a delimiter for any text),
    each value redacted."""
    lines = []
    for name, value in artefacts.redacted_values(values).items():
        if "\n" in value:
            mark = f"ghadelimiter_{uuid.uuid4()}"
            lines.append(f"{name}<<{mark}\n{value}\n{mark}\n")
        else:
            lines.append(f"{name}={value}\n")
    artefacts.append_text(path, "".join(lines))


def summary_markdown(outcome: Outcome, branch: str) -> str:
    """The job summary: status, summary, cost, a waiting task's question, the branch."""
    word = STATUS_WORDS.get(outcome.status, f"exit {outcome.status}")
    lines = ["## normalize", "", f"**Status:** {word} (exit {outcome.status})"]
    if outcome.task_id:
        lines.append(f"**Task:** `{outcome.task_id}`")
    lines.append(f"**Cost:** ${outcome.cost:.4f}")
    if outcome.summary:
        lines += ["", outcome.summary]
    if outcome.error:
        lines += ["", f"**Error:** {outcome.error}"]
    if outcome.question:
        lines += ["", f"**The task asks:** {outcome.question}", "",
                  f"Answer with `normalize resume {outcome.task_id} --answer TEXT`."]
    if outcome.result is not None:
        lines += ["", "```json", json.dumps(outcome.result, indent=2), "```"]
    if branch:
        lines += ["", f"**Branch:** `{branch}`"]
    return "\n".join(lines) + "\n"


ACTION_VARIABLES = ("NORMALIZE_OUT", "NORMALIZE_HOME", "GITHUB_ENV", "GITHUB_OUTPUT",
                    "GITHUB_STEP_SUMMARY")
"""What the Action's step is given (by GitHub and action.yml): without them it is not one."""


def main(env: dict[str, str] | None = None) -> int:
    """Run the Action's task; write outputs, summary and artifacts' files."""
    env = dict(os.environ if env is None else env)
    missing = [name for name in ACTION_VARIABLES if not env.get(name)]
    if missing:  # run by hand, outside a GitHub Actions job
        sys.stderr.write(f"normalize action: {', '.join(missing)} not set: this runs as the "
                         "step of a GitHub Actions job (action.yml sets them); from a shell, "
                         "run `normalize run` or `normalize agent`\n")
        return 2
    out = Path(env["NORMALIZE_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    artefacts.append_text(Path(env["GITHUB_ENV"]), f"NORMALIZE_HOME={env['NORMALIZE_HOME']}\n")
    try:
        argv = command(Inputs.from_env(env))
    except ValueError as exc:
        sys.stderr.write(f"::error::normalize action: {exc}\n")
        write_output(Path(env["GITHUB_OUTPUT"]), {"status": "2"})
        return 0
    with artefacts.LineWriter(out / "events.jsonl") as events, \
            artefacts.LineWriter(out / "normalize.log") as log:
        status = _normalize(*argv, stdout=events, stderr=log)
    sys.stderr.write((out / "normalize.log").read_text(errors="replace"))
    outcome = Outcome.read(status, _events(out / "events.jsonl"))
    outputs = {"task-id": outcome.task_id, "status": str(status), "summary": outcome.summary,
               "cost": f"{outcome.cost:.6f}", "artifacts": str(out),
               "result": "" if outcome.result is None else json.dumps(outcome.result)}
    if outcome.task_id:
        with artefacts.LineWriter(out / "normalize.log", append=True) as log:
            _normalize("report", outcome.task_id, "-o", str(out / "report.html"), stdout=log,
                       stderr=log)
    outputs["branch"] = _commit(Inputs.from_env(env), outcome, out)
    write_output(Path(env["GITHUB_OUTPUT"]), outputs)
    artefacts.append_text(Path(env["GITHUB_STEP_SUMMARY"]),
                          summary_markdown(outcome, outputs["branch"]))
    return 0


def _commit(inputs: Inputs, outcome: Outcome, out: Path) -> str:
    """`normalize commit` when asked for and the task is done; the branch made, or ""."""
    if not inputs.commit_branch or outcome.status != 0 or not outcome.task_id:
        return ""
    argv = ["commit", "--json", f"--branch={inputs.commit_branch}"]
    argv += [f"--push={inputs.push}"] if inputs.push else []
    with artefacts.LineWriter(out / "commit.json") as made, \
            artefacts.LineWriter(out / "normalize.log", append=True) as log:
        status = _normalize(*argv, "--", outcome.task_id, stdout=made, stderr=log)
    if status != 0:
        sys.stderr.write(f"::warning::normalize commit exited {status} (see normalize.log)\n")
        return ""
    return inputs.commit_branch


if __name__ == "__main__":
    raise SystemExit(main())
