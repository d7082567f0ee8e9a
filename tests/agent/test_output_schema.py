"""`--output-schema`: the model is told the schema; its result is validated, retried, kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_helpers import KEYS, cli, json_lines

from normalize.testing.servers import FakeModelServer

SCHEMA = {"type": "object", "required": ["count"],
          "properties": {"count": {"type": "integer"}}}
INVALID = 'done Counted the functions <<EOF\n{"count": "two"}\nEOF'
VALID = 'done Counted the functions <<EOF\n{"count": 2}\nEOF'


def _agent(repo: Path, tmp_path: Path, server: FakeModelServer) -> tuple[Path, list[str]]:
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    home = tmp_path / "home"
    return home, ["agent", "count the functions in calc.py", "--output-schema", str(schema),
                  "--json", "--model", "anthropic:claude-sonnet-4-5"]


def test_invalid_then_valid_result_is_retried_once_and_kept(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    server.add(INVALID, VALID)
    home, args = _agent(repo, tmp_path, server)
    done = cli(*args, cwd=repo, home=home, env={"ANTHROPIC_BASE_URL": server.url, **KEYS})

    assert done.returncode == 0, done.stderr
    ended = json_lines(done.stdout)[-1]
    assert ended["type"] == "run_ended" and ended["result"] == {"count": 2}
    assert ended["summary"] == "Counted the functions"
    assert len(server.requests) == 2  # one retry
    assert '"count"' in server.requests[0].body["system"][0]["text"]  # told the schema
    retry = server.requests[1].last_message
    assert "not accepted" in retry and "'two' is not of type 'integer'" in retry
    shown = cli("tasks", "show", ended["task_id"], "--json", cwd=repo, home=home)
    assert json.loads(shown.stdout)["task"]["result"] == {"count": 2}
    report = cli("report", ended["task_id"], "-o", "-", cwd=repo, home=home)
    assert "<h3>Result</h3>" in report.stdout and "&quot;count&quot;: 2" in report.stdout


def test_a_model_that_never_complies_fails_with_the_validators_message(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    server.add(INVALID, INVALID, "done no JSON at all")
    home, args = _agent(repo, tmp_path, server)
    done = cli(*args, cwd=repo, home=home, env={"ANTHROPIC_BASE_URL": server.url, **KEYS})

    assert done.returncode == 1, done.stderr
    ended = json_lines(done.stdout)[-1]
    assert ended["status"] == "failed" and ended["result"] is None
    assert "no JSON result after `done`" in ended["summary"]
    assert len(server.requests) == 3  # the first try and two retries


def test_a_bad_schema_file_is_one_line(repo: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    for text, expected in (("{nope", "not JSON"), ('{"type": 12}', "not a valid JSON Schema")):
        bad.write_text(text)
        done = cli("agent", "x", "--output-schema", str(bad), cwd=repo, home=tmp_path / "h",
                   env=KEYS)
        assert done.returncode == 2 and f"--output-schema {bad}: {expected}" in done.stderr
        assert len(done.stderr.splitlines()) == 1


def test_a_workflows_output_schema_beside_it(repo: Path, server: FakeModelServer,
                                             tmp_path: Path) -> None:
    flows = tmp_path / "flows"
    flows.mkdir()
    (flows / "schema.json").write_text(json.dumps(SCHEMA))
    flow = flows / "count.toml"
    flow.write_text('[workflow]\nname = "count"\noutput_schema = "schema.json"\n'
                    '[workflow.llm]\nmodel = "anthropic:claude-sonnet-4-5"\n')
    server.add(VALID)
    env = {"ANTHROPIC_BASE_URL": server.url, **KEYS}
    done = cli("run", str(flow), "--json", cwd=repo, home=tmp_path / "home", env=env)
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stdout)[-1]["result"] == {"count": 2}

    flow.write_text(flow.read_text().replace("schema.json", "missing.json"))
    bad = cli("run", str(flow), "--json", cwd=repo, home=tmp_path / "home", env=env)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert str(flow) in bad.stderr and "missing.json" in bad.stderr


@pytest.mark.parametrize(("retries", "replies", "code"), [
    ("0", [INVALID, VALID], 1),  # no second chance
    ("3", [INVALID, INVALID, INVALID, VALID], 0),  # more than the default two
])
def test_output_retries_sets_how_often_an_invalid_result_goes_back(
        repo: Path, server: FakeModelServer, tmp_path: Path, retries: str,
        replies: list[str], code: int) -> None:
    server.add(*replies)
    home, args = _agent(repo, tmp_path, server)
    done = cli(*args, "--output-retries", retries, cwd=repo, home=home,
               env={"ANTHROPIC_BASE_URL": server.url, **KEYS})
    assert done.returncode == code, done.stderr
    assert len(server.requests) == int(retries) + 1
    assert json_lines(done.stdout)[-1]["result"] == ({"count": 2} if code == 0 else None)


def test_a_workflows_output_retries_and_their_bad_forms(
        repo: Path, server: FakeModelServer, tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text(json.dumps(SCHEMA))
    flow = tmp_path / "count.toml"
    flow.write_text('[workflow]\nname = "count"\noutput_schema = "schema.json"\n'
                    'output_retries = 0\n[workflow.llm]\nmodel = "anthropic:claude-sonnet-4-5"\n')
    server.add(INVALID)
    env = {"ANTHROPIC_BASE_URL": server.url, **KEYS}
    done = cli("run", str(flow), "--json", cwd=repo, home=tmp_path / "home", env=env)
    assert done.returncode == 1 and len(server.requests) == 1, done.stderr
    # the flag wins over the workflow's key
    server.add(INVALID, VALID)
    done = cli("run", str(flow), "--json", "--output-retries", "1", cwd=repo,
               home=tmp_path / "home", env=env)
    assert done.returncode == 0 and len(server.requests) == 3, done.stderr

    flow.write_text(flow.read_text().replace("output_retries = 0", "output_retries = 99"))
    bad = cli("run", str(flow), cwd=repo, home=tmp_path / "home", env=env)
    assert bad.returncode == 2 and "output_retries = 99: must be from 0 to 20" in bad.stderr
    alone = cli("agent", "x", "--output-retries", "1", cwd=repo, home=tmp_path / "home", env=env)
    assert alone.returncode == 2 and len(alone.stderr.splitlines()) == 1, alone.stderr
    assert "--output-retries 1: goes with --output-schema" in alone.stderr


def _hostile(tmp_path: Path, url: str) -> dict[str, tuple[str, str]]:
    """Schema files an attacker could hand over, and the words of the one line each gets."""
    outside = tmp_path / "outside.json"
    outside.write_text(json.dumps({"type": "string", "description": "OUTSIDE-SECRET"}))
    many = {"type": "object", "properties": {f"p{n}": {} for n in range(100_000)}}
    wide = {"type": "object", "properties": {f"p{n}": {} for n in range(25_000)}}
    return {
        "http": (json.dumps({"$ref": f"{url}/schema.json"}), "refers outside the schema"),
        "file": (json.dumps({"$ref": outside.as_uri()}), "refers outside the schema"),
        "loop": (json.dumps({"$ref": "#"}), "refers to itself without end"),
        "pair": (json.dumps({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
                             "$ref": "#/$defs/a"}), "refers to itself without end"),
        "deep": ('{"not": ' * 5000 + "{}" + "}" * 5000, "nested more than 64 deep"),
        "many": (json.dumps(many), "larger than 1,000,000 bytes"),
        "wide": (json.dumps(wide), "more than 20,000 values"),
    }


def test_a_hostile_schema_is_one_line_and_nothing_is_fetched_or_read(
        repo: Path, tmp_path: Path) -> None:
    import http.server
    import threading

    hits: list[str] = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = json.dumps({"type": "string"}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return

    server = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        for name, (text, expected) in _hostile(tmp_path, url).items():
            path = tmp_path / f"{name}.json"
            path.write_text(text)
            done = cli("agent", "x", "--output-schema", str(path), cwd=repo,
                       home=tmp_path / "h", env=KEYS, timeout=60)
            assert done.returncode == 2, (name, done.stderr)
            assert len(done.stderr.splitlines()) == 1 and expected in done.stderr, name
            assert "OUTSIDE-SECRET" not in done.stderr
        from normalize.structured import mismatch  # a schema stored before: still no fetch

        shown = mismatch({"$ref": f"{url}/schema.json"}, 1)
        assert shown is not None and "points at nothing" in shown
    finally:
        server.shutdown()
        server.server_close()
    assert hits == []


def test_a_workflows_output_schema_stays_beside_it(repo: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"type": "string", "description": "OUTSIDE-SECRET"}))
    flows = repo / ".normalize"
    flows.mkdir(exist_ok=True)
    flow = flows / "count.toml"
    for named in (str(secret), "../../secret.json"):
        flow.write_text(f'[workflow]\nname = "count"\noutput_schema = "{named}"\n'
                        '[workflow.llm]\nmodel = "anthropic:claude-sonnet-4-5"\n')
        bad = cli("run", str(flow), "--json", cwd=repo, home=tmp_path / "home", env=KEYS)
        assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
        assert "must be a file beside the workflow" in bad.stderr
        assert "OUTSIDE-SECRET" not in bad.stderr + bad.stdout
