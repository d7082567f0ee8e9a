"""OpenTelemetry traces of a task's runs (issue 28), loaded only when tracing is on.

`tracing_wanted` says whether to trace: `--otel`, or an OTLP endpoint in the
environment (`OTEL_EXPORTER_OTLP_ENDPOINT`, `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
`start_tracing` then loads the SDK (the `otel` extra) and returns a `Tracing`
(`spans.py`): one more subscriber of the run's events, so the engine never
knows it is traced. Nothing here imports OpenTelemetry until it is called:
`normalize --help` and a run without tracing load none of it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from normalize.errors import UsageError
from normalize.events import BaseEvent

__all__ = ["INSTALL_HINT", "RunTracing", "sdk_disabled", "start_tracing", "traces_endpoint",
           "tracing_wanted"]

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
DEFAULT_ENDPOINT = "http://localhost:4318"
INSTALL_HINT = "pip install 'normalize[otel]'"


class RunTracing(Protocol):
    """What a run needs of its tracing: the events, and the context a sub-task inherits."""

    def __call__(self, event: BaseEvent) -> None: ...

    def child_env(self, child_id: str) -> dict[str, str]:
        """Environment variables that make the sub-task's run a child of this run's spans."""
        ...

    def problem(self) -> str | None:
        """Why spans did not reach the collector (once), or None."""
        ...


def sdk_disabled(environ: Mapping[str, str]) -> bool:
    """`OTEL_SDK_DISABLED=true`: the standard switch that turns OpenTelemetry off (the SDK
    itself then makes no spans, whoever asked for them)."""
    return environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true"


def tracing_wanted(flag: bool, environ: Mapping[str, str]) -> bool:
    """`--otel`, or an OTLP endpoint set; never under `OTEL_SDK_DISABLED=true`."""
    if sdk_disabled(environ):
        return False
    return flag or any(environ.get(name, "").strip() for name in ENDPOINTS)


def traces_endpoint(environ: Mapping[str, str]) -> str:
    """Where spans go, as the OTLP/HTTP exporter reads the standard variables."""
    exact = environ.get(ENDPOINTS[0], "").strip()
    if exact:
        return exact
    base = environ.get(ENDPOINTS[1], "").strip() or DEFAULT_ENDPOINT
    return f"{base.rstrip('/')}/v1/traces"


def start_tracing(environ: Mapping[str, str], *,
                  redact: Callable[[str], str] | None = None) -> RunTracing:
    """A `Tracing` exporting over OTLP/HTTP; a `UsageError` naming the extra when it is absent."""
    try:
        from normalize.telemetry.otlp import otlp_provider
        from normalize.telemetry.spans import Tracing
    except ImportError as exc:
        raise UsageError(f"tracing needs OpenTelemetry, and {exc.name} is not installed",
                         hint=INSTALL_HINT) from None
    import atexit

    provider, watch = otlp_provider(environ, traces_endpoint(environ))
    tracing = Tracing(provider, parent=environ.get("TRACEPARENT"), redact=redact, watch=watch)
    atexit.register(tracing.close)  # spans still open end, in error, and leave
    return tracing
