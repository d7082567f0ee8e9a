"""A store at a URL (fsspec: `s3://`, `gs://`, `memory://`, …) that a batch is published to.

A batch runs against a data home on the machines that run it; its parent
publishes what a watcher needs under the URL, in the data home's own layout
(`batches/BATCH/…`, `tasks/ID.json`, `tasks/ID.jsonl`), each file written
whole. A watcher anywhere pulls those files into a scratch data home and
reads them with the ordinary code (`batch status`, `tasks show`, `collect`).
fsspec and the protocol's package (`s3fs` for `s3://`) are imported only
here, when a URL is used; credentials and endpoints come from the
environment, as the protocol's package reads them (`AWS_*` for S3).

Both ways are doors. Out: every upload goes through `normalize.artefacts`,
which redacts it (the exact task data stays in the owner-only data home).
In: whatever the URL lists is untrusted; a key is pulled only when it fits
the layout (`layout_key`: known names, plain components, no `..`, no
absolute path) and is written beneath the scratch home by the race-free
writer (`normalize.fsopen`: no link followed), and an id read from a file
there is checked (`checked_id`) before it names a path.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from normalize import artefacts, fsopen
from normalize.errors import StoreError, UsageError
from normalize.redact import Redactor

ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
"""A task or batch id as the store spells it in a key: no dot, no slash."""
_ID = ID.pattern
LAYOUT = re.compile(
    rf"batches/{_ID}/(?:manifest\.json|items/[0-9]{{5,}}\.json|diffs/{_ID}\.diff)"
    rf"|tasks/{_ID}\.(?:json|ckpt|jsonl)")
"""The keys a batch publishes (`Publisher`), and so the only ones a pull writes."""


def checked_id(value: str, where: str) -> str:
    """`value` when it is an id (`ID`); a `StoreError` naming `where` otherwise."""
    if ID.fullmatch(value) is None:
        raise StoreError(f"{where}: {value[:80]!r} is not an id; the store's content is "
                         "not a batch's (refused)")
    return value


def layout_key(rel: str, where: str) -> str:
    """`rel` when it is a key of the layout (`LAYOUT`); a `StoreError` otherwise."""
    if LAYOUT.fullmatch(rel) is None:
        raise StoreError(f"{where}: the key {rel[:120]!r} is not one a batch publishes "
                         "(a `..`, an absolute path or an unknown name): refused")
    return rel


def is_remote(url: str | None) -> bool:
    """Whether `url` names a store other than a local path (`file://` counts as local)."""
    if not url or "://" not in url:
        return False
    return url.partition("://")[0] != "file"


class RemoteStore:
    """Files under one URL, written and read whole."""

    def __init__(self, url: str, redactor: Redactor | None = None) -> None:
        self.url = url.rstrip("/")
        self.redactor = redactor  # what uploads are redacted with (the default's shapes)
        try:
            import fsspec
        except ImportError:
            raise UsageError(f"--store {url}: needs fsspec (pip install 'normalize[remote]')"
                             ) from None
        try:
            self.fs: Any
            self.fs, self.root = fsspec.core.url_to_fs(self.url)
        except (ImportError, ValueError) as exc:
            raise UsageError(f"--store {url}: {exc}") from None

    def _path(self, rel: str) -> str:
        return f"{self.root.rstrip('/')}/{rel}"

    def put(self, rel: str, data: bytes, redactor: Redactor | None = None) -> None:
        """Upload `data` as `rel`, redacted (by `redactor`, else the store's)."""
        try:
            artefacts.upload(self.fs, self._path(rel), rel, data, redactor or self.redactor)
        except Exception as exc:  # the protocol's own errors: a bucket, a network, a key
            raise StoreError(f"cannot write {self.url}/{rel}: {exc}") from exc

    def get(self, rel: str) -> bytes | None:
        try:
            data: bytes = self.fs.cat_file(self._path(rel))
        except FileNotFoundError:
            return None
        except Exception as exc:
            raise StoreError(f"cannot read {self.url}/{rel}: {exc}") from exc
        return data

    def listing(self, rel: str) -> list[str]:
        """The files under `rel` (relative to the store's root)."""
        base = self._path(rel)
        try:
            found = self.fs.find(base)
        except FileNotFoundError:
            return []
        except Exception as exc:
            raise StoreError(f"cannot list {self.url}/{rel}: {exc}") from exc
        root = self.root.rstrip("/") + "/"
        return [str(name)[len(root):] if str(name).startswith(root) else str(name)
                for name in found]

    def pull(self, rel: str, home: Path) -> int:
        """Copy the files under `rel` into the data home `home` (same layout); how many.

        Every key is checked against the layout before anything is read, so a
        bucket holding one planted key is refused whole.
        """
        names = [layout_key(name, self.url) for name in self.listing(rel)
                 if not name.endswith("/")]  # (a folder marker some consoles make: no file)
        count = 0
        for name in names:
            if self.fetch(name, home):
                count += 1
        return count

    def fetch(self, rel: str, home: Path) -> bool:
        """Copy the key `rel` (of the layout) to `home / rel`, owner-only; whether it existed."""
        data = self.get(layout_key(rel, self.url))
        if data is None:
            return False
        try:
            fsopen.place(home, rel, data, mode=0o600, replace_link=False)
        except OSError as exc:
            raise StoreError(f"cannot copy {self.url}/{rel} into {home}: {exc}") from None
        return True
