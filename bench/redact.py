"""How long redaction takes, in ms per MB (and MB/s) of output, for the kinds of text tools print.

    python bench/redact.py              # 1 MB of each kind, best of 5
    python bench/redact.py --mb 4 --values 20

Kinds: a test runner's log, source code, a log with a secret-looking word on
every line (the worst case: every line meets the regex), and streamed (the
same log fed through the delta redaction in 40-character pieces). `--values`
is how many collected values (from `.env*` files and the environment) the
redactor knows; each costs one more scan of the text.
"""

from __future__ import annotations

import argparse
import time

from normalize.redact import Redactor

LINES = {
    "test log": "collected 120 items / tests/test_calc.py::test_mean PASSED  [ 42%]\n",
    "source code": "    def load(self, task_id: str, *, with_config: bool = True) -> Task:\n",
    "secret words": "INFO auth: token refreshed for user 42, password policy ok\n",
}


def _text(line: str, size: int) -> str:
    return (line * (size // len(line) + 1))[:size]


def _best(fn: object, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()  # type: ignore[operator]
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--values", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    size = int(args.mb * 1024 * 1024)
    values = [f"collected-value-{i:03d}-x9" for i in range(args.values)]
    for kind, line in LINES.items():
        text = _text(line, size)

        def once(text: str = text) -> None:
            Redactor(values).redact(text)  # a fresh redactor: no memo

        ms = _best(once, args.repeat) * 1000 / args.mb
        print(f"{kind:<14} {ms:8.1f} ms/MB  {1000 / ms:6.1f} MB/s")
    text = _text(LINES["test log"], size)

    def streamed() -> None:
        stream = Redactor(values).stream()
        for start in range(0, len(text), 40):
            stream.feed("text_delta", text[start:start + 40])
        stream.flush()

    ms = _best(streamed, max(1, args.repeat // 2)) * 1000 / args.mb
    print(f"{'streamed':<14} {ms:8.1f} ms/MB  {1000 / ms:6.1f} MB/s  (40-character deltas)")


if __name__ == "__main__":
    main()
