"""Skills in an agent's run: the catalog in the cached prompt, `skill NAME` and `$NAME` load
the instructions once, and they outlast a compaction (they ride outside the conversation)."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_helpers import Project

from normalize.testing.servers import FakeModelServer

RELEASE = ("---\nname: release\ndescription: Cut a release of this project (bump, tag, "
           "publish).\n---\n# Releasing\nRun scripts/bump.sh, then tag vX.Y.\n")
SKILLS_IN_USE = "Skills in use (instructions the user installed"


@pytest.fixture
def project(tmp_path: Path, server: FakeModelServer) -> Project:
    root = tmp_path / "proj"
    skill = root / ".agents" / "skills" / "release"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text(RELEASE)
    (skill / "scripts" / "bump.sh").write_text("echo bumped\n")
    (root / "big.txt").write_text("".join(f"line {n} of a long file\n" for n in range(300)))
    return Project(root, tmp_path / "home", server)


def system(request: object) -> str:
    return "".join(block["text"] for block in request.body["system"])  # type: ignore[attr-defined]


def skill_messages(request: object) -> list[str]:
    return [m["content"] for m in request.body["messages"]  # type: ignore[attr-defined]
            if str(m["content"]).startswith(SKILLS_IN_USE)]


def test_an_untrusted_project_skill_is_ignored_with_one_line(project: Project) -> None:
    done, _ = project.agent("cut a release", "done not now")
    assert done.returncode == 0, done.stderr
    assert "ignored 1 project skill(s) (release): untrusted workspace files" in done.stdout
    assert "## Skills" not in system(project.server.requests[0])


def test_skill_loads_once_and_outlasts_a_compaction(project: Project) -> None:
    trusted = project.run("trust", str(project.root / ".agents/skills/release/SKILL.md"))
    assert trusted.returncode == 0, trusted.stderr
    flow = project.root.parent / "agent.toml"
    flow.write_text('[workflow]\nname = "agent"\n[workflow.llm]\nmodel = "claude-sonnet-4-5"\n'
                    '[workflow.context]\nstrategy = "conversation"\n'
                    'compact_after_chars = 4000\n')
    done, task_id = project.agent("cut a release", "skill release", "view big.txt",
                                  "skill release", "view big.txt", "done released",
                                  flags=("--workflow", str(flow)))
    assert done.returncode == 0, done.stderr
    requests = project.server.requests
    first = system(requests[0])
    assert "## Skills\n" in first and "- release: Cut a release of this project" in first
    assert all(system(r) == first for r in requests)  # the catalog never moves: cached
    assert skill_messages(requests[0]) == []
    for request in requests[1:]:
        (message,) = skill_messages(request)
        assert message.count("# Releasing\nRun scripts/bump.sh, then tag vX.Y.") == 1
        assert "scripts/bump.sh" in message.split("Its files", 1)[1]
    assert "Skill release is already loaded" in str(requests[3].body["messages"][-1]["content"])
    compacted = [e for e in project.journal(task_id) if e["type"] == "context_compacted"]
    assert compacted  # and the skill's instructions were in every request after it


def test_a_dollar_name_in_the_goal_preloads_it(project: Project) -> None:
    project.run("trust", str(project.root / ".agents/skills/release/SKILL.md"))
    done, _ = project.agent("use $release for 1.2", "done released")
    assert done.returncode == 0, done.stderr
    assert "skill release loaded ($release in the task)" in done.stdout
    (message,) = skill_messages(project.server.requests[0])
    assert "# Releasing" in message


def test_a_workflow_preloads_its_skills(project: Project) -> None:
    project.run("trust", str(project.root / ".agents/skills/release/SKILL.md"))
    flow = project.root.parent / "agent.toml"
    flow.write_text('[workflow]\nname = "agent"\nskills = ["release", "absent"]\n'
                    '[workflow.llm]\nmodel = "claude-sonnet-4-5"\n')
    done, _ = project.agent("ship it", "done shipped", flags=("--workflow", str(flow)))
    assert done.returncode == 0, done.stderr
    assert "skill release loaded (the workflow's skills)" in done.stdout
    assert "the workflow's skill 'absent' is not here (or not trusted)" in done.stdout
    (message,) = skill_messages(project.server.requests[0])
    assert "# Releasing" in message


def test_the_catalog_of_200_skills_takes_its_share_of_each_window(tmp_path: Path,
                                                                   server: FakeModelServer
                                                                   ) -> None:
    """The same 200 skills, a 200k-token model and a 32k-token one: each first request's
    catalog is within 2% of its window (the ceiling for the first), the smaller one smaller."""
    home = tmp_path / "home"
    for n in range(200):
        skill = home / "config" / "skills" / f"topic-{n:03d}"
        skill.mkdir(parents=True)
        skill.joinpath("SKILL.md").write_text(
            f"---\nname: topic-{n:03d}\ndescription: Use when the task is about topic {n}: "
            + "detail " * 40 + "\n---\nBody.\n")
    (tmp_path / "proj").mkdir()
    project = Project(tmp_path / "proj", home, server)
    sizes = {}
    for model, cap in (("anthropic:claude-sonnet-4-5", 8_000),
                       ("anthropic:a-local-model", 2_560)):
        project.server.add("done nothing to do")
        done = project.run("agent", "look around", "--model", model)
        assert done.returncode == 0, done.stderr
        catalog = "## Skills\n" + system(project.server.requests[-1]).split("## Skills\n")[1]
        assert len(catalog) <= cap, (model, len(catalog))
        assert "- topic-000: Use when the task" in catalog
        assert "more (the catalog is full" in catalog
        sizes[model] = len(catalog)
    assert sizes["anthropic:a-local-model"] < sizes["anthropic:claude-sonnet-4-5"] // 2
