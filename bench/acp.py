"""The same task through the claude harness driver and through the acp driver, side by side.

    python bench/acp.py                  # 3 runs each
    python bench/acp.py --runs 5

The task: write a.txt, write b.txt, run check.py (which reads both and logs a line), say
done — scripted at normalize's local model server, so both paths make the same three tool
calls and four model replies. `--harness claude` runs Claude Code (its own Write and Bash
tools, one `harness` action per turn); `--harness acp:claude-code-acp` runs Zed's ACP agent
on Claude Code, whose Write and Bash are served by normalize as the ACP client (one
action per file write and per command). Both run in normalize's sandbox and reach the model
through its proxy, under a pinned host name. Each run starts from a fresh copy of the
project and a fresh data home.

Per path: the median wall time of `normalize agent` (start to exit) and its spread, and
the median time from the start to the model server's first request (the agent's start-up);
the
actions journaled (`action_finished`), the checkpoints of actions and the agent's own tool
calls (`harness_tool_called`); the tokens (input and output, without cache tokens) and cost
normalize recorded for the task (`run_ended`); and, the same way for both, the requests the model
server got and the tokens of their prompts (estimated by normalize's estimator from the
request bodies), since an agent may not report its usage to normalize. A last line gives
the acp path against the harness path as ratios (wall time, actions journaled, prompt
tokens).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from normalize.providers.synthetic import estimate_tokens
from normalize.testing.servers import FakeModelServer, Reply, ToolUse

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = [sys.executable, str(REPO / "tests" / "sandbox" / "pinned_normalize.py")]
INSTALLED = REPO / ".ci" / "harnesses" / "node_modules" / ".bin"
HOST = "api.harness.test"
HAIKU = "claude-haiku-4-5-20251001"
CHECK = ('import pathlib\nprint(pathlib.Path("a.txt").read_text(), '
         'pathlib.Path("b.txt").read_text())\npathlib.Path("ran.log").write_text("ran\\n")\n')


def script(path: str, ws: Path) -> tuple[list[Reply], dict[str, list[Reply]]]:
    """The model's replies for `path` (Claude Code's tool names, or the ACP agent's), and the
    replies aside by model (the ACP agent's one haiku request before its prompt)."""
    prefix = "mcp__acp__" if path == "acp" else ""
    shell: dict[str, Any] = {"command": "python3 check.py", "description": "run the check"}
    if path == "acp":
        shell["timeout"] = 60000
    replies = [
        Reply("Writing a.", tools=(ToolUse(f"{prefix}Write", {"file_path": f"{ws}/a.txt",
                                                               "content": "A\n"}),)),
        Reply("Writing b.", tools=(ToolUse(f"{prefix}Write", {"file_path": f"{ws}/b.txt",
                                                               "content": "B\n"}),)),
        Reply("Checking.", tools=(ToolUse(f"{prefix}Bash", shell),)),
        Reply("Wrote a and b; the check ran."),
    ]
    return replies, ({HAIKU: [Reply("ok")]} if path == "acp" else {})


def one(path: str, root: Path) -> dict[str, Any]:
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=root))
    (ws / "check.py").write_text(CHECK)
    home = Path(tempfile.mkdtemp(prefix="nh-", dir=root)) / "home"
    env = {**os.environ, "CI": "true", "ANTHROPIC_API_KEY": "sk-bench",
           "NORMALIZE_HOME": str(home), "NORMALIZE_CLAUDE_BIN": str(INSTALLED / "claude")}
    env.pop("ANTHROPIC_BASE_URL", None)
    harness = "claude" if path == "claude" else f"acp:{INSTALLED / 'claude-code-acp'}"
    replies, aside = script(path, ws)
    with FakeModelServer(replies, models=aside) as server:
        port = server.url.rsplit(":", 1)[1]
        argv = [*LAUNCHER, f"{HOST}=127.0.0.1:{port}", "--", "agent", "--harness", harness,
                "--base-url", f"http://{HOST}:{port}", "--json", "write a and b, run the check"]
        started = time.perf_counter()
        proc = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=300, check=False)
        took = time.perf_counter() - started
        first = (server.first_request_at or started) - started
        server.assert_done()
        requests = [r for r in server.requests if r.path == "/v1/messages"]
        prompt = sum(estimate_tokens(json.dumps(r.body)) for r in requests)
    if proc.returncode != 0 or not (ws / "ran.log").exists():
        raise SystemExit(f"{path} failed ({proc.returncode}): {proc.stderr[-800:]}")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    ended = [e for e in events if e["type"] == "run_ended"][-1]
    return {"wall": took, "first": first,
            "actions": [e["command"].split("\n")[0] for e in events
                        if e["type"] == "action_finished"],
            "checkpoints": sum(1 for e in events
                               if e["type"] == "checkpoint_taken" and e["kind"] == "action"),
            "tool_calls": len({e["call_id"] for e in events
                               if e["type"] == "harness_tool_called"}),
            "journaled_tokens": ended["input_tokens"] + ended["output_tokens"],
            "cost": ended["cost_usd"],
            "requests": len(requests), "prompt_tokens": prompt}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for program in ("claude", "claude-code-acp"):
        if not (INSTALLED / program).exists():
            raise SystemExit(f"{program} is not installed (scripts/test installs it)")
    paths = {"claude": "claude harness", "acp": "acp:claude-code-acp"}
    with tempfile.TemporaryDirectory(prefix="bench-acp-") as tmp:
        root = Path(tmp)
        for path in paths:
            one(path, root)  # warm each once
        results: dict[str, list[dict[str, Any]]] = {path: [] for path in paths}
        for _ in range(args.runs):
            for path in paths:
                results[path].append(one(path, root))
    print(f"{'':22}{'wall (median, min-max)':>26}{'1st request':>12}{'actions':>9}"
          f"{'ckpts':>7}{'calls':>7}{'tokens, $ (journal)':>22}{'requests':>10}"
          f"{'prompt tokens':>15}")
    for path, label in paths.items():
        runs = results[path]
        walls = [r["wall"] for r in runs]
        last = runs[-1]
        first = statistics.median(r["first"] for r in runs)
        print(f"{label:22}{statistics.median(walls):>10.2f} s ({min(walls):.2f}-{max(walls):.2f})"
              f"{first:>10.2f} s"
              f"{len(last['actions']):>9}{last['checkpoints']:>7}{last['tool_calls']:>7}"
              f"{last['journaled_tokens']:>12} ${last['cost']:<8.4f}{last['requests']:>10}"
              f"{last['prompt_tokens']:>15}")
    harness, acp = results["claude"], results["acp"]
    wall = statistics.median(r["wall"] for r in acp) / statistics.median(
        r["wall"] for r in harness)
    per_call = len(acp[-1]["actions"]) / max(len(harness[-1]["actions"]), 1)
    prompts = acp[-1]["prompt_tokens"] / max(harness[-1]["prompt_tokens"], 1)
    print(f"acp / harness: wall {wall:.2f}x, actions journaled {per_call:.1f}x "
          f"({len(acp[-1]['actions'])} per call against {len(harness[-1]['actions'])} per "
          f"turn), prompt tokens {prompts:.2f}x")
    for path, label in paths.items():
        print(f"{label}: {results[path][-1]['actions']}")


if __name__ == "__main__":
    main()
