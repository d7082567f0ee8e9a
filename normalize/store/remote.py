"""A store at a URL (fsspec: `s3://`, `gs://`, `memory://`, …) that a batch is published to.

A batch runs against a data home on the machines that run it; its parent
publishes what a watcher needs under the URL, in the data home's own layout
(`batches/BATCH/…`, `tasks/ID.json`, `tasks/ID.jsonl`), each file written
whole. A watcher anywhere pulls those files into a scratch data home and
reads them with the ordinary code (`batch status`, `tasks show`, `collect`).
fsspec and the protocol's package (`s3fs` for `s3://`) are imported only
here, when a URL is used; credentials and endpoints come from the
environment, as the protocol's package reads them (`AWS_*` for S3).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from normalize.errors import StoreError, UsageError


def is_remote(url: str | None) -> bool:
    """Whether `url` names a store other than a local path (`file://` counts as local)."""
    if not url or "://" not in url:
        return False
    return url.partition("://")[0] != "file"


class RemoteStore:
    """Files under one URL, written and read whole."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
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

    def put(self, rel: str, data: bytes) -> None:
        try:
            self.fs.pipe_file(self._path(rel), data)
        except Exception as exc:  # the protocol's own errors: a bucket, a network, a key
            raise StoreError(f"cannot write {self.url}/{rel}: {exc}") from exc

    def put_file(self, rel: str, local: Path) -> None:
        if local.is_file():
            self.put(rel, local.read_bytes())

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
        """Copy the files under `rel` into the data home `home` (same layout); how many."""
        count = 0
        for name in self.listing(rel):
            data = self.get(name)
            if data is None:
                continue
            dest = home / name
            dest.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            dest.write_bytes(data)
            count += 1
        return count
