"""The table of secret shapes the sink tests use, and the CLI in a subprocess.

Every value is assembled from pieces here, so no scanner mistakes this file for
a leak. Each row: (name, the line a program prints, the secret in that line).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PYTHON = sys.executable

# values only this workspace's files and this process's environment know
DOTENV_DEEP = "zq9-plain-value-77"  # in services/api/.env.local, below the root
ENV_SECRET = "envtok-5501-abcdef"  # in MY_SERVICE_TOKEN, in normalize's environment

_B64 = "Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"
SHAPES: list[tuple[str, str, str]] = [
    ("anthropic", "ANTHROPIC_API_KEY=sk-ant-api03-" + "Ab1_" * 10, "sk-ant-api03-" + "Ab1_" * 10),
    ("openai project", "key sk-proj-" + "x9Y-" * 10 + " set", "sk-proj-" + "x9Y-" * 10),
    ("openai legacy", "using sk-" + "A1b2" * 12 + " now", "sk-" + "A1b2" * 12),
    ("aws access key id", "aws_access_key_id=AKIA" + "Z3X5C7V9B1N2M4L6", "AKIAZ3X5C7V9B1N2M4L6"),
    ("aws credentials file", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "zKEY42",
     "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzKEY42"),
    ("aws session token", "aws_session_token = IQoJb3JpZ2luX2VjEOT//wEaCXVz" + "ZWFzdDE",
     "IQoJb3JpZ2luX2VjEOT//wEaCXVzZWFzdDE"),
    ("gcp service account", '  "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADAN'
     'BgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n",', "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC"),
    ("azure storage", "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=" + _B64
     + "==;EndpointSuffix=core.windows.net", _B64),
    ("azure service bus", "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=R;"
     "SharedAccessKey=c2VjcmV0c2VjcmV0" + "c2VjcmV0MTIz=", "c2VjcmV0c2VjcmV0c2VjcmV0MTIz"),
    ("azure sas", "https://acme.blob.core.windows.net/c?sv=2022-11-02&sig=AbCdEf1234567890"
     "GhIjKlMnOpQrStUv%3D", "AbCdEf1234567890GhIjKlMnOpQrStUv"),
    ("azure ad secret", "client secret abc8Q~" + "Zx9_Yw8.Vu7-Ts6~Rq5Po4Nm3Lk2Ji1Hg0F",
     "Zx9_Yw8.Vu7-Ts6~Rq5Po4Nm3Lk2Ji1Hg0F"),
    ("github classic", "token ghp_" + "a1B2" * 9, "ghp_" + "a1B2" * 9),
    ("github oauth", "gho_" + "Z9y8" * 9, "gho_" + "Z9y8" * 9),
    ("github fine-grained", "github_pat_11AAAAAAA0" + "b_C3" * 10,
     "github_pat_11AAAAAAA0" + "b_C3" * 10),
    ("gitlab", "export GL=glpat-" + "Xy7_" * 5, "glpat-" + "Xy7_" * 5),
    ("slack bot", "xoxb-" + "123456789012-abcdefABCDEF", "xoxb-123456789012-abcdefABCDEF"),
    ("slack user", "hook xoxp-" + "1234567890-0987654321-abcdef",
     "xoxp-1234567890-0987654321-abcdef"),
    ("slack app", "xapp-1-" + "A0123BCDE-4567890123-ab12", "xapp-1-A0123BCDE-4567890123-ab12"),
    ("stripe secret", "stripe: sk_live_" + "51HabcDEF" * 3, "sk_live_" + "51HabcDEF" * 3),
    ("stripe restricted", "rk_live_" + "9zYxWvUt" * 3, "rk_live_" + "9zYxWvUt" * 3),
    ("stripe webhook", "whsec_" + "Qw3rTy7uI0oP" * 2, "whsec_" + "Qw3rTy7uI0oP" * 2),
    ("rsa private key", "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAs1" + "x" * 20
     + "\n-----END RSA PRIVATE KEY-----", "MIIEowIBAAKCAQEAs1" + "x" * 20),
    ("openssh private key", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA"
     "\n-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAA"),
    ("jwt", "session eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jV",
     "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jV"),
    ("url with password", "db postgres://app:s3cretpw99@db:5432/app", "s3cretpw99"),
    ("bearer header", "Authorization: Bearer abcDEF123ghiJKL456", "abcDEF123ghiJKL456"),
    ("basic header", "authorization: Basic dXNlcjpodW50ZXIy", "dXNlcjpodW50ZXIy"),
    ("dotenv", "DB_PASSWORD=hunter2hunter2", "hunter2hunter2"),
    ("ini", "password = Tr0ub4dor&3x", "Tr0ub4dor&3x"),
    ("yaml", "  db_password: correcthorse42", "correcthorse42"),
    ("yaml token", "  token: ya29.a0AfH6SMBxyz123", "ya29.a0AfH6SMBxyz123"),
    ("json", '{"api_key": "k-4f9a8b7c6d5e", "model": "m"}', "k-4f9a8b7c6d5e"),
    ("toml", 'secret = "toml-secret-9876"', "toml-secret-9876"),
    ("google api key", "AIza" + "SyD-" * 8 + "abc", "AIza" + "SyD-" * 8 + "abc"),
    ("npm", "//registry.npmjs.org/:_authToken=npm_" + "a1B2c3D4e5" * 3 + "f6G7h8",
     "npm_" + "a1B2c3D4e5" * 3 + "f6G7h8"),
    ("pypi", "pypi-AgEIcHlwaS5vcmc" + "Cjk0" * 12, "pypi-AgEIcHlwaS5vcmc" + "Cjk0" * 12),
    ("huggingface", "hf_" + "AbCdEfGhIj" * 3 + "KlMn", "hf_" + "AbCdEfGhIj" * 3 + "KlMn"),
    ("sendgrid", "SG." + "aB3" * 7 + "c" + "." + "dE4" * 14 + "f", "SG." + "aB3" * 7 + "c"),
    ("groq", "GROQ=gsk_" + "Qz7xWv3R" * 6 + "abcd", "gsk_" + "Qz7xWv3R" * 6 + "abcd"),
    ("xai", "using xai-" + "Lm4nOp5Q" * 10, "xai-" + "Lm4nOp5Q" * 10),
    ("perplexity", "pplx-" + "a1b2C3d4" * 6, "pplx-" + "a1b2C3d4" * 6),
    ("replicate", "REPLICATE r8_" + "Hy6tGr5Fe4" * 3 + "Dc3Sx2Z",
     "r8_" + "Hy6tGr5Fe4" * 3 + "Dc3Sx2Z"),
    ("vault", "VAULT hvs." + "CAESIJ" + "k9Lm2Np4Qr6St8Uv" * 2,
     "hvs.CAESIJ" + "k9Lm2Np4Qr6St8Uv" * 2),
    ("google oauth secret", "client_secret GOCSPX-" + "1aB2cD3eF4gH5iJ6kL7mN8oP9qR0",
     "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"),
    ("google oauth token", "got ya29." + "a0AfB_byC" * 5, "ya29." + "a0AfB_byC" * 5),
    ("shopify", "shopify shpat_" + "0a1b2c3d4e5f" * 2 + "6a7b8c9d", "shpat_" + "0a1b2c3d4e5f" * 2
     + "6a7b8c9d"),
    ("digitalocean", "DO dop_v1_" + "0123456789abcdef" * 4, "dop_v1_" + "0123456789abcdef" * 4),
    ("grafana service account", "glsa_" + "Ab3dE6gH9j" * 3 + "Kl_0a1b2c3d", "glsa_" + "Ab3dE6gH9j"
     * 3 + "Kl_0a1b2c3d"),
    ("linear", "lin_api_" + "Tq8wE7rT6y" * 4, "lin_api_" + "Tq8wE7rT6y" * 4),
    ("telegram bot", "bot 7312345678:" + "AAF" + "x9Lp2Mq4Rs6Tu8Vw0Yz3Ab5Cd7Ef9GHi", "AAF"
     + "x9Lp2Mq4Rs6Tu8Vw0Yz3Ab5Cd7Ef9GHi"),
    ("docker config auth", '{"auths": {"ghcr.io": {"auth": "' + "bW9uYTpkb2NrZXJwYXNz" + 'MTIz"}}}',
     "bW9uYTpkb2NrZXJwYXNzMTIz"),
    ("curl -u", "curl -u admin:Pa55w0rd-curl https://api.example.com/v1", "Pa55w0rd-curl"),
    ("mysql -p", "mysql -h db -u root -pMyS" + "qlPass77 shop", "MySqlPass77"),
    ("redis url", "cache at redis://:" + "R3disPassw0rd@cache:6379/0", "R3disPassw0rd"),
    ("mongodb srv url", "mongodb+srv://app:" + "M0ngoPw-42@cluster0.example.net/db", "M0ngoPw-42"),
    ("slack webhook", "https://hooks.slack.com/services/" + "T0ABC1234/B0DEF5678/" + "Xy9Zw8Vu7Ts6"
     + "Rq5Po4Nm3Lk2", "Xy9Zw8Vu7Ts6Rq5Po4Nm3Lk2"),
    (".netrc", "machine api.example.com login bob password " + "N3trcS3cret", "N3trcS3cret"),
    (".env below the root", f"signing with {DOTENV_DEEP} now", DOTENV_DEEP),
    ("secret-named env var", f"env says {ENV_SECRET}", ENV_SECRET),
]

PAYLOAD = "\n".join(line for _, line, _ in SHAPES)
DSN = "postgres://app:s3cretpw@db/app"
KEY = "sk-ant-api03-" + "Zq9_" * 12
VARS = ["--var", f"payload={PAYLOAD}", "--var", f"dsn={DSN}", "--var", f"key={KEY}"]


def make_workspace(root: Path) -> Path:
    """A workspace whose program prints every shape, with a `.env` two levels down."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "secrets.txt").write_text(PAYLOAD + "\n")
    (root / "emit.py").write_text("print(open('secrets.txt').read())\n")
    deep = root / "services" / "api"
    deep.mkdir(parents=True)
    (deep / ".env.local").write_text(f"WEBHOOK_SIGNING={DOTENV_DEEP}\n")
    return root


USE = "import sys; open('used.txt', 'w').write(sys.argv[1] + ' ' + sys.argv[2])"


def workflow(path: Path) -> Path:
    """Print the shapes (a program and a view), ask, then hand the vars to a file and a program."""
    path.write_text(f'''
[workflow]
name = "sinks"

[workflow.vars]
payload = ""
dsn = ""
key = ""

[workflow.permissions]
mode = "yes"

[[workflow.steps]]
name = "print"
action = "run {PYTHON} emit.py"

[[workflow.steps]]
name = "read"
action = "view secrets.txt"

[[workflow.steps]]
name = "ask"
action = "ask Carry on with {{dsn}} and {{key}}?"

[[workflow.steps]]
name = "write"
action = """write out.txt <<EOF
{{payload}}
EOF"""

[[workflow.steps]]
name = "use"
action = """run {PYTHON} -c "{USE}" {{dsn}} {{key}}"""
''')
    return path


def cli(*args: str, cwd: Path, home: Path, timeout: float = 90,
        env_extra: dict[str, str] | None = None,
        **popen: object) -> subprocess.CompletedProcess[str]:
    """`normalize ARGS` in a subprocess, with a secret-named variable in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("NORMALIZE_CRASH_AT", "TERM")}
    env.update({"NORMALIZE_HOME": str(home), "PYTHONUNBUFFERED": "1",
                "MY_SERVICE_TOKEN": ENV_SECRET, **(env_extra or {})})
    return subprocess.run([PYTHON, "-m", "normalize.cli.app", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False,
                          **popen)  # type: ignore[call-overload]
