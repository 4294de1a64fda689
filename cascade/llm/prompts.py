"""Versioned prompt templates and untrusted-data blocks.

Templates live in the repository's ``probes/`` directory (``reviewer.v1.md``, ``probe_generator.v1.md``); the
package reaches them through ``cascade/prompts``, a symlink to ``../probes`` that setuptools follows when it builds
a wheel, so one copy serves both a checkout and an installed package. A template is a system part and a user part
separated by a line ``=== USER ===``; ``$name`` placeholders are filled with `string.Template`, which never
re-reads the inserted text, so data cannot smuggle in placeholders.

Untrusted text (issue, PR text, patch, tool output) goes inside a data block whose boundary carries a nonce
derived from the content itself: the same inputs give the same prompt (cassettes replay), while text inside a
block cannot know the nonce it will be wrapped with, so it cannot close its block early.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from string import Template
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict

from cascade.errors import CascadeError
from cascade.llm.cassette import ChatMessage
from cascade.stable import run_placeholders, stable_text, without_durations

if TYPE_CHECKING:
    from cascade.context import ReviewContext

USER_SEPARATOR = "=== USER ==="


class PromptTemplate(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str  # e.g. "reviewer.v1": recorded in the report so a verdict names the prompt that produced it
    system: str
    user: str

    def render(self, **values: str) -> list[ChatMessage]:
        try:
            system = Template(self.system).substitute(values)
            user = Template(self.user).substitute(values)
        except (KeyError, ValueError) as exc:
            raise CascadeError(f"prompt template {self.name} has a bad placeholder: {exc}") from None
        return [ChatMessage(role="system", content=system), ChatMessage(role="user", content=user)]


def load_template(name: str) -> PromptTemplate:
    """Load ``<name>.md`` (e.g. ``reviewer.v1``) from the package's prompt directory."""
    resource = resources.files("cascade") / "prompts" / f"{name}.md"
    try:
        text = resource.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CascadeError(f"prompt template {name}.md is missing from the cascade package") from None
    system, sep, user = text.partition(f"\n{USER_SEPARATOR}\n")
    if not sep:
        raise CascadeError(f"prompt template {name}.md has no '{USER_SEPARATOR}' line")
    return PromptTemplate(name=name, system=system.strip() + "\n", user=user.strip() + "\n")


def boundary_nonce(*contents: str) -> str:
    """A boundary token that occurs in none of ``contents``, derived from them (deterministic, unguessable)."""
    digest = hashlib.sha256("\x00".join(contents).encode("utf-8"))
    while True:
        nonce = digest.hexdigest()[:20]
        if not any(nonce in c for c in contents):
            return nonce
        digest.update(b"\x00")


def data_block(label: str, text: str, nonce: str) -> str:
    """Wrap untrusted text; the closing line repeats the nonce so only the real end closes the block."""
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"<<<DATA {nonce} {label}>>>\n{body}<<<END DATA {nonce}>>>"


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[… {len(text) - limit} more characters not shown]\n"


def run_paths(ctx: ReviewContext) -> dict[str, str]:
    """This run's temporary worktree paths and the placeholders that stand for them (the reports' own tokens)."""
    if ctx.workspace is None:
        return {}
    return run_placeholders(ctx.workspace.base_dir, ctx.workspace.patched_dir)


def stabilize(text: str, paths: dict[str, str]) -> str:
    """Remove what changes from run to run (temporary paths, wall times) so the same review gives the same
    prompt — a cassette replays only identical prompts — and the model is not distracted by noise."""
    return without_durations(stable_text(text, paths))
