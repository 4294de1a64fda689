"""Probes from the issue text: its code blocks and ``>>>`` sessions, run as the issue shows them (README, How it
decides).

A candidate is kept only when the base tree fails *the way the issue says*: it raises an exception whose type (and
message fragment) the issue's traceback or error text shows, or — for a ``>>>`` session — it prints exactly the
outputs the issue shows and calls wrong. The generated pytest file encodes that signature, so Stage 2's ordinary
judging applies: the test fails behaviourally iff the issue's failure reproduces. Any *other* exception skips the
test (the example fails differently: no verdict either way). On the patched tree the same failure rejects; no failure
is evidence only (``may_accept=False``): a reproducer is the issue's example, not its specification.

Extraction is pure (``extract_examples``: issue text → pydantic ``IssueExample``s); ``example_as_pytest`` renders
one as a pytest file that must run on the old interpreters of the repositories (3.6+).
"""

from __future__ import annotations

import ast
import builtins
import doctest
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cascade.context import ReviewContext
from cascade.probesources.base import ProbeCandidate, ProbeFeedback, ProbeOrigin

MAX_CANDIDATES = 4
MAX_BLOCK_LINES = 150
_FENCE = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n(.*?)^[ \t]*\1[ \t]*$", re.DOTALL | re.MULTILINE)
_EXCEPTION_LINE = re.compile(
    r"^(?:E\s+)?(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Failed|Failure|Fault|Exit))\b(?::[ \t]*(?P<msg>.*))?$"
)
_TRACEBACK = "Traceback (most recent call last)"
# The sandbox has no network: an example failing for lack of it says nothing about the code.
NETWORK_EXCEPTIONS = frozenset(
    {
        "ConnectionError", "ConnectionRefusedError", "ConnectionResetError", "ConnectTimeout", "gaierror",
        "MaxRetryError", "NewConnectionError", "ProxyError", "ReadTimeout", "SSLError", "Timeout", "TimeoutError",
        "URLError", "timeout",
    }
)  # fmt: skip
_NOT_A_SIGNATURE = frozenset({"KeyboardInterrupt", "SystemExit", "GeneratorExit", "StopIteration"})
_IPYTHON_IN = re.compile(r"^(\s*)In \[\d+\]: ?", re.MULTILINE)
_IPYTHON_CONT = re.compile(r"^(\s*)\.\.\.+: ?", re.MULTILINE)
_IPYTHON_OUT = re.compile(r"^(\s*)Out\[\d+\]: ?", re.MULTILINE)
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
FRAGMENT_CHARS = 40


class FailureSignature(BaseModel):
    """An exception the issue shows: its type name and the start of its message (whitespace-normalised)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    exception: str = Field(description="Exception class name (last dotted part), e.g. 'TypeError'.")
    fragment: str = Field(default="", description="Stable start of the message; empty = any message.")


class ExampleStep(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str
    shown_output: str | None = Field(default=None, description="What the issue shows this step printing, if any.")


class IssueExample(BaseModel):
    """One runnable example from the issue and the failure that makes it a reproducer."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["code_block", "session"]
    steps: list[ExampleStep]
    signatures: list[FailureSignature] = Field(description="Exceptions the issue shows; any one reproduces it.")
    check_output: bool = Field(
        description="Session only: base must print exactly the shown outputs (the issue shows them as wrong)."
    )


def normalise(text: str) -> str:
    return " ".join(text.split())


def _signature(type_name: str, message: str) -> FailureSignature | None:
    name = type_name.rsplit(".", 1)[-1]
    if name in NETWORK_EXCEPTIONS or name in _NOT_A_SIGNATURE or name.endswith("Warning"):
        return None
    message = normalise(message)
    address = _ADDRESS.search(message)
    if address is not None:
        message = message[: address.start()]
    return FailureSignature(exception=name, fragment=message[:FRAGMENT_CHARS].strip())


_QUOTED_ERROR = re.compile(r"[`\"'](?P<type>[A-Za-z_][\w.]*(?:Error|Exception)): (?P<msg>[^`\"'\n]+)[`\"']")


def signatures_in(text: str) -> list[FailureSignature]:
    """Exceptions the issue shows: the line closing a traceback ('Traceback (most recent call last)' before it),
    pytest's ``E`` lines, any exception line of a fenced output block (not code), and quoted ``Type: message``."""
    found: list[FailureSignature] = []
    for match in _QUOTED_ERROR.finditer(text):
        sig = _signature(match["type"], match["msg"])
        if sig is not None and sig not in found:
            found.append(sig)
    outputs = [m.group(2) for m in _FENCE.finditer(text) if not _parses(m.group(2))]
    for block in outputs:
        for raw in block.splitlines():
            match = _EXCEPTION_LINE.match(raw.strip())
            sig = _signature(match["type"], match["msg"] or "") if match else None
            if sig is not None and sig not in found:
                found.append(sig)
    in_traceback = False
    for raw in text.splitlines():
        line = raw.strip()
        if _TRACEBACK in line:
            in_traceback = True
            continue
        match = _EXCEPTION_LINE.match(line)
        if match and (in_traceback or line.startswith("E ")):
            sig = _signature(match["type"], match["msg"] or "")
            if sig is not None and sig not in found:
                found.append(sig)
            in_traceback = False
    return found


def _ipython_as_doctest(text: str) -> str:
    text = _IPYTHON_IN.sub(r"\1>>> ", text)
    text = _IPYTHON_CONT.sub(r"\1... ", text)
    return _IPYTHON_OUT.sub(r"\1", text)


def _session(text: str) -> list[doctest.Example]:
    try:
        return doctest.DocTestParser().get_examples(_ipython_as_doctest(text))
    except ValueError:  # inconsistent indentation and the like: not a usable session
        return []


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


_WRONG_WORDS = re.compile(
    r"\b(wrong|incorrect|should|expected|instead|but|bug|not|isn't|doesn't|gives?|returns?)\b", re.IGNORECASE
)


def _session_example(examples: list[doctest.Example], context: str, issue_sigs: list[FailureSignature]) -> IssueExample:
    steps: list[ExampleStep] = []
    sigs = list(issue_sigs)
    for ex in examples:
        if ex.exc_msg is not None:
            match = _EXCEPTION_LINE.match(ex.want.strip().splitlines()[-1].strip())
            sig = _signature(match["type"], match["msg"] or "") if match else None
            if sig is not None and sig not in sigs:
                sigs.append(sig)
            steps.append(ExampleStep(source=ex.source))
        else:
            steps.append(ExampleStep(source=ex.source, shown_output=ex.want or None))
    shows_output = any(s.shown_output for s in steps)
    return IssueExample(
        kind="session", steps=steps, signatures=sigs, check_output=shows_output and bool(_WRONG_WORDS.search(context))
    )


def _regions(text: str) -> list[tuple[str, str, bool]]:
    """(content, surrounding text, fenced) for each fenced block, and for the prose between blocks."""
    regions: list[tuple[str, str, bool]] = []
    last = 0
    for match in _FENCE.finditer(text):
        before = text[last : match.start()]
        regions.append((before, before, False))
        after = text[match.end() : match.end() + 400]
        regions.append((match.group(2), before[-400:] + "\n" + after, True))
        last = match.end()
    regions.append((text[last:], text[last:], False))
    return regions


def extract_examples(issue_text: str) -> list[IssueExample]:
    """Runnable examples of the issue, each with the failure signatures that would make it a reproducer."""
    issue_text = issue_text.replace("\r\n", "\n").replace("\r", "\n")
    issue_sigs = signatures_in(issue_text)
    examples: list[IssueExample] = []
    seen: set[str] = set()
    for content, context, fenced in _regions(issue_text):
        session = _session(content)
        if session:
            example = _session_example(session, context, issue_sigs)
        elif fenced and _is_script(content):
            example = IssueExample(kind="code_block", steps=[ExampleStep(source=content)], signatures=issue_sigs,
                                   check_output=False)  # fmt: skip
        else:
            continue
        key = "\n".join(s.source for s in example.steps)
        if key in seen or not (example.signatures or example.check_output):
            continue
        seen.add(key)
        examples.append(example)
    return examples


def _is_script(content: str) -> bool:
    lines = content.strip().splitlines()
    if not lines or len(lines) > MAX_BLOCK_LINES or _TRACEBACK in content:
        return False
    if not _parses(content):
        return False
    tree = ast.parse(content)
    # A lone expression or name is usually output or a repr shown in the issue, not a program.
    return any(not isinstance(node, ast.Expr) or isinstance(node.value, ast.Call) for node in tree.body)


_RUNTIME = '''\
import io
import sys

import pytest

KIND = {kind!r}
PRELUDE = {prelude!r}
STEPS = {steps!r}
SIGNATURES = {signatures!r}
CHECK_OUTPUT = {check_output!r}


def _norm(text):
    return " ".join(text.split())


def _issue_failure(exc):
    names = [cls.__name__ for cls in type(exc).__mro__]
    message = _norm(str(exc))
    for name, fragment in SIGNATURES:
        if name in names and (not fragment or fragment in message):
            return True
    return False


def _run_block(source, namespace):
    """Run a code block as a notebook cell: a last bare expression is displayed (repr, then rich formatters)."""
    import ast

    tree = ast.parse(source)
    last = tree.body[-1] if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = tree.body[:-1] if last is not None else tree.body
    exec(compile(ast.Module(body=body, type_ignores=[]), "<issue example>", "exec"), namespace)
    if last is not None:
        value = eval(compile(ast.Expression(body=last.value), "<issue example>", "eval"), namespace)
        repr(value)
        for method in ("_repr_png_", "_repr_html_"):
            if callable(getattr(value, method, None)) and not isinstance(value, type):
                getattr(value, method)()


def test_issue_example():
    namespace = {{"__name__": "__main__"}}
    try:
        exec(compile(PRELUDE, "<conventional imports>", "exec"), namespace)
    except Exception as exc:
        pytest.skip("the example's conventional imports fail: %s: %s" % (type(exc).__name__, exc))
    shown, printed = [], []
    for source, want in STEPS:
        buffer = io.StringIO()
        stdout = sys.stdout
        sys.stdout = buffer
        try:
            if KIND == "session":
                exec(compile(source, "<issue example>", "single"), namespace)
            else:
                _run_block(source, namespace)
        except Exception as exc:
            sys.stdout = stdout
            what = "%s: %s" % (type(exc).__name__, _norm(str(exc))[:300])
            if _issue_failure(exc):
                raise AssertionError("the issue's failure reproduces: " + what)
            pytest.skip("the example fails differently from the issue: " + what)
        finally:
            sys.stdout = stdout
        if want is not None:
            shown.append(_norm(want))
            printed.append(_norm(buffer.getvalue()))
    if CHECK_OUTPUT and shown and shown == printed:
        raise AssertionError("the example prints what the issue shows as wrong: %r" % (printed,))
'''


# Names issues use without importing them, by long-standing convention.
CONVENTIONAL_IMPORTS = {
    "np": "import numpy as np",
    "pd": "import pandas as pd",
    "xr": "import xarray as xr",
    "plt": "import matplotlib.pyplot as plt",
    "mpl": "import matplotlib as mpl",
    "sns": "import seaborn as sns",
    "so": "import seaborn.objects as so",
    "da": "import dask.array as da",
    "u": "import astropy.units as u",
}
# sympy's issues (like its docs) assume an isympy session.
ISYMPY = (
    "from sympy import *\n"
    "x, y, z, t = symbols('x y z t')\n"
    "k, m, n = symbols('k m n', integer=True)\n"
    "f, g, h = symbols('f g h', cls=Function)\n"
)


def _names(example: IssueExample) -> tuple[set[str], set[str]]:
    """Names the example reads, and names it binds (assignments, imports, defs), over all its steps."""
    used: set[str] = set()
    bound: set[str] = set()
    for step in example.steps:
        try:
            tree = ast.parse(step.source)
        except (SyntaxError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
    return used, bound


def prelude_for(example: IssueExample, sympy: bool = False) -> str:
    """Imports for the conventional names the example reads without binding (isympy's session for sympy)."""
    used, bound = _names(example)
    free = used - bound - set(dir(builtins))
    lines = [CONVENTIONAL_IMPORTS[n] for n in sorted(free) if n in CONVENTIONAL_IMPORTS]
    if sympy and free - set(CONVENTIONAL_IMPORTS):
        lines.append(ISYMPY)
    return "\n".join(lines) + ("\n" if lines else "")


def example_as_pytest(example: IssueExample, sympy: bool = False) -> str:
    """A pytest file whose one test fails behaviourally iff the example fails the way the issue says."""
    header = '"""Probe from the issue text: its example, judged by the failure the issue shows."""\n'
    return header + _RUNTIME.format(
        kind=example.kind,
        steps=[(s.source, s.shown_output) for s in example.steps],
        signatures=[(s.exception, s.fragment) for s in example.signatures],
        check_output=example.check_output,
        prelude=prelude_for(example, sympy),
    )


class IssueProbeSource:
    """The issue's own examples, one pytest probe each; one round (nothing to repair), never accepts."""

    @property
    def name(self) -> ProbeOrigin:
        return "issue"

    is_pr_code = False

    @property
    def max_rounds(self) -> int:
        return 1

    def available(self, ctx: ReviewContext) -> str | None:
        if not (ctx.request.issue_text or "").strip():
            return "no issue text"
        if not extract_examples(ctx.request.issue_text or ""):
            return "the issue shows no runnable example with a failure to reproduce"
        return None

    def propose(self, ctx: ReviewContext, feedback: list[ProbeFeedback]) -> list[ProbeCandidate]:
        examples = extract_examples(ctx.request.issue_text or "")[:MAX_CANDIDATES]
        ws = ctx.workspace
        sympy = ws is not None and (Path(ws.base_dir) / "sympy" / "__init__.py").is_file()
        return [
            ProbeCandidate(
                origin="issue",
                name=f"issue-{ex.kind}-{i}",
                path=f"test_cascade_issue_{i}.py",
                content=example_as_pytest(ex, sympy),
                may_accept=False,
            )
            for i, ex in enumerate(examples, 1)
        ]
