"""Memory retrieval: SQLite FTS5 with BM25 against a naive scan, per query and per run.

    python bench/memory.py                  # 100, 1,000 and 10,000 accepted entries
    python bench/memory.py --entries 50000

Each size fills a fresh store (in a temporary data home) with generated
one-line entries, then times 200 queries of 3–6 words: `search` (FTS5 MATCH
ordered by bm25, top 3) and a naive scan (every accepted entry read, scored
by how many query words it holds). It also times what one model request
pays (as `RunMemory.recall` does it: open the store, search, hash the files
the hits name, close). Numbers are medians in milliseconds on this machine.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from normalize.memory import MemoryEntry, guard_message, recall
from normalize.memory.sqlite import SqliteMemory

WORDS = ("tests build lint release docs fixtures database migration cache api client server "
         "config deploy script make check pytest ruff mypy docker compose schema parser token "
         "logging retry timeout queue worker cron backup index search render template theme "
         "locale timezone utc encoding unicode path windows linux macos ci pipeline").split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


def naive(store: SqliteMemory, query: str, k: int) -> list[MemoryEntry]:
    words = set(query.lower().split())
    scored = [(len(words & set(e.text.lower().split())), e) for e in store.entries("accepted")]
    return [e for score, e in sorted(scored, key=lambda p: -p[0]) if score][:k]


def timed(fn: object, queries: list[str]) -> float:
    times = []
    for query in queries:
        start = time.perf_counter()
        fn(query)  # type: ignore[operator]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def measure(size: int, rng: random.Random) -> tuple[float, float, float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        home, workspace = Path(tmp) / "home", Path(tmp)
        store = SqliteMemory.open(home, "bench")
        start = time.perf_counter()
        for _ in range(size):
            store.add(MemoryEntry(text=sentence(rng), state="accepted"))
        fill = (time.perf_counter() - start) * 1000 / size
        queries = [" ".join(rng.sample(WORDS, rng.randint(3, 6))) for _ in range(200)]
        fts = timed(lambda q: store.search(q, 3), queries)
        scan = timed(lambda q: naive(store, q, 3), queries[:50])
        store.close()
        recall = timed(lambda q: _recall(home, workspace, q), queries[:50])
        return fill, fts, scan, recall


def _recall(home: Path, workspace: Path, query: str) -> str:
    """What one model request pays: open the store, search, check staleness, close."""
    store = SqliteMemory.open(home, "bench")
    try:
        return guard_message(recall(store, query, workspace, 3))
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="*", default=[100, 1_000, 10_000])
    args = parser.parse_args()
    rng = random.Random(38)
    print("| entries | add (ms/entry) | FTS5 bm25 top-3 (ms) | naive scan (ms) | recall per "
          "request (ms) |")
    print("|---:|---:|---:|---:|---:|")
    for size in args.entries:
        fill, fts, scan, recall = measure(size, rng)
        print(f"| {size:,} | {fill:.3f} | {fts:.2f} | {scan:.2f} | {recall:.2f} |")


if __name__ == "__main__":
    main()
