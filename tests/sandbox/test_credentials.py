"""Secrets by value and credentials by place, played as the model would: auto, no person, CI=true.

The person's environment carries passwords under innocent names (`DATABASE_URL`,
`REDIS_URL`, `SSH_PASSPHRASE`, a token in `OTEL_RESOURCE_ATTRIBUTES`) and moves some
credential stores with the standard variables; their HOME holds the agents' and tools'
own credential files, and another task's harness home sits beside the data home. A
program (and a hook) writes down what it saw, in files the redactor never touches, so
nothing here passes because the journal hid it. Each tier: full, and the landlock
tier as Docker and as Ubuntu's AppArmor restriction leave it (tests/sandbox/restricted.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import FULL_TIER, Site, make_site, restricted

from normalize.sandbox import carries_secret, scrub_env
from normalize.sandbox.credentials import credential_places

TIERS = {"full": [], "docker": restricted("docker"), "apparmor": restricted("apparmor")}

DEFAULT_PLACES = (
    ".claude/.credentials.json", ".codex/auth.json", ".config/anthropic/api_key", ".pgpass",
    ".vault-token", ".cache/huggingface/token", ".huggingface/token",
    ".terraform.d/credentials.tfrc.json", ".config/rclone/rclone.conf", ".gem/credentials",
    ".m2/settings.xml", ".m2/settings-security.xml", ".ssh/id_rsa",
)
"""Files under HOME that hold a credential (each gets a line no program may read)."""

RELOCATED: dict[str, tuple[list[str], list[str]]] = {
    "XDG_CONFIG_HOME": (["xdg"], ["xdg/gh/hosts.yml", "xdg/anthropic/key",
                                  "xdg/rclone/rclone.conf"]),
    "DOCKER_CONFIG": (["docker"], ["docker/config.json"]),
    "KUBECONFIG": (["kube-a", "kube-b"], ["kube-a", "kube-b"]),
    "CLOUDSDK_CONFIG": (["gcloud"], ["gcloud/credentials.db"]),
    "AWS_SHARED_CREDENTIALS_FILE": (["aws-credentials"], ["aws-credentials"]),
    "AWS_CONFIG_FILE": (["aws-config"], ["aws-config"]),
    "GOOGLE_APPLICATION_CREDENTIALS": (["service-account.json"], ["service-account.json"]),
    "CODEX_HOME": (["codex"], ["codex/auth.json"]),
    "HF_HOME": (["hf"], ["hf/token"]),
}
"""Variable → its value's paths and the credential files there (under HOME/moved)."""

SECRETS = {
    "DATABASE_URL": ("postgres://app:db-pass-7f3a@db.internal/app", "db-pass-7f3a"),
    "REDIS_URL": ("redis://:redis-pass-7f3a@cache.internal:6379/0", "redis-pass-7f3a"),
    "SSH_PASSPHRASE": ("passphrase-7f3a", "passphrase-7f3a"),
    "OTEL_RESOURCE_ATTRIBUTES": ("service.name=probe,auth.token=ghp_" + "7f3a" * 9,
                                 "7f3a" * 9),
    "DEPLOY_NOTE": ("use sk-ant-api03-" + "q7f3a" * 6, "q7f3a" * 6),
}
"""Variable → (value, the part of it that must reach no program and no hook)."""

PROBE = """\
import json, os, sys
seen = {}
for path in json.load(open('paths.json')):
    try:
        seen[path] = open(path).read()
    except OSError as exc:
        seen[path] = type(exc).__name__
json.dump({'env': dict(os.environ), 'files': seen}, open(sys.argv[1], 'w'))
print('probed', len(seen))
"""

HOOK = """\
import json, os, sys
sys.stdin.read()
json.dump(dict(os.environ), open({out!r}, 'w'))
"""


def _plant(site: Site) -> tuple[list[Path], list[Path], dict[str, str]]:
    """The credential files (default and relocated), readable controls, and the env."""
    secrets: list[Path] = []
    for place in DEFAULT_PLACES:
        path = site.home / place
        path.parent.mkdir(parents=True, exist_ok=True)
        if place != ".ssh/id_rsa":
            path.write_text(f"credential in ~/{place}\n")
        secrets.append(path)
    moved = site.home / "moved"
    env: dict[str, str] = {}
    for variable, (values, files) in RELOCATED.items():
        env[variable] = ":".join(str(moved / v) for v in values)
        for name in files:
            path = moved / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"credential moved by {variable}\n")
            secrets.append(path)
    other = site.home / "data-harness" / "0ther7a5k" / "transcript.jsonl"
    other.parent.mkdir(parents=True)
    other.write_text("another task's prompt and the files it read\n")
    secrets.append(other)
    controls = [site.home / "notes.txt", moved / "readme.txt", site.home / ".config" / "app.ini"]
    for path in controls:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("nothing secret\n")
    env.update({name: value for name, (value, _) in SECRETS.items()})
    env.update(NORMALIZE_HOME=str(site.home / "data"), PLAIN_URL="https://example.org/simple",
               PASSED_DB_URL="postgres://me:passed-pass-7f3a@db.internal/me")
    return secrets, controls, env


@pytest.fixture(scope="module", params=list(TIERS))
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> dict[str, Any]:
    if request.param == "full" and not FULL_TIER:
        pytest.skip("this machine has no full tier (namespaces are refused)")
    site = make_site(tmp_path_factory.mktemp(f"credentials-{request.param}"))
    site.prefix = TIERS[request.param]
    secrets, controls, env = _plant(site)
    (site.ws / "probe.py").write_text(PROBE)
    (site.ws / "paths.json").write_text(json.dumps([str(p) for p in [*secrets, *controls]]))
    hook_out = site.outside / "hook-env.json"
    hook = site.root / "hook.py"
    hook.write_text(HOOK.format(out=str(hook_out)))
    config = site.home / "data" / "config"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(
        f'[[hooks]]\nevent = "before_action"\ncommand = {json.dumps([sys.executable, str(hook)])}'
        "\n")
    proc, finished = site.agent(["run python3 probe.py seen.json", "done"], extra_env=env,
                                env_allow=("PASSED_DB_URL",))
    assert proc.returncode == 0, proc.stderr
    assert ("sandbox tier landlock" in proc.stderr) == (request.param != "full"), proc.stderr
    assert finished[0]["status"] == "success", finished[0]
    seen = json.loads((site.ws / "seen.json").read_text())
    return {"site": site, "secrets": secrets, "controls": controls, "seen": seen,
            "hook": json.loads(hook_out.read_text())}


def test_no_credential_place_is_readable_default_or_relocated(session: dict[str, Any]) -> None:
    files = session["seen"]["files"]
    read = [p for p in map(str, session["secrets"]) if not files[p].endswith("Error")]
    assert read == []
    assert all(files[str(p)] == "nothing secret\n" for p in session["controls"])


def test_another_tasks_harness_home_is_unreadable(session: dict[str, Any]) -> None:
    other = next(str(p) for p in session["secrets"] if "data-harness" in str(p))
    assert session["seen"]["files"][other] in ("PermissionError", "FileNotFoundError")


def test_no_password_or_token_reaches_a_program_whatever_its_name(
        session: dict[str, Any]) -> None:
    env = session["seen"]["env"]
    shown = json.dumps(env)
    for name, (_, secret) in SECRETS.items():
        assert secret not in shown, name
        assert name not in env
    assert env["PLAIN_URL"] == "https://example.org/simple"
    assert env["PASSED_DB_URL"] == "postgres://me:passed-pass-7f3a@db.internal/me"  # env_allow


def test_the_variables_that_move_a_store_are_not_passed(session: dict[str, Any]) -> None:
    env = session["seen"]["env"]
    assert [name for name in RELOCATED if name in env] == []
    assert "moved" not in json.dumps(env)


def test_no_password_reaches_a_hook(session: dict[str, Any]) -> None:
    hook = session["hook"]
    shown = json.dumps(hook)
    assert "NORMALIZE_HOME" in hook  # the hook ran, with the rest of the environment
    for name, (_, secret) in SECRETS.items():
        assert secret not in shown, name
    assert "passed-pass-7f3a" in hook.get("PASSED_DB_URL", "")  # env_allow lets it through


STAND_IN = """\
import json, os, sys
if sys.argv[1:] == ['--version']:
    print('2.1.0 (Claude Code)')
    sys.exit(0)
home = os.environ['HOME']
with open(os.path.join(home, 'mine.txt'), 'w') as fh:
    fh.write('kept between turns')
seen = {{'own': open(os.path.join(home, 'mine.txt')).read()}}
for name, path in {paths!r}.items():
    try:
        seen[name] = open(path).read()
    except OSError as exc:
        seen[name] = type(exc).__name__
json.dump(seen, open('harness-seen.json', 'w'))
print(json.dumps({{'type': 'system', 'subtype': 'init', 'session_id': 's-1', 'model': 'm'}}))
print(json.dumps({{'type': 'result', 'subtype': 'success', 'result': 'looked around',
                  'session_id': 's-1'}}))
"""


@pytest.fixture
def outside_tmp() -> Iterator[Path]:
    """A directory outside /tmp (which the full tier empties whole, hiding what lies there
    for a reason of its own): a person's HOME and data home are elsewhere."""
    root = Path(tempfile.mkdtemp(prefix="normalize-test-", dir="/var/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("tier", list(TIERS))
def test_a_harness_turn_keeps_its_own_home_and_reads_no_other(outside_tmp: Path,
                                                              tier: str) -> None:
    """Claude Code's Bash tool runs with a HOME of its own: the person's Codex and Claude
    logins, and another task's harness home, stay out of its reach; its own home works."""
    if tier == "full" and not FULL_TIER:
        pytest.skip("this machine has no full tier (namespaces are refused)")
    site = make_site(outside_tmp)
    site.prefix = TIERS[tier]
    secrets, _, env = _plant(site)
    paths = {"codex": str(site.home / ".codex" / "auth.json"),
             "claude": str(site.home / ".claude" / ".credentials.json"),
             "other": next(str(p) for p in secrets if "data-harness" in str(p))}
    program = site.root / "bin" / "claude"
    program.parent.mkdir()
    program.write_text(f"#!{sys.executable}\n" + STAND_IN.format(paths=paths))
    program.chmod(0o755)
    env.update(NORMALIZE_CLAUDE_BIN=str(program), ANTHROPIC_API_KEY="sk-ant-test-key")
    proc = subprocess.run([*site.prefix, sys.executable, "-m", "normalize.cli.app", "agent",
                           "--harness", "claude", "--json", "look around"], cwd=site.ws,
                          env={**site.env, **env}, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr
    seen = json.loads((site.ws / "harness-seen.json").read_text())
    assert seen["own"] == "kept between turns"
    assert all(seen[name] in ("PermissionError", "FileNotFoundError") for name in paths), seen
    homes = list((site.home / "data-harness").glob("*/claude/mine.txt"))
    assert [p.read_text() for p in homes] == ["kept between turns"]


def test_the_scrub_judges_each_value_by_the_redactors_shapes() -> None:
    """The one function hooks and programs get their environment from."""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:otlp-pass@otel.internal:4318",
           "PIP_EXTRA_INDEX_URL": "https://me:idx-pass@pypi.internal/simple",
           "MY_PASSPHRASE": "x", "SENTRY_DSN": "https://k@o1.ingest.example/1",
           "NPM_CONFIG__AUTH": "bWU6cHc=", "MYSQL_PWD": "pw", "NOTE": "Bearer abcdefgh12345678",
           "OTEL_SERVICE_NAME": "mine", "PIP_INDEX_URL": "https://pypi.org/simple",
           "PWD": "/work", "MAKEFLAGS": "-j4 --jobserver-auth=3,4", "EDITOR": "vi",
           "KUBECONFIG": "/elsewhere/kube", "XDG_CONFIG_HOME": "/elsewhere/config"}
    assert scrub_env(env) == {"OTEL_SERVICE_NAME": "mine", "PWD": "/work", "EDITOR": "vi",
                              "PIP_INDEX_URL": "https://pypi.org/simple",
                              "MAKEFLAGS": "-j4 --jobserver-auth=3,4"}
    assert scrub_env(env, ["KUBECONFIG", "PIP_EXTRA_INDEX_URL"])["KUBECONFIG"] == \
        "/elsewhere/kube"
    assert carries_secret("postgres://app:pw@db/app") and not carries_secret("postgres://db/app")


def test_the_places_follow_the_variables_and_never_hide_a_home(tmp_path: Path) -> None:
    home = str(tmp_path / "home")
    found = credential_places([{"HOME": home, "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
                                "KUBECONFIG": f"{tmp_path}/k1:{tmp_path}/k2",
                                "DOCKER_CONFIG": str(tmp_path / "dk"), "CLOUDSDK_CONFIG": home,
                                "HF_HOME": "relative/ignored"}])
    assert {f"{home}/.codex/auth.json", f"{home}/.config/anthropic", f"{tmp_path}/cfg/gh",
            f"{tmp_path}/k1", f"{tmp_path}/k2", f"{tmp_path}/dk/config.json"} <= found
    assert home not in found and not any(p.startswith("relative") for p in found)
