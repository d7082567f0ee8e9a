"""What the store of record costs: a durable write, and a batch's items, with and without it.

    python bench/objstore.py                 # 200 writes; a batch of 8 items
    python bench/objstore.py --writes 500 --items 16

Writes: the median time of one durable journal append (the intent before a
side effect) in the local journal (a line and an fsync) beside the same
append to a task's fenced journal in a store (`normalize.store.fenced`: one
conditional PUT of the head), on `file://` and on S3 (moto's server on
loopback, so the network's round trip here is a loopback's); and a
checkpoint (the state made once, then the head). Batch: the wall time per
item of `normalize batch` over one-step `clone:` items on the local pool,
4 in flight, without `--store` and with `--store s3://…` (each item's lease,
journal and checkpoints in the store, and the batch published there as
before), in the same run, and their ratio; beside them, what a fresh process
pays to import boto3 and make its S3 client (each item's process pays it once).
Compile first (`python -m compileall -q normalize`): PYTHONDONTWRITEBYTECODE
is set here.
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
from collections.abc import Callable
from pathlib import Path

from normalize.events import Notice
from normalize.store.fenced import FencedJournal, ObjectLease
from normalize.store.journal import JournalWriter
from normalize.store.objects import FileObjects, Objects, S3Objects

BUCKET = "bench"


def _median_ms(count: int, one: Callable[[int], None]) -> float:
    times = []
    for n in range(count):
        start = time.perf_counter()
        one(n)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def _fenced(objects: Objects, task: str) -> FencedJournal:
    lease = ObjectLease(objects, task)
    journal = FencedJournal(objects, task, lease.acquire())
    journal.fence()
    return journal


def writes(count: int, scratch: Path) -> list[tuple[str, float]]:
    line = Notice(message="x" * 200)
    local = JournalWriter(scratch / "local.jsonl")
    rows = [("local journal, durable append (fsync)",
             _median_ms(count, lambda _: local.append(line, durable=True)))]
    local.close()
    record = line.to_json()
    stores: list[tuple[str, Objects]] = [("file://", FileObjects(scratch / "store")),
                                         ("s3:// (moto, loopback)", S3Objects(f"s3://{BUCKET}/w"))]
    state = json.dumps({"turn": 1, "pad": "y" * 2000}).encode()
    for name, objects in stores:
        journal = _fenced(objects, "t")
        append, checkpoint = journal.append, journal.checkpoint
        rows.append((f"{name} fenced append",
                     _median_ms(count, lambda _, a=append: a([record]))))  # type: ignore[misc]
        rows.append((f"{name} checkpoint",
                     _median_ms(count // 4, lambda _, c=checkpoint: c(state))))  # type: ignore[misc]
    return rows


def client_start() -> float:
    """Seconds for a fresh process to import boto3 and make its S3 client (once per item)."""
    code = "import boto3; boto3.session.Session().client('s3')"
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True)
    with_client = time.perf_counter() - start
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return with_client - (time.perf_counter() - start)


def _repos(root: Path, count: int) -> Path:
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@b"]
    rows = []
    for n in range(count):
        repo = root / "repos" / f"r{n:03d}"
        repo.mkdir(parents=True)
        (repo / "f.txt").write_text(f"repo {n}\n")
        for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
            subprocess.run([*git, *args], cwd=repo, check=True, capture_output=True)
        rows.append(json.dumps({"path": f"repos/r{n:03d}"}))
    (root / "items.jsonl").write_text("\n".join(rows) + "\n")
    (root / "wf.toml").write_text('[workflow]\nname = "one"\n[workflow.permissions]\n'
                                  'mode = "yes"\n[[workflow.steps]]\nname = "edit"\n'
                                  'action = "run sh -c \'echo more >> f.txt\'"\n')
    return root / "items.jsonl"


def batch(items: int, scratch: Path, env: dict[str, str]) -> list[tuple[str, float]]:
    root = scratch / "batch"
    root.mkdir()
    listed = _repos(root, items)
    rows = []
    for name, extra in (("batch, data home only", []),
                        ("batch, --store s3:// (moto)", ["--store", f"s3://{BUCKET}/b"])):
        home = scratch / f"home-{len(rows)}"
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "normalize.cli.app", "batch", "wf.toml", "--items",
             str(listed), "--item-workspace", f"clone:{root}/{{item.path}}", "-q", *extra],
            cwd=root, env={**env, "NORMALIZE_HOME": str(home)}, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"{name}: exit {done.returncode}: {done.stderr.strip()[:300]}")
        rows.append((f"{name}, wall per item (s)", (time.perf_counter() - start) / items))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--items", type=int, default=8)
    args = parser.parse_args()
    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {**os.environ, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
               "FSSPEC_S3_ENDPOINT_URL": endpoint}
        os.environ.update(env)
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        with tempfile.TemporaryDirectory(prefix="bench-objstore-") as tmp:
            rows = writes(args.writes, Path(tmp))
            base = rows[0][1]
            print(f"{'durable write (median of ' + str(args.writes) + ')':<46} {'ms':>8} {'×':>7}")
            for name, ms in rows:
                print(f"{name:<46} {ms:>8.2f} {ms / base:>7.1f}")
            found = batch(args.items, Path(tmp), env)
            print(f"\n{'batch of ' + str(args.items) + ' one-step clone items':<46} "
                  f"{'s':>8} {'×':>7}")
            for name, value in found:
                print(f"{name:<46} {value:>8.3f} {value / found[0][1]:>7.2f}")
            print(f"{'beside: a process importing boto3 + S3 client (s)':<46} "
                  f"{client_start():>8.3f}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
