"""A batch published to `s3://` (moto's S3 server on 127.0.0.1), watched from another data home:
`batch status`, `tasks show BATCH/ITEM`, `diff BATCH/ITEM`, `report BATCH/ITEM` and `batch collect`
with --store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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
