"""The pull_request event payload, reduced to the fields the action reads, and the action's inputs."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError

from cascade.errors import BadInput

FailOn = Literal["reject", "uncertain", "never"]
FAIL_ON_VALUES: tuple[FailOn, ...] = ("reject", "uncertain", "never")
FORMATS = ("markdown", "sarif", "text")
PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")

# --------------------------------------------------------------------------------------------------------------------
# The event payload (GitHub sends many more fields; they are ignored)


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class Account(Payload):
    login: str = ""
    type: str = ""


class Repository(Payload):
    full_name: str


class Branch(Payload):
    sha: str
    ref: str = ""
    repo: Repository | None = None  # None when the fork the PR came from was deleted


class Label(Payload):
    name: str


class PullRequest(Payload):
    number: int
    title: str = ""
    body: str | None = None
    user: Account = Field(default_factory=Account)
    head: Branch
    base: Branch
    labels: list[Label] = Field(default_factory=list)

    @property
    def from_fork(self) -> bool:
        """A fork's PR gets a read-only token under `pull_request`: no comment can be written."""
        if self.head.repo is None or self.base.repo is None:
            return True
        return self.head.repo.full_name.lower() != self.base.repo.full_name.lower()


class PullRequestEvent(Payload):
    action: str = ""
    pull_request: PullRequest
    repository: Repository


class Issue(Payload):
    number: int
    title: str = ""
    body: str | None = None


class IssueComment(Payload):
    id: int
    body: str | None = None
    html_url: str = ""
    user: Account | None = None


class PullReview(Payload):
    id: int
    body: str | None = None
    html_url: str = ""
    commit_id: str | None = None
    user: Account | None = None


class PullReviewComment(Payload):
    id: int
    body: str | None = None
    path: str = ""
    line: int | None = None
    html_url: str = ""


def load_event(event_name: str, event_path: Path) -> PullRequestEvent:
    if event_name not in PULL_REQUEST_EVENTS:
        got = event_name or "no event"
        raise BadInput(f"cascade gates pull requests: run it on 'pull_request', not {got!r}")
    try:
        return PullRequestEvent.model_validate_json(event_path.read_bytes())
    except OSError as exc:
        raise BadInput(f"cannot read the event payload {event_path}: {exc.strerror}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise BadInput(f"event payload is not a pull_request event: '{where}': {first['msg']}") from None


# --------------------------------------------------------------------------------------------------------------------
# Inputs


class ActionInputs(BaseModel):
    """The action's inputs (INPUT_* variables set by action.yml) and the runner's GITHUB_* variables."""

    model_config = ConfigDict(frozen=True)

    config: str | None = None
    model: str | None = None
    fail_on: FailOn = "reject"
    comment: bool = True
    review: bool = True
    dry_run: bool = False
    formats: list[Literal["markdown", "sarif", "text"]] = Field(default_factory=list)
    token: SecretStr = SecretStr("")
    event_name: str = ""
    event_path: Path
    api_url: str = "https://api.github.com"
    workspace: Path
    out_dir: Path
    summary_path: Path | None = None
    output_path: Path | None = None
    run_url: str | None = None


def parse_bool(value: str, name: str) -> bool:
    lowered = value.strip().lower()
    if lowered in {"true", "yes", "on", "1"}:
        return True
    if lowered in {"false", "no", "off", "0"}:
        return False
    raise BadInput(f"input '{name}' must be true or false, got {value!r}")


def parse_formats(value: str) -> list[str]:
    names = [name for name in re.split(r"[\s,]+", value.strip().lower()) if name and name != "json"]
    unknown = sorted(set(names) - set(FORMATS))
    if unknown:
        raise BadInput(f"input 'format' accepts markdown, sarif, text (json is always written); got {unknown[0]!r}")
    return list(dict.fromkeys(names))


def _run_url(env: dict[str, str]) -> str | None:
    parts = [env.get(name) for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    return "{}/{}/actions/runs/{}".format(*parts) if all(parts) else None


def read_inputs(env: dict[str, str]) -> ActionInputs:
    event_path = env.get("GITHUB_EVENT_PATH")
    if not event_path:
        raise BadInput("GITHUB_EVENT_PATH is not set: run this inside a GitHub Actions pull_request workflow")
    fail_on = env.get("INPUT_FAIL_ON", "").strip().lower() or "reject"
    if fail_on not in FAIL_ON_VALUES:
        raise BadInput(f"input 'fail-on' must be reject, uncertain or never, got {fail_on!r}")
    run_dir = f"cascade-{env.get('GITHUB_RUN_ID', 'local')}-{env.get('GITHUB_RUN_ATTEMPT', '1')}"
    return ActionInputs.model_validate(
        {
            "config": env.get("INPUT_CONFIG") or None,
            "model": env.get("INPUT_MODEL") or None,
            "fail_on": fail_on,
            "comment": parse_bool(env.get("INPUT_COMMENT") or "true", "comment"),
            "review": parse_bool(env.get("INPUT_REVIEW") or "true", "review"),
            "dry_run": parse_bool(env.get("INPUT_DRY_RUN") or "false", "dry-run"),
            "formats": parse_formats(env.get("INPUT_FORMAT") or "markdown"),
            "token": env.get("INPUT_GITHUB_TOKEN", ""),
            "event_name": env.get("GITHUB_EVENT_NAME", ""),
            "event_path": event_path,
            "api_url": (env.get("GITHUB_API_URL") or "https://api.github.com").rstrip("/"),
            "workspace": Path(env.get("GITHUB_WORKSPACE") or os.getcwd()).resolve(),
            "out_dir": Path(env.get("RUNNER_TEMP") or tempfile.gettempdir()) / run_dir,
            "summary_path": env.get("GITHUB_STEP_SUMMARY") or None,
            "output_path": env.get("GITHUB_OUTPUT") or None,
            "run_url": _run_url(env),
        }
    )
