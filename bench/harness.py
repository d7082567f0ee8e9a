"""What normalize adds to a harness turn: the same scripted turn with the harness alone and
under `normalize agent --harness` (start-up, sandbox, proxy, journal, checkpoints).

    python bench/harness.py                       # claude, 5 runs each
    python bench/harness.py --harness codex --runs 10

The turn: the harness reads calc.py, edits it and runs a check, against the local fake
model server (three tool calls, four requests). Alone, the harness gets the server's URL
directly; under normalize it gets a pinned name reached through normalize's proxy (the
way a real run reaches its API host). Each run starts from a fresh copy of the project.
Reports the median and the spread of the wall-clock time of each, and the difference.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from normalize.testing.servers import FakeModelServer, Reply, ToolUse

REPO = Path(__file__).resolve().parents[1]
LAUNCHER = [sys.executable, str(REPO / "tests" / "sandbox" / "pinned_normalize.py")]
INSTALLED = REPO / ".ci" / "harnesses" / "node_modules" / ".bin"


def script(name: str, ws: Path) -> list[Reply]:
    if name == "codex":
        def shell(cmd: str) -> Reply:
            return Reply("", tools=(ToolUse("exec_command", {"cmd": cmd}),))
        return [shell("cat calc.py"), shell("sed -i 's/a - b/a + b/' calc.py"),
                shell("python3 check.py"), Reply("Fixed.")]
    return [Reply("Reading.", tools=(ToolUse("Read", {"file_path": f"{ws}/calc.py"}),)),
            Reply("Fixing.", tools=(ToolUse("Edit", {"file_path": f"{ws}/calc.py",
                                                      "old_string": "a - b",
                                                      "new_string": "a + b"}),)),
            Reply("Checking.", tools=(ToolUse("Bash", {"command": "python3 check.py"}),)),
            Reply("Fixed.")]


def project(root: Path) -> Path:
    ws = Path(tempfile.mkdtemp(prefix="ws-", dir=root))
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "check.py").write_text("from calc import add\nassert add(2, 3) == 5\n"
                                 "open('report.txt', 'w').write('ok')\n")
    return ws


def alone(name: str, program: str, url: str, home: Path) -> list[str]:
    """The harness's own command line (its home written first), as normalize would run it."""
    if name == "codex":
        (home / "config.toml").write_text(
            'model_provider = "fake"\napproval_policy = "never"\n'
            f'[model_providers.fake]\nname = "fake"\nbase_url = "{url}/v1"\n'
            'env_key = "OPENAI_API_KEY"\nwire_api = "responses"\n')
        return [program, "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "--model", "gpt-5", "fix add"]
    return [program, "-p", "fix add", "--output-format", "stream-json", "--verbose",
            "--permission-mode", "acceptEdits", "--allowedTools", "Bash,Read,Edit",
            "--model", "claude-sonnet-4-5"]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    took = time.perf_counter() - started
    if proc.returncode != 0 or "a + b" not in (cwd / "calc.py").read_text():
        raise SystemExit(f"run failed ({proc.returncode}): {proc.stderr[-800:]}")
    return took


def one(name: str, program: str, root: Path, under: bool) -> float:
    ws = project(root)
    home = Path(tempfile.mkdtemp(prefix="home-", dir=root))
    env = {**os.environ, "CI": "true", "ANTHROPIC_API_KEY": "sk-bench", "OPENAI_API_KEY":
           "sk-bench", "NORMALIZE_HOME": str(root / "nh"),
           f"NORMALIZE_{name.upper()}_BIN": program}
    with FakeModelServer(script(name, ws)) as server:
        port = server.url.rsplit(":", 1)[1]
        if not under:
            env.update(HOME=str(home), CODEX_HOME=str(home), ANTHROPIC_BASE_URL=server.url,
                       CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
            return timed(alone(name, program, server.url, home), ws, env)
        url = f"http://api.harness.test:{port}" + ("/v1" if name == "codex" else "")
        model = "openai:gpt-5" if name == "codex" else "anthropic:claude-sonnet-4-5"
        argv = [*LAUNCHER, f"api.harness.test=127.0.0.1:{port}", "--", "agent", "--harness",
                name, "--model", model, "--base-url", url, "--quiet", "fix add"]
        return timed(argv, ws, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--harness", default="claude", choices=("claude", "codex"))
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    program = shutil.which(args.harness) or str(INSTALLED / args.harness)
    if not Path(program).exists():
        raise SystemExit(f"{args.harness} is not installed (.ci/run installs it)")
    with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
        root = Path(tmp)
        one(args.harness, program, root, under=True)  # warm both paths once
        results = {"alone": [], "under normalize": []}
        for _ in range(args.runs):
            results["alone"].append(one(args.harness, program, root, under=False))
            results["under normalize"].append(one(args.harness, program, root, under=True))
    for label, times in results.items():
        print(f"{args.harness} {label:16} median {statistics.median(times):6.2f} s  "
              f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} runs)")
    extra = statistics.median(results["under normalize"]) - statistics.median(results["alone"])
    print(f"normalize adds {extra:+.2f} s a turn (start-up, sandbox, proxy, journal, checkpoints)")


if __name__ == "__main__":
    main()
