"""Probes mined from the agent trace: the reproduction scripts the agent wrote and ran (design §3, Stage 2 (b)).

SWE-agent writes files with ``create FILE`` and ``edit N:M`` … ``end_of_edit`` commands on the open file (set by
``create``/``open``), and runs them with ``python FILE``. The final text of a script is only known by replaying those
edits; an edit the tool refused (its lint found a syntax error) is not applied. Each script the agent ran becomes a
pytest file that executes it: an uncaught exception, a failing assert or a non-zero ``sys.exit`` is a behavioural
failure, a missing module a setup error. Such probes share the agent's blind spots: they may reject, never accept.
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field

from cascade.context import ReviewContext
from cascade.execution.probe import ProbeCandidate, ProbeFeedback, ProbeOrigin
from cascade.models import Trace

_REFUSED_EDIT = ("Your proposed edit has introduced new syntax error", "Your changes have not been applied")
_FILE_HEADER = re.compile(r"^\[File: (?P<path>.+?) \((?P<lines>\d+) lines total\)\]")  # the tool's own output header
_EDIT_RANGE = re.compile(r"^edit\s+(?P<start>\d+):(?P<end>\d+)\s*$")
_MAX_SCRIPT_CHARS = 50_000


class MinedScript(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str = Field(description="Path relative to the repository root, as the agent named it.")
    content: str
    runs: int = Field(description="How many times the agent ran it with python.")
    consistent: bool = Field(description="False when a replayed edit's line count disagreed with the tool's output.")


class _Replay:
    """The state of the files the agent created, rebuilt command by command."""

    def __init__(self) -> None:
        self.files: dict[str, list[str]] = {}
        self.runs: dict[str, int] = {}
        self.consistent: dict[str, bool] = {}
        self.open_file: str | None = None

    def step(self, action: str, observation: str) -> None:
        first, _, body = action.partition("\n")
        words = _split(first)
        if not words:
            return
        command = words[0]
        if command == "create" and len(words) > 1:
            self._create(normalise_path(words[1]))
        elif command == "open" and len(words) > 1:
            self.open_file = normalise_path(words[1])
        elif command == "edit":
            self._edit(first, body, observation)
        elif command in ("python", "python3"):
            self._run(words[1:])

    def _create(self, path: str) -> None:
        self.files[path] = [""]  # SWE-agent's create leaves one empty line
        self.consistent[path] = True
        self.open_file = path

    def _edit(self, first: str, body: str, observation: str) -> None:
        match = _EDIT_RANGE.match(first.strip())
        path = self.open_file
        if match is None or path is None or path not in self.files or observation.startswith(_REFUSED_EDIT):
            return
        replacement = _edit_text(body)
        start, end = int(match["start"]), int(match["end"])
        lines = self.files[path]
        self.files[path] = lines[: start - 1] + replacement + lines[end:]
        header = _FILE_HEADER.match(observation.strip())
        if header is not None and int(header["lines"]) != len(self.files[path]):
            self.consistent[path] = False

    def _run(self, args: list[str]) -> None:
        script = next((a for a in args if a.endswith(".py")), None)
        if script is not None:
            path = normalise_path(script)
            self.runs[path] = self.runs.get(path, 0) + 1


def _split(line: str) -> list[str]:
    try:
        return shlex.split(line)
    except ValueError:
        return line.split()


def _edit_text(body: str) -> list[str]:
    lines = body.split("\n")
    if "end_of_edit" in (line.strip() for line in lines):
        lines = lines[: [line.strip() for line in lines].index("end_of_edit")]
    return lines


def normalise_path(path: str) -> str:
    """Repository-relative path: drop './' and the agent's checkout root (e.g. /sympy__sympy/ or sympy__sympy/)."""
    parts = [p for p in PurePosixPath(path).parts if p not in ("/", ".")]
    if parts and "__" in parts[0] and len(parts) > 1:
        parts = parts[1:]
    return "/".join(parts)


def mine_scripts(trace: Trace) -> list[MinedScript]:
    """Scripts the agent created and ran at least once, with their final replayed text."""
    replay = _Replay()
    for step in trace.steps:
        replay.step(step.action, step.observation)
    scripts: list[MinedScript] = []
    for path, lines in replay.files.items():
        content = "\n".join(lines).rstrip("\n") + "\n"
        if path.endswith(".py") and replay.runs.get(path) and content.strip() and len(content) <= _MAX_SCRIPT_CHARS:
            scripts.append(
                MinedScript(path=path, content=content, runs=replay.runs[path], consistent=replay.consistent[path])
            )
    return scripts


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
        patched_paths = {f.path for f in ctx.patch.files}
        return [
            ProbeCandidate(
                origin="trace",
                name=script.path,
                path=probe_file_name(script.path),
                content=script_as_pytest(script),
                may_accept=False,
            )
            for script in mine_scripts(trace)
            if script.consistent and script.path not in patched_paths
        ]
