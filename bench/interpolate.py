"""How a workflow step's command costs with a long item field: linear in the field's length?

    python bench/interpolate.py               # 100 KB and 1 MB, best of 5
    python bench/interpolate.py --sizes 100000 400000 1000000

A step `run printf %s {item.blob}` goes, before any program starts, through
what the engine does with it: the value bound as one argument
(`bind_command` with the command parser), the text split again as the
approval policy and the `run` tool read it (`command_parts`,
`unquoted_operators`), and the action redacted and made inert as its events
show it. The field is code-like words. Each size's time is printed with its
ratio to the smallest size's time scaled linearly ("× linear": 1.0 is
exactly linear; the issue's bound is 1.5).
"""

from __future__ import annotations

import argparse
import random
import time

from normalize.intents import parse_command
from normalize.redact import Redactor, inert
from normalize.tools.shell import command_parts, text_after_verb, unquoted_operators
from normalize.workflow.argv import bind_command

WORDS = ["def", "return", "x", "value=1", "path/to/file.py", "12:30", "token", "a;b", "'q'"]


def blob(size: int, seed: int = 37) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    total = 0
    while total < size:
        word = rng.choice(WORDS)
        out.append(word)
        total += len(word) + 1
    return " ".join(out)[:size]


def once(value: str) -> float:
    start = time.perf_counter()
    action = bind_command("run printf %s {item.blob}", {"item": {"blob": value}}, parse_command)
    command_parts(action)
    rest = text_after_verb(action)
    if rest is not None:
        unquoted_operators(rest)
    shown = Redactor().redact_obj({"text": action.text, "args": action.args})
    inert(shown["text"])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base: tuple[int, float] | None = None
    for size in args.sizes:
        value = blob(size)
        best = min(once(value) for _ in range(args.repeat))
        base = base or (size, best)
        ratio = (best / base[1]) / (size / base[0])
        print(f"{size / 1000:>8.0f} KB  {best * 1000:8.1f} ms  {ratio:4.2f}× linear")


if __name__ == "__main__":
    main()
