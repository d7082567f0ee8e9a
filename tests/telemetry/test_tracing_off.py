"""Tracing off or absent: when it is on, what loads, and a run where OpenTelemetry is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from normalize.telemetry import traces_endpoint, tracing_wanted


@pytest.mark.parametrize(("environ", "flag", "wanted"), [
    ({}, False, False), ({}, True, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c/t"}, False, True),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"}, False, False),
    ({"OTEL_SDK_DISABLED": " TRUE "}, True, False),
])
def test_tracing_is_on_when_asked_or_an_endpoint_is_set(environ: dict[str, str], flag: bool,
                                                         wanted: bool) -> None:
    assert tracing_wanted(flag, environ) is wanted


def test_the_endpoint_follows_the_standard_variables() -> None:
    assert traces_endpoint({}) == "http://localhost:4318/v1/traces"
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1/"}) == "http://c:1/v1/traces"
    assert traces_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:1",
                            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://d/x"}) == "http://d/x"


# Runs normalize's main with OpenTelemetry made unimportable (as where the extra is not installed).
ABSENT = """
import sys, importlib.abc
class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
if sys.argv[1] == "absent":
    sys.meta_path.insert(0, Absent())
from normalize.cli.app import main
code = main(sys.argv[2:])
print("loaded" if "opentelemetry" in sys.modules else "not loaded", file=sys.stderr)
sys.exit(code)
"""


def run_main(tmp_path: Path, mode: str, *args: str,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(["done nothing to do"]))
    argv = [sys.executable, "-c", ABSENT, mode, "agent", "nothing", "--model",
            f"scripted:{script}", "-q", "-w", str(ws), *args]
    return subprocess.run(argv, cwd=tmp_path, env={**os.environ, "CI": "true", **(env or {})},
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_run_without_tracing_loads_no_opentelemetry(tmp_path: Path) -> None:
    done = run_main(tmp_path, "present")
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1] == "not loaded"


def test_otel_without_the_packages_is_refused_in_one_line(tmp_path: Path) -> None:
    done = run_main(tmp_path, "absent", "--otel")
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[:2] == [
        "normalize: error: tracing needs OpenTelemetry, and opentelemetry is not installed",
        "  hint: pip install 'normalize[otel]'"]


def test_an_endpoint_without_the_packages_is_said_and_the_task_runs(tmp_path: Path) -> None:
    done = run_main(tmp_path, "absent", env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "normalize: warning: OTEL_EXPORTER_OTLP_ENDPOINT is set, but tracing needs "
        "OpenTelemetry, and opentelemetry is not installed; no traces (pip install "
        "'normalize[otel]')")


def test_a_tracing_backends_key_never_reaches_a_program_and_is_redacted() -> None:
    from normalize.redact import Redactor
    from normalize.sandbox import scrub_env

    env = {"OTEL_EXPORTER_OTLP_HEADERS": "x-honeycomb-team=hc4k3y9876543",
           "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Basic dXNlcjpwYXNz",
           "OTEL_SERVICE_NAME": "mine", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    assert scrub_env(env) == {"OTEL_SERVICE_NAME": "mine",
                              "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}
    redactor = Redactor.for_workspace(".", env, walk=False)
    assert "hc4k3y9876543" not in redactor.redact("headers: x-honeycomb-team=hc4k3y9876543")
