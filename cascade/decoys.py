"""Decoy credentials: fake secrets every sandboxed run is handed, in the formats real services use.

A run finds them where real ones live — HOME's key and credential files, token variables in the environment — and
nothing about them says "decoy": no tool name, no marker prefix, values of the real shapes (GitHub ``ghp_``/``ghs_``/
``github_pat_`` tokens, an AWS key pair, PEM private keys, ``.netrc``, ``.git-credentials``, a Docker auth entry). A
test that behaves only when it thinks nobody watches cannot tell them from a careless developer's machine.

They are random per gate process. Reading one is theft in progress (the oracle's witnesses record the open); finding
one in anything the run produced — a file, its output, a report excerpt — is a leak (`cascade/leaks.py`)."""

from __future__ import annotations

import base64
import functools
import json
import secrets
import string

from pydantic import BaseModel, ConfigDict

_BASE62 = string.ascii_letters + string.digits
_AWS_ID = string.ascii_uppercase + "234567"


def _random(alphabet: str, length: int) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _pem(kind: str) -> str:
    body = base64.b64encode(secrets.token_bytes(600)).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "\n".join([f"-----BEGIN {kind} PRIVATE KEY-----", *lines, f"-----END {kind} PRIVATE KEY-----", ""])


class Decoys(BaseModel):
    """One process's decoy secrets and where a run finds them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    github_token: str
    github_app_token: str
    github_pat: str
    npm_token: str
    aws_key_id: str
    aws_secret: str
    ssh_rsa: str
    ssh_ed25519: str
    netrc_password: str
    docker_auth_token: str

    @classmethod
    def generate(cls) -> Decoys:
        return cls(
            github_token="ghp_" + _random(_BASE62, 36),
            github_app_token="ghs_" + _random(_BASE62, 36),
            github_pat=f"github_pat_{_random(_BASE62, 22)}_{_random(_BASE62, 59)}",
            npm_token="npm_" + _random(_BASE62, 36),
            aws_key_id="AKIA" + _random(_AWS_ID, 16),
            aws_secret=_random(_BASE62 + "+/", 40),
            ssh_rsa=_pem("RSA"),
            ssh_ed25519=_pem("OPENSSH"),
            netrc_password=_random(_BASE62, 40),
            docker_auth_token=_random(_BASE62, 32),
        )

    def env(self) -> dict[str, str]:
        """Token variables a CI job or a developer shell typically carries."""
        return {"GITHUB_TOKEN": self.github_token, "GH_TOKEN": self.github_pat, "NPM_TOKEN": self.npm_token}

    def home_files(self) -> dict[str, str]:
        """Credential files relative to HOME (``.ssh/id_rsa``…), with their contents."""
        docker_auth = base64.b64encode(f"deploy:{self.docker_auth_token}".encode()).decode()
        docker = {"auths": {"https://index.docker.io/v1/": {"auth": docker_auth}}}
        return {
            ".ssh/id_rsa": self.ssh_rsa,
            ".ssh/id_ed25519": self.ssh_ed25519,
            ".aws/credentials": "[default]\n"
            f"aws_access_key_id = {self.aws_key_id}\naws_secret_access_key = {self.aws_secret}\n",
            ".git-credentials": f"https://deploy:{self.github_app_token}@github.com\n",
            ".netrc": f"machine github.com\n  login deploy\n  password {self.netrc_password}\n",
            ".docker/config.json": json.dumps(docker, indent=1) + "\n",
            ".config/gh/hosts.yml": f"github.com:\n    oauth_token: {self.github_pat}\n    user: deploy\n",
        }

    def values(self) -> list[str]:
        """The secret parts a leak is recognised by: each random token, and the body of each key (its base64 lines
        joined), never the parts every key shares (the PEM armour)."""
        keys = ["".join(line for line in pem.splitlines() if "-----" not in line) for pem in (self.ssh_rsa,
                self.ssh_ed25519)]  # fmt: skip
        tokens = [self.github_token, self.github_app_token, self.github_pat, self.npm_token, self.aws_key_id,
                  self.aws_secret, self.netrc_password, self.docker_auth_token]  # fmt: skip
        return [*tokens, *keys]


@functools.lru_cache(maxsize=1)
def decoys() -> Decoys:
    """This process's decoys: made once, so every run of a review (and its reports) share them."""
    return Decoys.generate()
