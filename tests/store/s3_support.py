"""An S3 server on loopback (moto) with one bucket, and an "old store" in front of it: a proxy
that drops the conditional-write headers (`If-None-Match`, `If-Match`) as a store without them
would ignore them."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BUCKET = "records"
CONDITIONS = frozenset({"if-none-match", "if-match"})


def s3_env(endpoint: str) -> dict[str, str]:
    """The environment that reaches the S3 at `endpoint` (as boto3 and s3fs read it)."""
    return {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint,
            "FSSPEC_S3_ENDPOINT_URL": endpoint}


def client(endpoint: str) -> Any:
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing", region_name="us-east-1")


@contextmanager
def moto_s3() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 with the bucket `BUCKET`; its endpoint URL."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint
    finally:
        server.stop()


@contextmanager
def forgetful_proxy(upstream: str) -> Iterator[str]:
    """A loopback proxy to `upstream` that forwards every request without its conditional-write
    headers; its endpoint URL."""
    host, _, port = upstream.removeprefix("http://").partition(":")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in CONDITIONS}
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
            try:
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
            finally:
                conn.close()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        def log_message(self, format: str, *args: Any) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
