"""Options declared alike by commands in more than one module (`app.py`, `batch.py`)."""

# No `from __future__ import annotations`: typer reads the annotations at start-up.

from typing import Annotated

import typer

OtelOpt = Annotated[bool, typer.Option(
    "--otel", help="Export OpenTelemetry traces (to OTEL_EXPORTER_OTLP_ENDPOINT, else "
    "localhost:4318); on by itself when that variable is set.")]
