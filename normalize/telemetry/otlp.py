"""The OTLP/HTTP export behind `Tracing`: a tracer provider whose failures are kept, not logged.

Spans leave in the background (a batch processor). Each export is bounded
(`EXPORT_TIMEOUT`, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise), and
after the first failure later batches are dropped at once: a collector that
is not there never holds a task up, and `Watch.problem` says so, once.
The exporter reads the standard variables itself (endpoint, headers,
certificates, compression); `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`
name the service (`normalize` otherwise).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

__all__ = ["EXPORT_TIMEOUT", "Watch", "WatchedExporter", "otlp_provider"]

EXPORT_TIMEOUT = 2.0  # seconds one export may take, retries included
TIMEOUTS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
SCHEDULE_MS = 1000  # how often spans leave during a run
SERVICE = "normalize"


class Watch:
    """The first export failure, for the caller to say once."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.failed = False
        self._told = False
        self._lock = threading.Lock()

    def fail(self) -> None:
        self.failed = True

    def problem(self) -> str | None:
        """The failure as one line, the first time it is asked for after a failure."""
        with self._lock:
            if not self.failed or self._told:
                return None
            self._told = True
        return (f"traces: the collector at {self.endpoint} did not take them (unreachable or "
                f"refused); the task went on without them")


class WatchedExporter(SpanExporter):
    """An exporter that stops trying after its first failure and records it in a `Watch`."""

    def __init__(self, inner: SpanExporter, watch: Watch) -> None:
        self.inner = inner
        self.watch = watch

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.watch.failed:
            return SpanExportResult.FAILURE
        try:
            result = self.inner.export(spans)
        except Exception:  # an exporter's bug is a failed export, never the task's
            result = SpanExportResult.FAILURE
        if result is not SpanExportResult.SUCCESS:
            self.watch.fail()
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return self.inner.force_flush(timeout_millis)


def otlp_provider(environ: Mapping[str, str], endpoint: str) -> tuple[TracerProvider, Watch]:
    """A tracer provider exporting over OTLP/HTTP in the background, and its `Watch`."""
    logging.getLogger("opentelemetry").addHandler(logging.NullHandler())  # failures: `Watch`
    logging.getLogger("opentelemetry").propagate = False
    timeout = None if any(environ.get(name, "").strip() for name in TIMEOUTS) else EXPORT_TIMEOUT
    watch = Watch(endpoint)
    exporter = WatchedExporter(OTLPSpanExporter(timeout=timeout), watch)
    named = environ.get("OTEL_SERVICE_NAME") or "service.name=" in environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    _no_threads_in_forked_children()  # before the provider and processor bind their handlers
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE}),
                              shutdown_on_exit=False)  # `Tracing.close` does, at exit
    provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=SCHEDULE_MS))
    return provider, watch


def _no_threads_in_forked_children() -> None:
    """Keep the SDK from starting threads in each child normalize forks.

    At every fork, two of its handlers run in the child: the batch processor's starts a new
    export thread, and the tracer provider's detects the process's resource again on a
    thread pool of its own (started, then joined: a thread for a moment). normalize's forks
    all exec a program (in its sandbox) and never export there, and a child with a second
    thread, even one that is ending, cannot be given a user namespace (`unshare` fails with
    EINVAL): with tracing on, programs were refused their sandbox, always (the processor's)
    or about one time in four (the provider's). Each handler binds its method when its object
    is made, so this runs before either is.
    """
    from opentelemetry.sdk import _shared_internal

    for cls in (getattr(_shared_internal, "BatchProcessor", None), BatchSpanProcessor):
        if cls is not None and "_at_fork_reinit" in vars(cls):
            setattr(cls, "_at_fork_reinit", _stay_unstarted)  # noqa: B010 (a library's private)
    if "_handle_fork" in vars(TracerProvider):
        setattr(TracerProvider, "_handle_fork", _stay_unstarted)  # noqa: B010 (as above)


def _stay_unstarted(self: object) -> None:
    """In a forked child: no thread (the child execs a program)."""
