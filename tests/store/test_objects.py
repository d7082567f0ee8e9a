"""The conditional-write store, on both backends: `file://` and `s3://` (moto's S3 server on
loopback), the same answers from each; a store that ignores the conditions is refused by `probe`."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3_support import BUCKET, forgetful_proxy, moto_s3, s3_env

from normalize.errors import StoreError, UsageError
from normalize.store.objects import FileObjects, Objects, S3Objects, open_objects, probe

pytest.importorskip("moto.server", reason="moto is not installed (.ci/run installs it)")


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with moto_s3() as url:
        yield url


@pytest.fixture
def aws(endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    for key, value in s3_env(endpoint).items():
        monkeypatch.setenv(key, value)
    return endpoint


@pytest.fixture(params=["file", "s3"])
def objects(request: pytest.FixtureRequest, tmp_path: Path) -> Objects:
    if request.param == "file":
        return open_objects(f"file://{tmp_path}/store")
    request.getfixturevalue("aws")
    return open_objects(f"s3://{BUCKET}/{tmp_path.name}")


def test_a_create_is_made_once_and_a_replace_only_from_the_etag_it_read(
        objects: Objects) -> None:
    first = objects.put_if_absent("tasks/t1/lease", b"one")
    assert first is not None
    assert objects.put_if_absent("tasks/t1/lease", b"two") is None  # it exists: refused
    assert objects.get("tasks/t1/lease") == (b"one", first)
    second = objects.put_if_match("tasks/t1/lease", b"two", first)
    assert second is not None and second != first
    assert objects.put_if_match("tasks/t1/lease", b"three", first) is None  # stale etag
    assert objects.put_if_match("tasks/t1/none", b"x", first) is None  # nothing to match
    assert objects.get("tasks/t1/lease") == (b"two", second)
    assert objects.get("tasks/t1/missing") is None
    objects.put_if_absent("tasks/t2/head", b"h")
    assert objects.list("tasks/t1/") == ["tasks/t1/lease"]
    assert objects.list("tasks/") == ["tasks/t1/lease", "tasks/t2/head"]
    objects.delete("tasks/t2/head")
    assert objects.get("tasks/t2/head") is None


def test_of_many_racing_creators_exactly_one_wins(objects: Objects) -> None:
    won: list[int] = []
    gate = threading.Barrier(8)

    def create(n: int) -> None:
        gate.wait()
        if objects.put_if_absent("race/lease", str(n).encode()) is not None:
            won.append(n)

    threads = [threading.Thread(target=create, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1
    got = objects.get("race/lease")
    assert got is not None and got[0] == str(won[0]).encode()


def test_of_racing_replacers_from_one_etag_exactly_one_wins(objects: Objects) -> None:
    etag = objects.put_if_absent("race/head", b"0")
    assert etag is not None
    won: list[int] = []
    gate = threading.Barrier(6)

    def replace(n: int) -> None:
        gate.wait()
        if objects.put_if_match("race/head", f"from {n}".encode(), etag) is not None:
            won.append(n)

    threads = [threading.Thread(target=replace, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(won) == 1


def test_a_key_that_leaves_the_store_is_refused(objects: Objects) -> None:
    for bad in ("../x", "/abs", "a/../b", ".hidden", "a//b", ""):
        with pytest.raises(StoreError, match="is not a key of the store"):
            objects.put_if_absent(bad, b"x")


def test_a_store_that_honours_the_conditions_passes_the_probe(objects: Objects) -> None:
    probe(objects)
    assert objects.list("probe/") == []  # the probe leaves nothing behind


def test_a_store_that_drops_if_none_match_is_refused_in_one_line(aws: str) -> None:
    with forgetful_proxy(aws) as old:
        os.environ["AWS_ENDPOINT_URL"] = old
        objects = S3Objects(f"s3://{BUCKET}/old")
        with pytest.raises(UsageError) as refused:
            probe(objects)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"--store s3://{BUCKET}/old: the store does not honour "
                              "conditional writes: If-None-Match: *")
    assert refused.value.exit_status == 2


def test_a_file_store_keeps_its_objects_owner_only(tmp_path: Path) -> None:
    objects = FileObjects(tmp_path / "store")
    objects.put_if_absent("tasks/t/head", b"h")
    assert (tmp_path / "store" / "tasks" / "t" / "head").stat().st_mode & 0o077 == 0
    assert (tmp_path / "store" / "tasks").stat().st_mode & 0o077 == 0


def test_a_scheme_without_conditional_writes_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"--store gs://b/p: a store of record needs "
                                         r"conditional writes"):
        open_objects("gs://b/p")
