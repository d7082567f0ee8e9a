"""Object storage with conditional writes: the store of record at a URL (`s3://`, `file://`).

Four calls, the same on every backend:

    put_if_absent(key, data) -> etag | None    made only if no object has the key
    put_if_match(key, data, etag) -> etag | None  replaced only if unchanged since `etag`
    get(key) -> (data, etag) | None
    list(prefix) -> [key, ...]

A refused condition is `None`, not an error: losing a race is an answer.
Leases and the fenced journal (`normalize.store.fenced`) are built on these two
conditions alone, so a store that ignores them would lose the fencing without
a word; `probe` refuses such a store before anything is written to it.

`s3://BUCKET/PREFIX` speaks S3 through boto3 (`If-None-Match: *` and
`If-Match: ETAG` on PutObject, 412 when the condition fails). boto3 rather
than s3fs: its client is synchronous, takes the two headers as parameters and
says which precondition failed; s3fs runs aiobotocore on its own event-loop
thread and its create mode differs between versions. Credentials, region and
endpoint come from the environment as boto3 reads them (`AWS_*`,
`AWS_ENDPOINT_URL`); none is held here, passed to a program or written out.

`file://PATH` (tests, and a shared disk) has the same semantics: a create is
a hard link of a finished temporary file (fails if the name exists), a
replace compares the content's digest under an flock on a lock file beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from normalize.errors import StoreError, UsageError
from normalize.fsutil import fsync_directory, private_dirs

KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*(?:/[A-Za-z0-9_][A-Za-z0-9_.-]*)*")
"""A key the store writes: plain components, none starting with a dot (no `..`, no `/x`)."""

CONFLICT_TRIES = 6  # S3 answers 409 to a create racing another: try again (then 412 or made)


def checked_key(key: str) -> str:
    if KEY.fullmatch(key) is None or ".." in key.split("/"):
        raise StoreError(f"{key[:120]!r} is not a key of the store (refused)")
    return key


def etag_of(data: bytes) -> str:
    """The content's MD5 in quotes, as S3 names a single-part object."""
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


class Objects(Protocol):
    """A place of objects with conditional writes (see the module doc)."""

    url: str

    def put_if_absent(self, key: str, data: bytes) -> str | None: ...

    def put_if_match(self, key: str, data: bytes, etag: str) -> str | None: ...

    def get(self, key: str) -> tuple[bytes, str] | None: ...

    def list(self, prefix: str) -> list[str]: ...

    def delete(self, key: str) -> None: ...


class FileObjects:
    """Objects as files under a directory (owner-only), with the conditions of S3."""

    def __init__(self, root: Path, url: str = "") -> None:
        self.root = root
        self.url = url or f"file://{root}"

    def _path(self, key: str) -> Path:
        return self.root / checked_key(key)

    def _staged(self, path: Path, data: bytes) -> Path:
        private_dirs(path.parent)
        tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:12]}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        return tmp

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        path = self._path(key)
        try:
            tmp = self._staged(path, data)
            try:
                os.link(tmp, path)  # made whole, or not at all when the name exists
            except FileExistsError:
                return None
            finally:
                os.unlink(tmp)
            fsync_directory(path.parent)
        except OSError as exc:
            raise StoreError(f"cannot write {self.url}/{key}: {exc.strerror or exc}") from exc
        return etag_of(data)

    @contextlib.contextmanager
    def _locked(self, path: Path) -> Iterator[None]:
        private_dirs(path.parent)
        fd = os.open(path.parent / f".{path.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def put_if_match(self, key: str, data: bytes, etag: str) -> str | None:
        path = self._path(key)
        try:
            with self._locked(path):
                try:
                    current = path.read_bytes()
                except FileNotFoundError:
                    return None
                if etag_of(current) != etag:
                    return None
                os.replace(self._staged(path, data), path)
                fsync_directory(path.parent)
        except OSError as exc:
            raise StoreError(f"cannot write {self.url}/{key}: {exc.strerror or exc}") from exc
        return etag_of(data)

    def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            data = self._path(key).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreError(f"cannot read {self.url}/{key}: {exc.strerror or exc}") from exc
        return data, etag_of(data)

    def list(self, prefix: str) -> list[str]:
        base = self.root / prefix.rstrip("/") if prefix else self.root
        found = []
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            rel = Path(dirpath).relative_to(self.root)
            found += [str(rel / name) if str(rel) != "." else name
                      for name in filenames if not name.startswith(".")]
        return sorted(found)

    def delete(self, key: str) -> None:
        path = self._path(key)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


class S3Objects:
    """Objects under `s3://BUCKET/PREFIX`, through boto3 (see the module doc)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        bucket, _, prefix = self.url.removeprefix("s3://").partition("/")
        if not bucket:
            raise UsageError(f"--store {url}: names no bucket (s3://BUCKET/PREFIX)")
        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        try:
            import boto3
        except ImportError:
            raise UsageError(f"--store {url}: needs boto3 (pip install 'normalize[s3]')"
                             ) from None
        self.client: Any = boto3.session.Session().client("s3")

    def _fail(self, key: str, exc: Exception) -> StoreError:
        return StoreError(f"cannot reach {self.url}/{key}: {_reason(exc)}")

    def _put(self, key: str, data: bytes, **condition: str) -> str | None:
        name = self.prefix + checked_key(key)
        for attempt in range(CONFLICT_TRIES):
            try:
                made = self.client.put_object(Bucket=self.bucket, Key=name, Body=data,
                                              **condition)
            except Exception as exc:
                status = _status(exc)
                if status == 412 or (status == 404 and "IfMatch" in condition):
                    return None  # the condition failed (If-Match on a missing object: 404)
                if status == 409 and attempt + 1 < CONFLICT_TRIES:
                    time.sleep(0.05 * (attempt + 1))  # a concurrent conditional write
                    continue
                raise self._fail(key, exc) from None
            return str(made["ETag"])
        return None  # (not reached: the last 409 raises)

    def put_if_absent(self, key: str, data: bytes) -> str | None:
        return self._put(key, data, IfNoneMatch="*")

    def put_if_match(self, key: str, data: bytes, etag: str) -> str | None:
        return self._put(key, data, IfMatch=etag)

    def get(self, key: str) -> tuple[bytes, str] | None:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self.prefix + checked_key(key))
            return got["Body"].read(), str(got["ETag"])
        except Exception as exc:
            if _status(exc) == 404:
                return None
            raise self._fail(key, exc) from None

    def list(self, prefix: str) -> list[str]:
        found: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=self.prefix + prefix)
            for page in pages:
                found += [str(o["Key"])[len(self.prefix):] for o in page.get("Contents", [])]
        except Exception as exc:
            raise self._fail(prefix, exc) from None
        return sorted(found)

    def delete(self, key: str) -> None:
        try:
            self.client.delete_object(Bucket=self.bucket, Key=self.prefix + checked_key(key))
        except Exception as exc:
            raise self._fail(key, exc) from None


def _status(exc: Exception) -> int | None:
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return int(status) if isinstance(status, int) else None
    return None


def _reason(exc: Exception) -> str:
    """The store's own words for a failure (botocore's errors name the call, never a key)."""
    return " ".join(str(exc).split())[:300] or type(exc).__name__


SCHEMES = ("s3", "file")


def records(url: str) -> bool:
    """Whether a batch's items keep their record (leases, fenced journals) at `url`: a URL
    whose scheme normalize speaks conditional writes for; elsewhere (`gs://`, …) the batch is
    only published there, its record staying in the (shared) data home."""
    return url.partition("://")[0] in SCHEMES and "://" in url


def open_objects(url: str) -> Objects:
    """The objects under `url`; a scheme without conditional writes here is a `UsageError`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return FileObjects(Path(url).expanduser().resolve())
    if scheme == "file":
        return FileObjects(Path(rest).expanduser().resolve(), url.rstrip("/"))
    if scheme == "s3":
        return S3Objects(url)
    raise UsageError(f"--store {url}: a store of record needs conditional writes, which "
                     f"normalize speaks for {', '.join(s + '://' for s in SCHEMES)} only")


def probe(objects: Objects) -> None:
    """Refuse a store that does not honour both conditions (`UsageError`, one line).

    A create with `If-None-Match: *` is tried twice on a fresh key (the second
    must be refused), and a replace with an `If-Match` that cannot match.
    """
    key = f"probe/{uuid.uuid4().hex}"
    missing = ""
    try:
        if objects.put_if_absent(key, b"first") is None:
            missing = "If-None-Match (a create of a new key was refused)"
        elif objects.put_if_absent(key, b"second") is not None:
            missing = ("If-None-Match: * (a second create of one key succeeded; it must fail "
                       "with 412 Precondition Failed)")
        elif objects.put_if_match(key, b"third", '"' + "0" * 32 + '"') is not None:
            missing = ("If-Match (a replace with a wrong ETag succeeded; it must fail with "
                       "412 Precondition Failed)")
    finally:
        with contextlib.suppress(StoreError):
            objects.delete(key)
    if missing:
        raise UsageError(f"--store {objects.url}: the store does not honour conditional "
                         f"writes: {missing}; refused, as its leases could not fence a stale "
                         "writer (use S3, or a MinIO/GCS/Azure that supports them)")
