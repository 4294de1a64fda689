"""Probes mined from the agent trace: the reproduction scripts the agent wrote and ran (Stage 2; docs/architecture.md).

Whatever the agent's format, its trace reader (`cascade/traces/`) lists what each step did: file writes, line edits,
text replacements, executed commands. Replaying the file operations in order gives the final text of every file the
agent created; a ``python FILE`` command (alone or inside a command line: ``cd repo && python FILE``) counts as a run.
Each script the agent created and ran becomes a pytest file that executes it: an uncaught exception, a failing assert
or a non-zero ``sys.exit`` is a behavioural failure, a missing module a setup error. Such probes share the agent's
blind spots: they may reject, never accept.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from cascade.context import ReviewContext
from cascade.models import FileWrite, LineEdit, ShellCommand, TextReplace, Trace, TraceOperation
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin
from cascade.safety import command_lines
from cascade.traces.base import repo_path

_MAX_SCRIPT_CHARS = 50_000
_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?$")
_SEGMENT_SPLIT = re.compile(r"&&|\|\||;|\|")


class MinedScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="Path relative to the repository root, as the agent named it.")
    content: str
    runs: int = Field(description="How many times the agent ran it with python.")
    consistent: bool = Field(
        description="False when a replayed edit disagreed with the agent's tool (line count, text to replace)."
    )


class _Replay:
    """The files the agent created, rebuilt operation by operation, and the scripts it ran."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.files: dict[str, list[str]] = {}
        self.runs: dict[str, int] = {}
        self.consistent: dict[str, bool] = {}

    def apply(self, operation: TraceOperation) -> None:
        if isinstance(operation, ShellCommand):
            for path in python_runs(operation.command, self.root):
                self.runs[path] = self.runs.get(path, 0) + 1
        elif isinstance(operation, FileWrite):
            self.files[operation.path] = operation.content.split("\n")
            self.consistent[operation.path] = True
        elif operation.path in self.files:  # edits of files the agent did not create have no known base text
            self._edit(operation)

    def _edit(self, operation: LineEdit | TextReplace) -> None:
        lines = self.files[operation.path]
        if isinstance(operation, LineEdit):
            lines = lines[: operation.start - 1] + operation.lines + lines[operation.end :]
            if operation.lines_after is not None and operation.lines_after != len(lines):
                self.consistent[operation.path] = False
        else:
            text = "\n".join(lines)
            if operation.old not in text:
                self.consistent[operation.path] = False
                return
            lines = text.replace(operation.old, operation.new, -1 if operation.every else 1).split("\n")
        self.files[operation.path] = lines


def python_runs(command: str, root: str = "") -> list[str]:
    """Repository paths of the ``.py`` files a command line runs with ``python`` (``python -u x.py``,
    ``cd repo && python3 x.py``, ``FOO=1 timeout 60 python x.py``)."""
    paths: list[str] = []
    for line in command_lines(command):
        for segment in _SEGMENT_SPLIT.split(line):
            words = _split(segment)
            while words and (
                re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0])
                or words[0] in ("timeout", "env")
                or re.match(r"^\d+[smh]?$", words[0])
            ):
                words = words[1:]
            if words and _PYTHON.match(PurePosixPath(words[0]).name):
                script = next((w for w in words[1:] if not w.startswith("-")), "")
                if script.endswith(".py"):
                    paths.append(repo_path(script, root))
    return paths


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def mine_scripts(trace: Trace) -> list[MinedScript]:
    """Scripts the agent created and ran at least once, with their final replayed text."""
    replay = _Replay(trace.root)
    for step in trace.steps:
        for operation in step.operations:
            replay.apply(operation)
    scripts: list[MinedScript] = []
    for path, lines in replay.files.items():
        content = "\n".join(lines).rstrip("\n") + "\n"
        if path.endswith(".py") and replay.runs.get(path) and content.strip() and len(content) <= _MAX_SCRIPT_CHARS:
            scripts.append(
                MinedScript(path=path, content=content, runs=replay.runs[path], consistent=replay.consistent[path])
            )
    return scripts


def minable_scripts(trace: Trace, patched_paths: set[str]) -> list[MinedScript]:
    """The scripts that become probe candidates: replayed consistently, and not files the patch itself changes."""
    return [s for s in mine_scripts(trace) if s.consistent and s.path not in patched_paths]


def script_as_pytest(script: MinedScript) -> str:
    """A pytest file that runs the script as ``python FILE`` would (``__name__ == '__main__'``, repo root as cwd).

    The script is compiled at import time, so a syntax error is a collection (setup) error, not a verdict. The file
    must run on old interpreters too (3.6+): no annotations or newer syntax.
    """
    return (
        f'"""Probe mined from the agent trace: {script.path} as the agent last wrote and ran it."""\n'
        "import sys\n\n"
        f"SCRIPT_PATH = {script.path!r}\n"
        f"SCRIPT = {script.content!r}\n"
        'CODE = compile(SCRIPT, SCRIPT_PATH, "exec")\n\n\n'
        "def test_agent_script():\n"
        '    namespace = {"__name__": "__main__", "__file__": SCRIPT_PATH}\n'
        "    argv = sys.argv\n"
        "    sys.argv = [SCRIPT_PATH]\n"
        "    try:\n"
        "        exec(CODE, namespace)\n"
        "    except SystemExit as exit_:\n"
        "        if exit_.code not in (None, 0):\n"
        '            raise AssertionError("the script exited with status %r" % (exit_.code,))\n'
        "    finally:\n"
        "        sys.argv = argv\n"
    )


def probe_file_name(script_path: str) -> str:
    stem = re.sub(r"\W+", "_", PurePosixPath(script_path).with_suffix("").as_posix()).strip("_")
    return f"test_cascade_trace_{stem}.py"


class TraceProbeSource:
    """Reproduction scripts from the agent trace, one pytest probe each; one round (nothing to repair)."""

    @property
    def name(self) -> ProbeOrigin:
        return "trace"

    is_pr_code = False

    @property
    def max_rounds(self) -> int:
        return 1

    def available(self, ctx: ReviewContext) -> str | None:
        if ctx.request.trace is None or not ctx.request.trace.steps:
            return "no agent trace given"
        if not mine_scripts(ctx.request.trace):
            return "the trace has no script that the agent created and ran"
        return None

    def propose(self, ctx: ReviewContext, feedback: list[ProbeFeedback]) -> list[ProbeCandidate]:
        trace = ctx.request.trace
        if trace is None:
            return []
        return [
            ProbeCandidate(
                origin="trace",
                name=script.path,
                path=probe_file_name(script.path),
                content=script_as_pytest(script),
                may_accept=False,
            )
            for script in minable_scripts(trace, {f.path for f in ctx.patch.files})
        ]
