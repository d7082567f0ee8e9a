"""Prompt tokens per turn under each context strategy: the 30-step review story and more.

    python bench/tokens.py                       # the review of a real package (h11's sdist)
    python bench/tokens.py --repo-map 1024       # task_tree without and with a repo map
    python bench/tokens.py --story shop          # the synthetic package, scripted model
    python bench/tokens.py --story shop --turns 12

The review story downloads h11's sdist once with pip, unpacks it for each
strategy and plays 30 replies (read 19 files, 2 greps, 3 edits, 4 checks)
through the official anthropic SDK at the local fake server, which counts
cache reads and writes as the API does; costs are at list prices. With
`--repo-map N` it plays the story under task_tree twice, without and with an
N-token repo map in the cached prefix (`[workflow.context] repo_map`).

The model is a ScriptedModel (no network, no key): the same 30 replies under
every strategy, so only the prompts differ. The tools are real and run on a
sample repository generated in a temporary directory. A turn's prompt tokens
are input + cache read + cache write tokens as the provider reports them
(estimated at 4 characters a token), so the stable system prompt counts on
every turn. `token_table()` returns the rows for other scripts (bench/run.py).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

STRATEGIES = ("task_tree", "task_list", "flat", "conversation", "none")
BASELINE = "conversation"

_MODULE = '''"""{title} records and helpers for the shop package."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


@dataclass
class {cls}:
    """One {title} line: a named thing with a unit price and a quantity."""

    name: str
    price: float
    quantity: int = 1
    tags: list[str] = field(default_factory=list)

    def total(self) -> float:
        """Price times quantity."""
        return self.price * self.quantity

    def describe(self) -> str:
        """A one-line description for receipts."""
        return f"{{self.name}}: {{self.quantity}} x {{self.price:.2f}} = {{self.total():.2f}}"

    def tagged(self, tag: str) -> bool:
        """Whether the line carries `tag`."""
        return tag in self.tags


def {fn}_total(items: Iterable[{cls}]) -> float:
    """Sum of the totals of `items`."""
    return {total_expr}


def {fn}_cheapest(items: list[{cls}]) -> {cls} | None:
    """The item with the lowest price, or None."""
    return min(items, key=lambda item: item.price, default=None)


def {fn}_dearest(items: list[{cls}]) -> {cls} | None:
    """The item with the highest price, or None."""
    return max(items, key=lambda item: item.price, default=None)


def {fn}_names(items: list[{cls}]) -> list[str]:
    """Names, sorted."""
    return sorted(item.name for item in items)


def {fn}_discount(items: list[{cls}], rate: float) -> list[{cls}]:
    """Copies of `items` with `rate` off the price."""
    if not 0 <= rate < 1:
        raise ValueError(f"rate must be in [0, 1), not {{rate}}")
    return [{cls}(i.name, round(i.price * (1 - rate), 2), i.quantity, list(i.tags))
            for i in items]


def {fn}_by_tag(items: list[{cls}], tag: str) -> list[{cls}]:
    """The items carrying `tag`, in order."""
    return [item for item in items if item.tagged(tag)]


def {fn}_quantities(items: list[{cls}]) -> dict[str, int]:
    """Total quantity per name."""
    out: dict[str, int] = {{}}
    for item in items:
        out[item.name] = out.get(item.name, 0) + item.quantity
    return out


def {fn}_receipt(items: list[{cls}]) -> str:
    """A plain-text receipt, one line per item and a total."""
    lines = [item.describe() for item in items]
    lines.append(f"total: {{{fn}_total(items):.2f}}")
    return "\\n".join(lines)
'''

_TOPICS = ("cart", "order", "invoice", "stock", "refund", "coupon", "supplier", "shipment")
_BUG = "sum(item.price for item in items)"  # ignores quantities: the test catches it
_FIX = "sum(item.total() for item in items)"


def make_repo(root: Path) -> Path:
    """A Python package of eight similar modules (the cart one has a bug) and its tests."""
    package = root / "shop"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""The shop package."""\n')
    for topic in _TOPICS:
        cls = topic.capitalize() + "Item"
        (package / f"{topic}.py").write_text(_MODULE.format(
            title=topic, cls=cls, fn=topic, total_expr=_BUG if topic == "cart" else _FIX))
    (root / "tests").mkdir()
    tests = ["from shop.cart import CartItem, cart_receipt, cart_total\n"]
    tests.append("def test_total() -> None:\n"
                 "    assert cart_total([CartItem('a', 2.0, 3), CartItem('b', 1.0)]) == 7.0\n")
    tests.append("def test_receipt() -> None:\n"
                 "    assert cart_receipt([CartItem('a', 2.0, 3)]).endswith('total: 6.00')\n")
    (root / "tests" / "test_cart.py").write_text("\n\n".join(tests))
    (root / "pyproject.toml").write_text(
        '[project]\nname = "shop"\nversion = "0.1.0"\n\n'
        '[tool.pytest.ini_options]\npythonpath = ["."]\naddopts = "-p no:cacheprovider"\n')
    (root / "README.md").write_text("# shop\n\nA sample package for the token benchmark.\n")
    return root


Reply = str | Callable[[Any], str]


def _fetch_rest(path: str) -> Callable[[Any], str]:
    """A reply that fetches the full text of the last preview shown (a real model's move)."""

    def reply(request: Any) -> str:
        ids = re.findall(r"fetch (r\d+)", request.messages[-1]["content"])
        if ids:
            return f"The preview is cut; reading the rest.\nfetch {ids[-1]}"
        return f"Reading the rest.\nview {path}:21-80"  # `none` shows no results

    return reply


def script(turns: int) -> list[Reply]:
    """`turns` replies of a review-and-fix session, each with a line of prose; the last is done.

    The story: look around, run the failing tests, find and fix the bug in
    cart_total, then review the other modules (view and fetch the rest,
    search, outline, small docstring edits, import checks), and finish on a
    passing test run.
    """
    python = sys.executable
    fix = (f"edit shop/cart.py <<EOF\n<<<<<<< SEARCH\n    return {_BUG}\n=======\n"
           f"    return {_FIX}\n>>>>>>> REPLACE\nEOF")
    opening: list[Reply] = [
        "I will start with the layout.\nview .",
        "Running the tests first.\ntest",
        "test_total fails; reading the test.\nview tests/test_cart.py",
        "Now the module under test.\nview shop/cart.py",
        _fetch_rest("shop/cart.py"),
        f"cart_total ignores quantities; item.total() fixes it.\n{fix}",
        "Checking the fix.\ntest",
        "Fixed. Keeping that in mind for the other modules.\n"
        "note the other modules may copy cart_total's bug",
    ]
    review: list[Reply] = []
    for index, topic in enumerate(_TOPICS[1:]):
        review.append(f"Reviewing {topic}.\nview shop/{topic}.py")
        review.append(_fetch_rest(f"shop/{topic}.py"))
        review.append(f"Who calls {topic}_total?\ngrep {topic}_total")
        if index % 3 == 0:
            review.append(f"Its outline.\nskeleton shop/{topic}.py")
        elif index % 3 == 1:
            review.append(
                f"A clearer docstring for {topic}_names.\n"
                f"edit shop/{topic}.py <<EOF\n<<<<<<< SEARCH\n    \"\"\"Names, sorted.\"\"\"\n"
                f"=======\n    \"\"\"The items\' names in alphabetical order.\"\"\"\n"
                ">>>>>>> REPLACE\nEOF")
        else:
            review.append(f"Checking it imports.\nrun {python} -c \"import shop.{topic}\"")
    closing: list[Reply] = [
        "Everything reviewed; a last test run.\ntest",
        "All modules read, cart_total fixed, docstrings tidied.\n"
        "done Fixed cart_total (it ignored quantities) and reviewed the package",
    ]
    if turns <= len(closing):
        return closing[-turns:]
    middle = (opening + review)[: turns - len(closing)]
    while len(middle) < turns - len(closing):
        middle.append(f"One more look.\ngrep 'def ' shop/{_TOPICS[len(middle) % 8]}.py")
    return [*middle, *closing]


def run_strategy(strategy: str, turns: int, work: Path) -> dict[str, Any]:
    """Run the scripted task under `strategy`; prompt tokens per turn and task file sizes."""
    from normalize.contract.driver import DriverServices
    from normalize.events import BaseEvent
    from normalize.runner import RunOptions, load_spec, run_task, start_task
    from normalize.store import TaskStore
    from normalize.tables import ContextSettings
    from normalize.task import Limits
    from normalize.testing import ScriptedModel

    repo = make_repo(work / strategy / "repo")
    model = ScriptedModel(script(turns), model="bench")
    events: list[BaseEvent] = []
    options = RunOptions(  # the loop alone: bench/memory_tokens.py adds memory
        workspace=repo, subscribers=[events.append], approve="yes", fsync=False,
        store=TaskStore(work / strategy / "home", fsync=False), memory=False,
        services=DriverServices(model_factory=lambda *_args, **_opts: model),
    )
    spec = load_spec("dwim", repo)
    spec.context = ContextSettings(strategy=strategy)
    spec.limits = Limits(max_turns=turns + 5)
    task = start_task(spec, "Review the shop package: read every module, tidy the "
                      "docstrings, and check that each module imports.", options)
    outcome = run_task(task, options)
    model.assert_done()
    if outcome.status.value != "done":
        raise RuntimeError(f"{strategy}: the scripted task ended {outcome.status.value}: "
                           f"{outcome.error}")
    per_turn: list[int] = []
    sizes: list[int] = []
    for event in events:
        data = event.to_dict()
        if event.type == "model_replied":
            per_turn.append(data["input_tokens"] + data["cache_read_tokens"]
                            + data["cache_write_tokens"])
        elif event.type == "checkpoint_saved":
            sizes.append(data["bytes"])
    return {"strategy": strategy, "per_turn": per_turn, "task_file_bytes": sizes}


def token_table(turns: int = 30, strategies: tuple[str, ...] = STRATEGIES) -> list[dict[str, Any]]:
    """One row per strategy: first, last, max and total prompt tokens, and ratios.

    `vs_conversation` is the total over the conversation strategy's total;
    `growth` is the last turn over the first. `per_turn` holds every turn.
    """
    with tempfile.TemporaryDirectory(prefix="normalize-bench-") as tmp:
        runs = [run_strategy(s, turns, Path(tmp)) for s in strategies]
    baseline = next((r for r in runs if r["strategy"] == BASELINE), None)
    base_total = sum(baseline["per_turn"]) if baseline else 0
    rows = []
    for run in runs:
        series = run["per_turn"]
        total = sum(series)
        rows.append({
            "strategy": run["strategy"],
            "turns": len(series),
            "first": series[0],
            "last": series[-1],
            "max": max(series),
            "total": total,
            "growth": round(series[-1] / series[0], 2),
            "vs_conversation": round(total / base_total, 3) if base_total else None,
            "task_file_bytes": run["task_file_bytes"][-1],
            "per_turn": series,
        })
    return rows


def markdown_table(rows: list[dict[str, Any]]) -> str:
    """The summary as a markdown table (the README embeds it)."""
    out = ["| strategy | first turn | last turn | last ÷ first | largest turn "
           "| total (all turns) | total ÷ conversation | task file |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ratio = "—" if row["vs_conversation"] is None else f"{row['vs_conversation']:.0%}"
        out.append(f"| `{row['strategy']}` | {row['first']:,} | {row['last']:,} "
                   f"| {row['growth']:.2f}× | {row['max']:,} | {row['total']:,} | {ratio} "
                   f"| {row['task_file_bytes']:,} B |")
    return "\n".join(out)


def per_turn_table(rows: list[dict[str, Any]]) -> str:
    """Prompt tokens of every turn, one column per strategy."""
    out = ["| turn | " + " | ".join(f"`{r['strategy']}`" for r in rows) + " |",
           "|---:|" + "---:|" * len(rows)]
    for turn in range(max(r["turns"] for r in rows)):
        cells = [f"{r['per_turn'][turn]:,}" if turn < r["turns"] else "" for r in rows]
        out.append(f"| {turn + 1} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# -- the 30-step review story: a real package, through the real SDK -----------------

REVIEW_PACKAGE = ("h11", "0.16.0")
"""A small pure-Python package (MIT), its sdist downloaded with pip and unpacked per run."""
REVIEW_GOAL = ("Review the h11 package: read its modules and tests, fix the typos and "
               "docstrings you find, and check that the tests still pass.")
REVIEW_MODEL = "claude-sonnet-4-5"
PEERS = {"Claude Code 2.1": 838_000, "Codex CLI 0.171": 648_000, "aider 0.86": 455_000}
"""Total prompt tokens of the peers on this story (issue 13's measurement, same model server)."""


def fetch_sdist(cache: Path) -> Path:
    """The package's sdist, downloaded once into `cache` by pip."""
    import subprocess

    name, version = REVIEW_PACKAGE
    found = cache / f"{name}-{version}.tar.gz"
    if not found.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
             f"{name}=={version}", "-d", str(cache)],
            capture_output=True, text=True, timeout=300, check=False)
        if done.returncode != 0 or not found.is_file():
            raise RuntimeError(f"pip could not download {name}=={version}: "
                               f"{done.stderr.strip()[-300:]}")
    return found


def unpack(sdist: Path, where: Path) -> Path:
    """The sdist unpacked under `where`; returns the package's root directory."""
    import tarfile

    with tarfile.open(sdist) as archive:
        archive.extractall(where, filter="data")
    name, version = REVIEW_PACKAGE
    return where / f"{name}-{version}"


def _edit(path: str, old: str, new: str, why: str) -> str:
    return (f"{why}\nedit {path} <<EOF\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n"
            ">>>>>>> REPLACE\nEOF")


def review_script() -> list[str]:
    """30 replies: read 19 files (10–400 lines, one of 659 by its outline and a symbol),
    2 greps, 3 edits, 4 checks, a first look and `done`."""
    python = sys.executable
    # the stdlib round trip opens sockets, which the sandbox's private network refuses
    pytest = (f"run {python} -m pytest -q -p no:cacheprovider "
              "--ignore=h11/tests/test_against_stdlib_http.py")
    return [
        "First the layout.\nview .",
        "The README says what the package is for.\nview README.rst",
        "The public API.\nview h11/__init__.py",
        "The version.\nview h11/_version.py",
        "Where are the event classes?\ngrep 'class .*Event' h11",
        "The events module.\nview h11/_events.py",
        "Helpers used everywhere.\nview h11/_util.py",
        "The grammar.\nview h11/_abnf.py",
        "Header handling.\nview h11/_headers.py",
        "The connection is the core.\nview h11/_connection.py",
        "Its big method.\nview h11/_connection.py/Connection/send_with_data_passthrough",
        "Readers.\nview h11/_readers.py",
        "Writers.\nview h11/_writers.py",
        "The receive buffer.\nview h11/_receivebuffer.py",
        "The state machine.\nview h11/_state.py",
        f"Do the tests pass as they are?\n{pytest} h11/tests",
        "Who validates headers?\ngrep 'def normalize_and_validate' h11",
        "The util tests.\nview h11/tests/test_util.py",
        "The header tests.\nview h11/tests/test_headers.py",
        _edit("h11/_util.py", "    This as an abstract base class, with two concrete base classes:",
              "    This is an abstract base class, with two concrete base classes:",
              "A typo in ProtocolError's docstring."),
        f"Checking the util tests.\n{pytest} h11/tests/test_util.py",
        "The test helpers.\nview h11/tests/helpers.py",
        "The event tests.\nview h11/tests/test_events.py",
        _edit("h11/_events.py", '    """\n    Base class for h11 events.\n    """',
              '    """Base class for h11 events."""', "A one-line docstring for Event."),
        "The buffer tests.\nview h11/tests/test_receivebuffer.py",
        _edit("h11/_receivebuffer.py",
              "class ReceiveBuffer:\n    def __init__(self) -> None:",
              'class ReceiveBuffer:\n    """Bytes received and not yet consumed, searched '
              'for line ends without rescanning."""\n\n    def __init__(self) -> None:',
              "ReceiveBuffer has no docstring."),
        f"The whole suite after the edits.\n{pytest} h11/tests",
        "The licence, to be sure the package may be vendored.\nview LICENSE.txt",
        "A last run of the state machine's tests through the test command.\n"
        "test h11/tests/test_state.py",
        "done Reviewed h11: fixed a docstring typo in ProtocolError, tidied two docstrings; "
        "the tests pass",
    ]


def review_strategy(strategy: str, work: Path, sdist: Path, repo_map: int = 0) -> dict[str, Any]:
    """The review story under `strategy` (with a repo map of `repo_map` tokens), at the server."""
    import os
    from dataclasses import replace

    from normalize.contract.driver import DriverServices
    from normalize.events import BaseEvent
    from normalize.runner import RunOptions, load_spec, run_task, start_task
    from normalize.store import TaskStore
    from normalize.tables import ContextSettings, LLMTable
    from normalize.task import Limits
    from normalize.testing.servers import FakeModelServer

    label = f"{strategy} + repo_map {repo_map}" if repo_map else strategy
    where = f"{strategy}-map{repo_map}" if repo_map else strategy
    repo = unpack(sdist, work / where)
    replies = review_script()
    events: list[BaseEvent] = []
    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")}
    with FakeModelServer(replies) as server:
        os.environ.update(ANTHROPIC_API_KEY="sk-ant-bench", ANTHROPIC_BASE_URL=server.url)
        try:
            options = RunOptions(  # the loop alone: bench/memory_tokens.py adds memory
                workspace=repo, subscribers=[events.append], approve="yes", fsync=False,
                store=TaskStore(work / f"{where}-home", fsync=False), memory=False,
                services=DriverServices(config_dir=work / "no-config"))
            spec = load_spec("dwim", repo)
            spec.llm = replace(spec.llm or LLMTable(), provider="anthropic",
                               model=REVIEW_MODEL, fallback=())
            spec.context = ContextSettings(strategy=strategy, repo_map=repo_map)
            spec.limits = Limits(max_turns=len(replies) + 5)
            task = start_task(spec, REVIEW_GOAL, options)
            outcome = run_task(task, options)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        server.assert_done()
    if outcome.status.value != "done":
        raise RuntimeError(f"{strategy}: the review ended {outcome.status.value}: "
                           f"{outcome.error}")
    failed = [f"{e.to_dict().get('command') or e.to_dict().get('tool')}: "
              f"{e.to_dict().get('error') or e.to_dict().get('status')}"
              for e in events if e.type == "action_finished"
              and e.to_dict().get("status") != "success"]
    if failed:  # the story must run as written, or its figures mean nothing
        raise RuntimeError(f"{strategy}: actions failed: {'; '.join(failed)}")
    turns = [e.to_dict() for e in events if e.type == "model_replied"]
    usage = outcome.task.usage
    return {
        "strategy": label, "requests": len(server.requests), "steps": len(replies),
        "per_turn": [t["input_tokens"] + t["cache_read_tokens"] + t["cache_write_tokens"]
                     for t in turns],
        "cache_read": usage.cache_read_tokens, "cache_write": usage.cache_write_tokens,
        "cost_usd": usage.cost_usd,
    }


def review_table(strategies: tuple[str, ...] = STRATEGIES, cache: Path | None = None, *,
                 repo_maps: tuple[int, ...] = (0,)) -> list[dict[str, Any]]:
    """One row per strategy and repo map size of the 30-step review: requests, tokens, cost."""
    cache = cache or Path(tempfile.gettempdir()) / "normalize-bench-cache"
    sdist = fetch_sdist(cache)
    rows = []
    with tempfile.TemporaryDirectory(prefix="normalize-review-") as tmp:
        for strategy, repo_map in ((s, m) for s in strategies for m in repo_maps):
            run = review_strategy(strategy, Path(tmp), sdist, repo_map)
            series = run["per_turn"]
            rows.append({**run, "first": series[0], "last": series[-1], "max": max(series),
                         "total": sum(series), "growth": round(series[-1] / series[0], 2)})
    return rows


def review_markdown(rows: list[dict[str, Any]]) -> str:
    """The review table, with the targets and the peers' totals beside it."""
    out = ["| strategy | requests (30 steps) | first | last | last ÷ first | largest "
           "| total prompt | cached (read) | cache writes | cost |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| `{r['strategy']}` | {r['requests']} | {r['first']:,} | {r['last']:,} "
                   f"| {r['growth']:.2f}× | {r['max']:,} | {r['total']:,} "
                   f"| {r['cache_read']:,} | {r['cache_write']:,} | ${r['cost_usd']:.4f} |")
    out.append("")
    out.append("Targets: requests ≤ 31, total ≤ 80,000 under `task_tree`, last ÷ first ≤ 1.5. "
               "Peers on the same story (total prompt tokens): "
               + ", ".join(f"{name} {total:,}" for name, total in PEERS.items()) + ".")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--repo-map", type=int, metavar="TOKENS",
                        help="the review under task_tree without and with a TOKENS repo map")
    parser.add_argument("--story", choices=("review", "shop"), default="review",
                        help="review: 30 steps on a real package through the SDK (default); "
                             "shop: the synthetic package with a scripted model")
    args = parser.parse_args(argv)
    if args.story == "review":
        name, version = REVIEW_PACKAGE
        print(f"The 30-step review of {name} {version} (sdist), {REVIEW_MODEL} at the local "
              "server; prompt = input + cache read + cache write:\n")
        if args.repo_map:
            rows = review_table(("task_tree",), repo_maps=(0, args.repo_map))
        else:
            rows = review_table()
        print(review_markdown(rows))
        return 0
    rows = token_table(args.turns)
    print(f"Prompt tokens per turn, {args.turns}-turn scripted task "
          "(input + cache read + cache write):\n")
    print(markdown_table(rows))
    if not args.summary_only:
        print()
        print(per_turn_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
