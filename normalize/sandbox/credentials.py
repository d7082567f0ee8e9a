"""Where credentials live: the places no program may read, and the variables that move them.

`PLACES` is the maintained list, one row per place (a path under HOME, a `*` for a
family of files), with what it holds. `RELOCATIONS` names the standard variables
that move a place elsewhere: each replaces a path under HOME (`XDG_CONFIG_HOME`
stands for `~/.config`, so `~/.config/gh` is looked for under it too; `KUBECONFIG`
is a list of files). Both the default places and the relocated ones are hidden,
and the relocating variables themselves are scrubbed from programs' environments
(`normalize.sandbox.env`) unless named in `env_allow`: a program is not told
where the person keeps a store it may not read.

Add a row when a tool of the person's keeps a secret in a file of its own.
"""

from __future__ import annotations

import glob
import os
import pwd
from collections.abc import Iterable, Iterator, Mapping

__all__ = ["CREDENTIAL_STORES", "PLACES", "RELOCATING", "RELOCATIONS", "credential_places",
           "homes"]

PLACES: tuple[tuple[str, str], ...] = (
    (".ssh", "ssh keys, known hosts, agent config"),
    (".gnupg", "GnuPG keys"),
    (".netrc", "logins for curl, git and ftp"),
    (".git-credentials", "git's plain-text credential store"),
    (".config/git/credentials", "the same, in git's XDG place"),
    (".aws", "AWS credentials and config"),
    (".azure", "Azure CLI tokens"),
    (".config/gcloud", "Google Cloud SDK tokens and application-default credentials"),
    (".kube", "Kubernetes configs (cluster tokens, client keys)"),
    (".docker/config.json", "Docker registry logins"),
    (".config/gh", "GitHub CLI token"),
    (".config/hub", "hub's GitHub token"),
    (".config/glab-cli", "GitLab CLI token"),
    (".pypirc", "PyPI upload tokens"),
    (".npmrc", "npm registry tokens"),
    (".yarnrc.yml", "Yarn registry tokens"),
    (".cargo/credentials.toml", "crates.io token"),
    (".cargo/credentials", "crates.io token (older name)"),
    (".gem/credentials", "RubyGems API key"),
    (".m2/settings*.xml", "Maven server passwords and their master key"),
    (".gradle/gradle.properties", "Gradle repository and signing credentials"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL client password"),
    (".vault-token", "HashiCorp Vault token"),
    (".terraform.d/credentials.tfrc.json", "Terraform Cloud tokens"),
    (".terraformrc", "Terraform CLI config (may hold credentials blocks)"),
    (".config/rclone", "rclone remotes (cloud storage logins)"),
    (".cache/huggingface/token", "Hugging Face token"),
    (".cache/huggingface/stored_tokens", "Hugging Face tokens by name"),
    (".huggingface", "Hugging Face token (older place)"),
    (".claude/.credentials.json", "Claude Code login"),
    (".claude.json", "Claude Code account state"),
    (".codex/auth.json", "Codex CLI login"),
    (".config/anthropic", "Anthropic CLI credentials"),
    (".config/openai", "OpenAI CLI credentials"),
    (".aider.conf.yml", "aider's config (API keys)"),
    (".password-store", "pass, the password store"),
    (".local/share/keyrings", "GNOME keyring"),
)
"""Each credential place under HOME, with what it holds."""

RELOCATIONS: tuple[tuple[str, str, str], ...] = (
    ("XDG_CONFIG_HOME", ".config", "the config directory (every place under ~/.config)"),
    ("XDG_CACHE_HOME", ".cache", "the cache directory (the Hugging Face token)"),
    ("XDG_DATA_HOME", ".local/share", "the data directory (keyrings)"),
    ("DOCKER_CONFIG", ".docker", "Docker's config directory"),
    ("KUBECONFIG", ".kube/config", "Kubernetes configs (a list of files)"),
    ("CLOUDSDK_CONFIG", ".config/gcloud", "Google Cloud SDK's config directory"),
    ("GOOGLE_APPLICATION_CREDENTIALS", ".config/gcloud/application_default_credentials.json",
     "a service-account key"),
    ("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", "AWS credentials"),
    ("AWS_CONFIG_FILE", ".aws/config", "AWS config (SSO sessions, credential processes)"),
    ("AZURE_CONFIG_DIR", ".azure", "Azure CLI's directory"),
    ("GH_CONFIG_DIR", ".config/gh", "GitHub CLI's directory"),
    ("GNUPGHOME", ".gnupg", "GnuPG's directory"),
    ("NETRC", ".netrc", "curl's and git's netrc"),
    ("PGPASSFILE", ".pgpass", "PostgreSQL passwords"),
    ("NPM_CONFIG_USERCONFIG", ".npmrc", "npm's user config"),
    ("CARGO_HOME", ".cargo", "Cargo's home (crates.io token)"),
    ("TF_CLI_CONFIG_FILE", ".terraformrc", "Terraform CLI config"),
    ("RCLONE_CONFIG", ".config/rclone/rclone.conf", "rclone's config"),
    ("HF_HOME", ".cache/huggingface", "Hugging Face's home"),
    ("HF_TOKEN_PATH", ".cache/huggingface/token", "the Hugging Face token"),
    ("CLAUDE_CONFIG_DIR", ".claude", "Claude Code's directory"),
    ("CODEX_HOME", ".codex", "Codex CLI's directory"),
    ("PASSWORD_STORE_DIR", ".password-store", "pass's store"),
)
"""(variable, the path under HOME it replaces, what it names)."""

RELOCATING = frozenset(variable for variable, _, _ in RELOCATIONS)
"""Variables scrubbed from programs' environments unless `env_allow` names them."""

CREDENTIAL_STORES = tuple(path for path, _ in PLACES)
"""The credential places under HOME (as `sandbox check` lists them)."""


def homes(envs: Iterable[Mapping[str, str]]) -> set[str]:
    """HOME as each of `envs` says, as normalize runs, and as the password database says
    (a harness turn gets a HOME of its own; the person's stores are still theirs)."""
    found = [env.get("HOME") for env in [*envs, os.environ]]
    try:
        found.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:
        pass
    return {h for h in found if h and os.path.isabs(h)}


def _relocated(replaces: str, place: str) -> Iterator[str]:
    """Where the places at or below `replaces` are when a variable puts it at `place`: the
    place itself when it is secret whole, and each place listed below it."""
    if any(replaces == path or replaces.startswith(path + "/") for path, _ in PLACES):
        yield place
    for path, _ in PLACES:
        if path.startswith(replaces + "/"):
            yield os.path.join(place, path[len(replaces) + 1:])


def credential_places(envs: Iterable[Mapping[str, str]]) -> set[str]:
    """Every credential place (absolute, not resolved), by default and as the variables of
    each of `envs` (and normalize's own) relocate them; never a home or a directory above."""
    envs = [*envs, os.environ]
    around = homes(envs)
    wanted = [os.path.join(home, path) for home in around for path, _ in PLACES]
    for variable, replaces, _ in RELOCATIONS:
        values = {env[variable] for env in envs if env.get(variable)}
        for place in {p for value in values for p in value.split(os.pathsep)}:
            if os.path.isabs(place):
                wanted.extend(_relocated(replaces, place))
    found = {g for path in wanted for g in (glob.glob(path) if "*" in path else [path])}
    real = {os.path.realpath(h) for h in around}
    return {p for p in found if not _holds(p, real)}


def _holds(path: str, homes: set[str]) -> bool:
    """Whether `path` is `/`, a home or a directory above one (never hidden whole)."""
    real = os.path.realpath(path)
    return real == "/" or any(h == real or h.startswith(real.rstrip("/") + "/") for h in homes)
