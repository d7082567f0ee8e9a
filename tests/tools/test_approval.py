"""The approval policy: modes × commands × the sandbox boundary, patterns, people, waiting."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from normalize.errors import ConfigError
from normalize.sandbox import SandboxMode, SandboxPolicy
from normalize.task import Action, ActionResult, ResultStatus
from normalize.tools.approval import UNCONFINED_PARAM, ApprovalMode, ApprovalPolicy, is_destructive
from normalize.tools.base import Approver, ToolContext, ToolRegistry
from normalize.tools.guard import WorkspaceGuard

try:
    from normalize.execution.cache import NoCache
except ImportError:  # the cache lands separately; a preview-less double is enough here

    class NoCache:  # type: ignore[no-redef]
        def preview(self, content: str) -> tuple[str, str | None]:
            return content, None


class RecordingRun:
    """A `run` tool that only records what it was asked to run."""

    name: ClassVar[str] = "run"
    read_only: ClassVar[bool] = False
    summary: ClassVar[str] = "records commands"

    def __init__(self) -> None:
        self.ran: list[list[str]] = []

    def run(self, action: Action, ctx: ToolContext) -> ActionResult:
        self.ran.append(action.args)
        return ActionResult.success("ran")


class Person:
    """An approver that answers from a script and keeps the questions."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.questions: list[str] = []

    def __call__(self, question: str) -> str:
        self.questions.append(question)
        return self.answers.pop(0)


def make_ctx(
    tmp_path: Path, policy: ApprovalPolicy, approver: Approver | None = None,
    sandbox: SandboxPolicy | None = None,
) -> ToolContext:
    return ToolContext(
        workspace=tmp_path,
        guard=WorkspaceGuard(tmp_path),
        cache=NoCache(),
        policy=policy,
        approver=approver,
        sandbox=sandbox or SandboxPolicy(),
    )


def run(*args: str) -> Action:
    return Action("run", {"args": list(args)}, text="run " + " ".join(args))


def judge(
    tmp_path: Path, policy: ApprovalPolicy, action: Action, approver: Approver | None = None,
    sandbox: SandboxPolicy | None = None,
) -> ActionResult | None:
    return policy.check(action, make_ctx(tmp_path, policy, approver, sandbox))


ALLOW, BLOCK, WAIT = "allow", "block", "wait"

# mode, the action, the verdict, a text the verdict's message must hold
CASES: list[tuple[str, Action, str, str]] = [
    ("auto", run("pytest"), ALLOW, ""),
    ("auto", run("python", "-m", "pytest", "-x"), ALLOW, ""),
    ("auto", run("mypy", "--strict", "calc.py"), ALLOW, ""),
    ("auto", run("ruff", "check", "--fix", "."), ALLOW, ""),  # confined: it can only fix files
    ("auto", run("/tmp/evil/pytest"), ALLOW, ""),  # here the kernel, not the name, is the check
    ("auto", run("make", "install"), ALLOW, ""),
    ("auto", run("git", "status"), ALLOW, ""),
    ("auto", run("git", "checkout", "main"), ALLOW, ""),
    ("auto", run("git", "push"), ALLOW, ""),  # no network in the sandbox: it fails there
    ("auto", run("ls", "&&", "rm", "x"), ALLOW, ""),
    ("auto", run("rm", "-rf", "/"), BLOCK, "`rm -rf /`"),
    ("auto", run("rm", "-r", "build"), BLOCK, "deletes or discards work"),
    ("auto", run("pytest; rm -rf ~"), BLOCK, "`rm -rf ~`"),
    ("auto", run("git", "reset", "--hard", "HEAD~3"), BLOCK, "git reset --hard"),
    ("auto", run("git", "-C", "sub", "clean", "-fdx"), BLOCK, "git -C sub clean"),
    ("auto", run("git", "checkout", "--", "."), BLOCK, "git checkout -- ."),
    ("auto", run("git", "restore", "calc.py"), BLOCK, "git restore"),
    ("auto", run("git", "stash", "drop"), BLOCK, "git stash drop"),
    ("auto", run("find", ".", "-name", "*.py", "-delete"), BLOCK, "-delete"),
    ("auto", run("find", ".", "-exec", "rm", "{}", ";"), BLOCK, "-exec rm"),
    ("auto", run("env", "X=1", "rm", "-fr", "src"), BLOCK, "rm -fr src"),
    ("auto", run("xargs", "-0", "rm", "--recursive"), BLOCK, "xargs"),
    ("auto", run("timeout", "5", "git", "clean", "-f"), BLOCK, "git clean"),
    ("auto", run("pytest", "$(rm -rf ~)"), BLOCK, "command substitution"),
    ("auto", Action("edit", {"args": ["calc.py"], "body": "x"}), ALLOW, ""),
    ("auto", Action("write", {"args": ["new.txt"], "body": "x"}), ALLOW, ""),
    ("auto", Action("test", {"args": ["tests/"]}), ALLOW, ""),
    ("yes", run("rm", "-rf", "build"), ALLOW, ""),
    ("yes", run("ls", "&&", "rm", "x"), ALLOW, ""),
    ("yes", run("echo", "$(whoami)"), BLOCK, "command substitution"),
    ("yes", run("echo `id`"), BLOCK, "command substitution"),
    ("yes", Action("write", {"args": ["a.txt"], "body": "x"}), ALLOW, ""),
    ("never", run("pytest"), BLOCK, "`never`"),
    ("never", run("ls"), BLOCK, "`never`"),
    ("never", Action("edit", {"args": ["calc.py"], "body": "x"}), BLOCK, "`never`"),
    ("ask", run("pytest"), WAIT, "waiting for approval: run `pytest`"),
    ("ask", run("rm", "x"), WAIT, "waiting for approval: run `rm x`"),
    ("ask", Action("write", {"args": ["a.txt"], "body": "x"}), WAIT, "write `a.txt`"),
]


@pytest.mark.parametrize(("mode", "action", "verdict", "says"), CASES)
def test_modes_by_commands(
    tmp_path: Path, mode: str, action: Action, verdict: str, says: str
) -> None:
    result = judge(tmp_path, ApprovalPolicy(mode=ApprovalMode(mode)), action)
    if verdict == ALLOW:
        assert result is None, result
        return
    assert result is not None
    assert result.status is ResultStatus.BLOCKED
    assert says in (result.error or "")
    if verdict == WAIT:
        assert result.wait is not None
        assert result.wait.kind == "approval"
        assert result.wait.action is action
        assert (result.error or "").startswith("waiting for approval: ")
    else:
        assert result.wait is None


def test_rm_in_non_interactive_auto_is_refused_and_never_runs(tmp_path: Path) -> None:
    tool = RecordingRun()
    ctx = make_ctx(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO, interactive=False))
    result = ToolRegistry([tool]).execute(run("rm", "-rf", "/"), ctx)
    assert result.status is ResultStatus.BLOCKED
    assert result.wait is None
    assert "--approve yes" in (result.error or "")
    assert "'rm *'" in (result.error or "")
    assert tool.ran == []
    assert ToolRegistry([tool]).execute(run("pytest", "-q"), ctx).ok
    assert tool.ran == [["pytest", "-q"]]


def test_chained_command_names_only_the_part_that_needs_approval(tmp_path: Path) -> None:
    result = judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), run("pytest; rm -rf ~"))
    assert result is not None
    assert "`rm -rf ~`" in (result.error or "")
    assert "`pytest`" not in (result.error or "")


def test_interactive_auto_without_an_approver_waits(tmp_path: Path) -> None:
    policy = ApprovalPolicy(mode=ApprovalMode.AUTO, interactive=True)
    result = judge(tmp_path, policy, run("git", "clean", "-fdx"))
    assert result is not None and result.wait is not None
    assert "git clean -fdx" in result.wait.question
    assert "deletes or discards work" in result.wait.question


def test_deny_beats_yes_and_allow(tmp_path: Path) -> None:
    policy = ApprovalPolicy(mode=ApprovalMode.YES, allow=["rm *"], deny=["rm -rf *"])
    assert judge(tmp_path, policy, run("rm", "x")) is None
    result = judge(tmp_path, policy, run("pytest; rm -rf ~"))
    assert result is not None and result.wait is None
    assert "deny pattern 'rm -rf *'" in (result.error or "")
    assert "`rm -rf ~`" in (result.error or "")
    edits = ApprovalPolicy(mode=ApprovalMode.YES, deny=["write *.env"])
    assert judge(tmp_path, edits, Action("write", {"args": ["prod.env"], "body": "x"})) is not None


def test_allow_patterns_pass_without_asking(tmp_path: Path) -> None:
    person = Person()
    policy = ApprovalPolicy(mode=ApprovalMode.ASK, allow=["make *", "ls"])
    assert judge(tmp_path, policy, run("make", "build"), person) is None
    assert judge(tmp_path, policy, run("ls"), person) is None
    never = ApprovalPolicy(mode=ApprovalMode.NEVER, allow=["pytest*"])
    assert judge(tmp_path, never, run("pytest", "-q")) is None
    partial = ApprovalPolicy(mode=ApprovalMode.AUTO, allow=["ls*"])
    result = judge(tmp_path, partial, run("ls", "&&", "rm", "-r", "x"))
    assert result is not None
    assert "`rm -r x`" in (result.error or "") and "`ls`" not in (result.error or "")
    assert person.questions == []


def test_allow_shell_permits_substitution(tmp_path: Path) -> None:
    policy = ApprovalPolicy(mode=ApprovalMode.YES, allow_shell=True)
    assert judge(tmp_path, policy, run("echo", "$(date)")) is None


@pytest.mark.parametrize(
    ("answer", "allowed"), [("no", False), ("n", False), ("", False), ("yes", True), ("Y", True)]
)
def test_an_approver_is_asked_once_per_action(tmp_path: Path, answer: str, allowed: bool) -> None:
    person = Person(answer)
    policy = ApprovalPolicy(mode=ApprovalMode.ASK)
    result = judge(tmp_path, policy, run("rm", "x"), person)
    assert len(person.questions) == 1
    assert "rm x" in person.questions[0]
    if allowed:
        assert result is None
    else:
        assert result is not None and result.wait is None
        assert "not approved: `rm x`" in (result.error or "")
    assert policy.remembered == set()


def test_always_remembers_the_program_for_the_run(tmp_path: Path) -> None:
    person = Person("always", "always")
    policy = ApprovalPolicy(mode=ApprovalMode.ASK)
    assert judge(tmp_path, policy, run("ls", "&&", "rm", "x"), person) is None
    assert policy.remembered == {"ls", "rm"}
    assert judge(tmp_path, policy, run("rm", "-r", "build"), person) is None
    assert judge(tmp_path, policy, run("python", "-m", "pip", "install", "x"), person) is None
    assert "python -m pip" in policy.remembered
    assert judge(tmp_path, policy, run("python", "-m", "pip", "list"), person) is None
    assert len(person.questions) == 2
    assert judge(tmp_path, policy, run("python", "evil.py")) is not None


def test_a_refused_action_never_reaches_the_tool(tmp_path: Path) -> None:
    tool = RecordingRun()
    ctx = make_ctx(tmp_path, ApprovalPolicy(mode=ApprovalMode.ASK), Person("no", "yes"))
    assert ToolRegistry([tool]).execute(run("rm", "x"), ctx).status is ResultStatus.BLOCKED
    assert ToolRegistry([tool]).execute(run("rm", "y"), ctx).ok
    assert tool.ran == [["rm", "y"]]


def test_auto_does_not_ask_about_confined_programs(tmp_path: Path) -> None:
    person = Person()
    policy = ApprovalPolicy(mode=ApprovalMode.AUTO)
    assert judge(tmp_path, policy, run("pytest"), person) is None
    assert judge(tmp_path, policy, run("python", "setup.py", "build"), person) is None
    assert judge(tmp_path, policy, Action("edit", {"args": ["a.py"]}), person) is None
    assert person.questions == []


def test_destructive_commands() -> None:
    assert is_destructive(["sudo", "rm", "-R", "x"])
    assert is_destructive(["git", "--no-pager", "branch", "-D", "topic"])
    assert not is_destructive(["rm", "-f", "x"])
    assert not is_destructive(["git", "reset", "HEAD", "x"])
    assert not is_destructive(["find", ".", "-name", "rm"])
    assert not is_destructive([])


LEAVING: list[tuple[SandboxPolicy, str]] = [
    (SandboxPolicy(network=True), "network access"),
    (SandboxPolicy(SandboxMode.OFF), "--sandbox off"),
]


@pytest.mark.parametrize(("sandbox", "says"), LEAVING)
def test_auto_asks_before_a_program_leaves_the_boundary(
    tmp_path: Path, sandbox: SandboxPolicy, says: str
) -> None:
    for action in (run("pytest"), Action("test", {"args": ["tests/"]})):
        refused = judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), action, sandbox=sandbox)
        assert refused is not None and refused.wait is None
        assert says in (refused.error or "") and "--approve yes" in (refused.error or "")
    person = Person("yes")
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), run("pytest"), person,
                 sandbox) is None
    assert says in person.questions[0]
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.YES), run("pytest"),
                 sandbox=sandbox) is None
    edit = Action("edit", {"args": ["a.py"], "body": "x"})
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), edit, sandbox=sandbox) is None


def test_without_a_sandbox_auto_refuses_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NORMALIZE_NO_SANDBOX", "1")
    refused = judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), run("pytest"))
    assert refused is not None and refused.wait is None
    assert "the sandbox is unavailable" in (refused.error or "")
    assert "--sandbox off" in (refused.error or "")
    action = run("pytest")
    person = Person("yes")
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.ASK), action, person) is None
    assert "the sandbox is unavailable" in person.questions[0]
    assert action.params[UNCONFINED_PARAM] is True  # the person's yes runs it unconfined
    off = run("pytest")
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.YES), off,
                 sandbox=SandboxPolicy(SandboxMode.OFF)) is None
    assert UNCONFINED_PARAM not in off.params


def test_only_a_person_can_mark_an_action_unconfined(tmp_path: Path) -> None:
    action = run("pytest")
    action.params[UNCONFINED_PARAM] = True  # e.g. planted in a workflow step's params
    assert judge(tmp_path, ApprovalPolicy(mode=ApprovalMode.AUTO), action) is None
    assert UNCONFINED_PARAM not in action.params


def test_from_config_reads_a_permissions_table() -> None:
    policy = ApprovalPolicy.from_config(
        {"mode": "auto", "allow": ["make *"], "deny": ["rm *"], "allow_shell": True},
        interactive=True,
    )
    assert policy == ApprovalPolicy(
        mode=ApprovalMode.AUTO, interactive=True, allow=["make *"], deny=["rm *"], allow_shell=True
    )
    assert ApprovalPolicy.from_config({}).mode is ApprovalMode.ASK


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ({"mode": "auto", "alow": ["x"]}, "unknown key 'alow'"),
        ({"mode": "sometimes"}, "unknown approval mode 'sometimes'"),
        ({"allow": "make *", "deny": [1]}, "deny must be a list of strings"),
        ({"allow_shell": "yes"}, "allow_shell must be true or false"),
    ],
)
def test_from_config_refuses_bad_tables(table: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        ApprovalPolicy.from_config(table)


def test_a_skill_grant_passes_only_what_stays_in_the_sandbox(tmp_path: Path) -> None:
    """`allowed-tools: Bash(git:*) Edit` in `ask` mode: `git status` and an edit run; the
    same `git status` with network on, `git reset --hard`, and `never` mode do not."""
    from normalize.skills.grants import parse_allowed_tools

    grants, _ = parse_allowed_tools("git-flow", "Bash(git:*) Edit")
    policy = ApprovalPolicy(mode=ApprovalMode.ASK, granted=grants)
    assert judge(tmp_path, policy, run("git", "status")) is None
    assert judge(tmp_path, policy, Action("edit", {"args": ["a.py"], "body": "x"})) is None
    assert judge(tmp_path, policy, Action("write", {"args": ["a.py"], "body": "x"})) is not None
    outside = judge(tmp_path, policy, run("git", "status"), sandbox=SandboxPolicy(network=True))
    assert outside is not None and outside.wait is not None
    assert "network access" in outside.wait.question
    hard = judge(tmp_path, policy, run("git", "reset", "--hard"))
    assert hard is not None and hard.wait is not None
    never = ApprovalPolicy(mode=ApprovalMode.NEVER, granted=grants)
    assert "`never`" in (judge(tmp_path, never, run("git", "status")) or ActionResult()).error
