"""Stage 2 — probes and regressions, executed in a sandbox (design §3 Stage 2, Safety; §5).

* Regression: existing tests near the change run on both trees (with the PR's own version of any test file it
  modifies); a test that passes on base and fails on the patch, twice, is patch-caused. Crash-class → reject;
  assertion-class → grounded evidence only (correct fixes often break a test that pinned the old behaviour).
* Probes: each source's candidates run on base; a candidate is kept only for its tests that fail *behaviourally*
  there, and only if its run on the patched tree executes a line the patch changed (coverage.py). A kept probe that
  still fails on the patch rejects; one that passes is evidence (or supports an accept under ``probe_pass: accept``
  when its source is independent: mined and PR probes never accept).
* Side effects: any harmful effect outside the worktree in any run rejects, with the records as evidence.
* No environment (no sandbox, dependencies fail to install) → ``skipped`` with the reason.
"""

from __future__ import annotations

import ast
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any

from cascade.config import CascadeConfig
from cascade.context import ReviewContext
from cascade.errors import CascadeError
from cascade.execution.envs import (
    Environment,
    EnvSpec,
    current_environment,
    ensure_environment,
)
from cascade.execution.probe import ProbeCandidate, ProbeFeedback, ProbeSource
from cascade.execution.runner import WORK_DIR, PytestRun, TestResult, executed_lines, run_pytest
from cascade.execution.test_selection import SelectedTests, changed_functions, chunked, select_tests
from cascade.models import Evidence, EvidenceKind, FileKind, Outcome, StageResult
from cascade.probesources import PrTestProbeSource, TraceProbeSource
from cascade.probesources.generated import GeneratedProbeSource, llm_accounting
from cascade.probesources.issue import IssueProbeSource
from cascade.sandbox.base import RunResult, Sandbox, SideEffect
from cascade.sandbox.select import get_sandbox
from cascade.workspace import git

MAX_REGRESSION_FILES = 2  # nearby test files per review (name-mapped first): each runs on both trees
MAX_KEPT_TESTS = 5  # per probe file: each kept test runs alone on the patched tree (per-test coverage)
EXCERPT = 1500
MIN_CHUNK_SECONDS = 10  # a wider regression chunk is started only with this much of its budget left


# ----------------------------------------------------------------------------------------------------------------
# Setup: sandbox and environment


def make_sandbox(config: CascadeConfig) -> Sandbox:
    """The configured backend via the sandbox package's selector; CascadeError when none is usable."""
    sandbox = get_sandbox(config.sandbox)
    reason = sandbox.available()
    if reason:
        raise CascadeError(f"sandbox '{sandbox.isolation}' unavailable: {reason}")
    return sandbox


def make_environment(ctx: ReviewContext, base_dir: Path) -> Environment:
    cfg = ctx.config.env
    if cfg.use_current_interpreter:
        return current_environment()
    spec = EnvSpec(
        repo=Path(ctx.request.repo).name,
        python=cfg.python or sys.executable,
        packages=list(cfg.packages),
        install_project=cfg.install_project,
        extras=list(cfg.extras),
    )
    cache = Path(cfg.cache_dir).expanduser() if cfg.cache_dir else None
    return ensure_environment(spec, project_tree=base_dir, cache_dir=cache, timeout=cfg.setup_timeout_seconds)


# ----------------------------------------------------------------------------------------------------------------
# What the patch changed


def module_of(path: str) -> str | None:
    """Dotted module name of a repository-relative Python path (src/ layout aware)."""
    if not path.endswith(".py"):
        return None
    parts = list(PurePosixPath(path).with_suffix("").parts)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) or None


def _definition_lines(source: str) -> set[int]:
    """Lines that merely run at import (def/class headers, decorators, imports): executing them says nothing."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            lines.update(range(min([node.lineno, *(d.lineno for d in node.decorator_list)]), node.body[0].lineno))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def changed_lines(ctx: ReviewContext, tree: Path) -> dict[Path, set[int]]:
    """Per changed code file of the patched tree, the lines whose execution makes a probe relevant.

    Added lines of each hunk; for a hunk that only deletes, the lines around the deletion (its context). Lines that
    only define (def/class headers, imports) are dropped unless nothing else is left.
    """
    result: dict[Path, set[int]] = {}
    for f in ctx.patch.files:
        if f.kind != FileKind.CODE or not f.is_python or f.is_removed or f.target_path is None:
            continue
        lines: set[int] = set()
        for h in f.hunks:
            lines.update(h.changed_target_lines or range(h.target_start, h.target_start + h.target_length))
        path = tree / f.target_path
        if not lines or not path.is_file():
            continue
        meaningful = lines - _definition_lines(path.read_text(encoding="utf-8", errors="replace"))
        result[path] = meaningful or lines
    return result


# ----------------------------------------------------------------------------------------------------------------
# Regression test selection


def _imports_module(source: str, module: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(_within(a.name, module) for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if _within(node.module, module):
                return True
            if any(f"{node.module}.{a.name}" == module for a in node.names):
                return True
    return False


def _within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def _is_test_file(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))


def _proximity(test_path: str, changed: list[str]) -> int:
    """Longer shared directory prefix with a changed file = nearer."""
    parts = PurePosixPath(test_path).parts
    best = 0
    for c in changed:
        shared = 0
        for a, b in zip(parts, PurePosixPath(c).parts, strict=False):
            if a != b:
                break
            shared += 1
        best = max(best, shared)
    return best


def select_regression_tests(ctx: ReviewContext, tree: Path, limit: int = MAX_REGRESSION_FILES) -> list[str]:
    """Existing test files near the change: mapped by name (``test_<module>.py``) first, then importers."""
    code = [f.path for f in ctx.patch.files if f.kind == FileKind.CODE and f.is_python and f.source_path]
    modules = {m for m in (module_of(p) for p in code) if m}
    if not modules:
        return []
    removed = {f.path for f in ctx.patch.files if f.is_removed}
    tracked = [p for p in git(tree, "ls-files", "--", "*.py").splitlines() if _is_test_file(p) and p not in removed]
    leaves = {m.rsplit(".", 1)[-1] for m in modules}
    stems = {f"test_{x}" for x in leaves} | {f"{x}_test" for x in leaves}
    by_name = [p for p in tracked if PurePosixPath(p).stem in stems]
    importers = [p for p in tracked if p not in by_name and _imports_any(tree / p, modules, leaves)]
    ranked = sorted(by_name, key=lambda p: -_proximity(p, code)) + sorted(importers, key=lambda p: -_proximity(p, code))
    return ranked[:limit]


def wider_regression_selection(ctx: ReviewContext, base: Path, patched: Path, exclude: set[str]) -> list[SelectedTests]:
    """Beyond the nearby files: importers, tests named after changed functions, one-hop importers (issue 15)."""
    code = [f for f in ctx.patch.files if f.kind == FileKind.CODE and f.is_python and f.source_path]
    functions: set[str] = set()
    for f in code:
        lines = {n for h in f.hunks for n in (h.changed_target_lines or [h.target_start])}
        path = patched / (f.target_path or f.path)
        if path.is_file():
            functions |= changed_functions(path.read_text(encoding="utf-8", errors="replace"), lines)
    removed = {f.path for f in ctx.patch.files if f.is_removed}
    tracked = git(base, "ls-files", "--", "*.py").splitlines()
    selection = select_tests(base, tracked, [f.path for f in code], functions, exclude=exclude | removed)
    return [s for s in selection if s.target not in exclude]


def _imports_any(path: Path, modules: set[str], leaves: set[str]) -> bool:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if not any(leaf in text for leaf in leaves):  # cheap filter before parsing
        return False
    return any(_imports_module(text, m) for m in modules)


# ----------------------------------------------------------------------------------------------------------------
# The stage


@contextmanager
def placed(tree: Path, rel: str, content: str) -> Iterator[None]:
    """Write ``content`` at ``tree/rel`` for the duration, then restore what was there (or remove it)."""
    path = tree / rel
    before = path.read_bytes() if path.is_file() else None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def _short(text: str) -> str:
    return text if len(text) <= EXCERPT else "…" + text[-EXCERPT:]


class _Session:
    """One Stage-2 run: the trees, sandbox and environment, and the evidence gathered so far."""

    def __init__(self, ctx: ReviewContext, sandbox: Sandbox, env: Environment, base: Path, patched: Path) -> None:
        self.ctx, self.sandbox, self.env = ctx, sandbox, env
        self.base, self.patched = base, patched
        self.evidence: list[Evidence] = []
        self.rejects: list[str] = []
        self.accepts: list[str] = []
        self.side_effects: list[SideEffect] = []
        self._runs = 0
        self.changed = changed_lines(ctx, patched)

    # -- running ---------------------------------------------------------------------------------------------------

    def pytest(
        self,
        tree: Path,
        targets: list[str],
        coverage: bool = False,
        whole_files: bool = False,
        timeout: float | None = None,
    ) -> PytestRun:
        """One sandboxed run. Whole nearby test files get the sandbox's wall time; a probe gets the probe timeout."""
        self._runs += 1
        side = "base" if tree == self.base else "patched"
        cfg = self.ctx.config
        run = run_pytest(
            self.sandbox,
            self.env,
            tree,
            targets,
            tag=f"{side}-{self._runs}",
            timeout_seconds=timeout or (cfg.sandbox.timeout_seconds if whole_files else cfg.stage2.timeout_seconds),
            limits={
                "memory_mb": cfg.sandbox.memory_mb,
                "cpu_seconds": cfg.sandbox.cpu_seconds,
                "file_size_mb": cfg.sandbox.file_size_mb,
                "pids": cfg.sandbox.pids,
            },
            coverage_include=[str(p) for p in self.changed] if coverage else None,
        )
        self._note_side_effects(run.result, tree)
        return run

    def _note_side_effects(self, result: RunResult, tree: Path) -> None:
        root = str(tree)
        for effect in result.side_effects:
            if effect.benign or effect.target == root or effect.target.startswith(root + "/"):
                continue
            self.side_effects.append(effect)

    # -- regression --------------------------------------------------------------------------------------------------

    def regression(self, max_files: int) -> None:
        """The nearby files first (as Stage 2 always did), then the wider selection in chunks under the budget."""
        files = select_regression_tests(self.ctx, self.base, max_files)
        if not files:
            self._info("regression: no existing test file near the change")
            return
        wider = wider_regression_selection(self.ctx, self.base, self.patched, exclude=set(files))
        reasons = {s.target: s.reason for s in wider}
        cfg = self.ctx.config.stage2
        self._regression_chunk(files, 0, None, reasons)
        started = time.perf_counter()
        chunks = chunked(wider)
        for index, chunk in enumerate(chunks, 1):
            if self.rejects and not cfg.exhaustive:
                return
            remaining = cfg.regression_budget_seconds - (time.perf_counter() - started)
            if remaining < MIN_CHUNK_SECONDS:
                left = sum(len(c) for c in chunks[index - 1 :])
                self._info(f"regression: budget of {cfg.regression_budget_seconds:g} s spent; {left} target(s) not run")
                return
            self._regression_chunk(chunk, index, remaining / 2, reasons)

    def _regression_chunk(self, targets: list[str], index: int, timeout: float | None, reasons: dict[str, str]) -> None:
        modified = {f.path for f in self.ctx.patch.files if f.kind == FileKind.TEST and not f.is_removed}
        files = {t.split("::", 1)[0] for t in targets}
        with _pr_versions_on_base(self.base, self.patched, sorted(files & modified)):
            base_run = self.pytest(self.base, targets, whole_files=True, timeout=timeout)
            patched_run = self.pytest(self.patched, targets, whole_files=True, timeout=timeout)
            if base_run.run_error or patched_run.run_error:
                why = base_run.run_error or patched_run.run_error
                self._info(f"regression check inconclusive on {', '.join(targets)}: {why}", base_run, patched_run)
                return
            suspects = _broken_tests(base_run, patched_run)
            confirmed = self._confirm(suspects) if suspects else []
        known = {e.details.get("test_id") for e in self.evidence if e.kind == EvidenceKind.REGRESSION}
        confirmed = [t for t in confirmed if t.test_id not in known]  # a file of a later chunk may re-run a test
        for test in confirmed:
            selected_by = next((r for t, r in reasons.items() if test.test_id.startswith(t)), "name_or_import")
            self._regression_evidence(test, base_run, patched_run, {"selected_by": selected_by, "chunk": index})
        if not confirmed:
            passed = sum(1 for t in base_run.tests if t.status == "pass")
            where = ", ".join(targets)
            self._info(f"regression: {passed} nearby test(s) passing on base still pass on the patch ({where})")

    def _confirm(self, suspects: list[TestResult]) -> list[TestResult]:
        """Re-run each suspect once on both trees: it must pass on base and fail the same way on the patch again."""
        ids = [t.test_id for t in suspects]
        base_again = self.pytest(self.base, ids)
        patched_again = self.pytest(self.patched, ids)
        base_ids, patched_ids = base_again.by_id(), patched_again.by_id()
        confirmed: list[TestResult] = []
        for test in suspects:
            again = patched_ids.get(test.test_id)
            if test.reason == "collection error":
                if _is_collection_error(again) and _collected_and_passed(base_again.tests, test.test_id):
                    confirmed.append(test)
            elif _passed(base_ids.get(test.test_id)) and again is not None and again.status == test.status:
                confirmed.append(again)
        return confirmed

    def _regression_evidence(
        self, test: TestResult, base_run: PytestRun, patched_run: PytestRun, selection: dict[str, Any]
    ) -> None:
        crash = test.failure_class == "crash"
        what = test.exception or test.reason
        if crash:
            summary = f"nearby test {test.test_id} passes on base but fails on the patch with {what} (crash-class)"
            self.rejects.append(summary)
        else:
            summary = (
                f"nearby test {test.test_id} passes on base but fails on the patch with an assertion "
                "(assertion-class: evidence for review, not a reject)"
            )
        self.evidence.append(
            Evidence(
                kind=EvidenceKind.REGRESSION,
                grounded=True,
                summary=summary,
                details={
                    "test_id": test.test_id,
                    "class": "crash" if crash else "assertion",
                    "exception": test.exception,
                    "expected_vs_got": test.message,
                    "log_excerpt": _short(test.excerpt),
                    "confirmed_by_rerun": True,
                    "source": "regression",
                    "verdict": "reject" if crash else "evidence",
                    **selection,
                },
                commands=[f"cd <base> && {base_run.command}", f"cd <patched> && {patched_run.command}"],
            )
        )

    # -- probes ------------------------------------------------------------------------------------------------------

    def probes(self, sources: Sequence[ProbeSource]) -> None:
        for source in sources:
            why_not = source.available(self.ctx)
            if why_not:
                self._info(f"probe source '{source.name}' not used: {why_not}")
                continue
            self._run_source(source)
            if self.rejects and not self.ctx.config.stage2.exhaustive:
                return

    def _run_source(self, source: ProbeSource) -> None:
        feedback: list[ProbeFeedback] = []
        for _ in range(max(1, source.max_rounds)):
            candidates = source.propose(self.ctx, feedback)
            if not candidates:
                return
            feedback = [self._try_candidate(c) for c in candidates]
            stop = self.rejects and not self.ctx.config.stage2.exhaustive
            if stop or all(f.outcome == "behavioural_fail" for f in feedback):
                return

    def _try_candidate(self, cand: ProbeCandidate) -> ProbeFeedback:
        with placed(self.base, cand.path, cand.content):
            base_run = self.pytest(self.base, [cand.path])
        tests = [t for t in base_run.tests if t.test_id.startswith(cand.path)] or base_run.tests
        if cand.origin == "pr_tests":
            tests = self._tests_the_pr_touched(cand.path, tests)
        kept = [t for t in tests if t.status == "behavioural_fail"][:MAX_KEPT_TESTS]
        if base_run.run_error or not kept:
            return self._not_kept(cand, base_run, tests)
        self._info(f"probe {cand.name} ({cand.origin}): {len(kept)} test(s) fail behaviourally on base", base_run)
        with placed(self.patched, cand.path, cand.content):
            for test in kept:
                self._judge_on_patched(cand, test, base_run)
        return ProbeFeedback(candidate=cand, outcome="behavioural_fail", message="kept: fails behaviourally on base")

    def _tests_the_pr_touched(self, path: str, tests: list[TestResult]) -> list[TestResult]:
        """Only the tests whose definition the PR added or changed (plus file-level errors, e.g. collection): an old
        test that already failed on base (for reasons of the environment) is not the PR's probe."""
        changed = {n for f in self.ctx.patch.files if f.path == path for h in f.hunks for n in h.changed_target_lines}
        touched = touched_test_names((self.patched / path).read_text(encoding="utf-8", errors="replace"), changed)
        return [t for t in tests if "::" not in t.test_id or _test_name(t.test_id) in touched]

    def _not_kept(self, cand: ProbeCandidate, run: PytestRun, tests: list[TestResult]) -> ProbeFeedback:
        errors = [t for t in tests if t.status == "setup_error"]
        if run.run_error or errors or not tests:
            detail = run.run_error or (errors[0].reason if errors else "no test collected")
            excerpt = errors[0].excerpt if errors else run.log_excerpt()
            message = f"setup error on base ({detail}): {_short(excerpt)}"
            outcome = "setup_error"
        else:
            message, outcome = "passed on base: does not reproduce the issue", "pass"
        self._info(f"probe {cand.name} ({cand.origin}) not kept: {message.splitlines()[0]}", run)
        return ProbeFeedback(candidate=cand, outcome=outcome, message=message)

    def _judge_on_patched(self, cand: ProbeCandidate, base_test: TestResult, base_run: PytestRun) -> None:
        run = self.pytest(self.patched, [base_test.test_id], coverage=True)
        hit = {str(p): sorted(executed_lines(run, p) & lines) for p, lines in self.changed.items()}
        hit = {p: lines for p, lines in hit.items() if lines}
        rel_hit = {str(Path(p).relative_to(self.patched)): lines for p, lines in hit.items()}
        result = run.by_id().get(base_test.test_id)
        label = f"probe {base_test.test_id} ({cand.origin})"
        if not hit and self.ctx.config.stage2.require_coverage_of_change:
            status = result.status if result else run.run_error
            self._info(f"{label} discarded: its run on the patch executes no changed line (there: {status})", run)
            return
        if result is None or result.status in ("setup_error", "skipped") or run.run_error:
            why = run.run_error or (result.reason if result else "no result")
            self._info(f"{label} inconclusive on the patch: {why}", run)
            return
        details: dict[str, Any] = {
            "probe": cand.name,
            "origin": cand.origin,
            "test_id": base_test.test_id,
            "base": {"status": base_test.status, "message": base_test.message, "excerpt": _short(base_test.excerpt)},
            "patched": {"status": result.status, "message": result.message, "excerpt": _short(result.excerpt)},
            "executed_changed_lines": rel_hit,
            "probe_file": cand.content if len(cand.content) < 20_000 else cand.content[:20_000],
            "source": cand.origin,
            "verdict": "reject" if result.status == "behavioural_fail" else "evidence",
        }
        commands = [f"cd <base> && {base_run.command}", f"cd <patched> && {run.command}"]
        if result.status == "behavioural_fail":
            first = result.message.splitlines()[0] if result.message else result.reason
            summary = f"{label} fails on base and still fails on the patch: {first}"
            self.rejects.append(summary)
        else:
            summary = f"{label} fails on base and passes on the patch"
            if self.ctx.config.stage2.probe_pass == "accept" and cand.may_accept:
                self.accepts.append(summary)
        evidence = Evidence(kind=EvidenceKind.PROBE, grounded=True, summary=summary, details=details, commands=commands)
        self.evidence.append(evidence)

    # -- reporting ---------------------------------------------------------------------------------------------------

    def _info(self, summary: str, *runs: PytestRun) -> None:
        details: dict[str, Any] = {}
        if runs:
            details["commands"] = [r.command for r in runs]
            details["log_excerpt"] = _short(runs[-1].log_excerpt())
        self.evidence.append(Evidence(kind=EvidenceKind.INFO, grounded=False, summary=summary, details=details))

    def side_effect_evidence(self) -> None:
        if not self.side_effects:
            return
        records = [e.model_dump() for e in self.side_effects]
        summary = f"untrusted code had {len(records)} side effect(s) outside the worktree"
        self.rejects.insert(0, summary)
        self.evidence.append(
            Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=True, summary=summary, details={"side_effects": records})
        )

    def cleanup(self) -> None:
        for tree in (self.base, self.patched):
            shutil.rmtree(tree / WORK_DIR, ignore_errors=True)


@contextmanager
def _pr_versions_on_base(base: Path, patched: Path, paths: list[str]) -> Iterator[None]:
    """The PR's own version of each test file it modifies, on the base tree too, so both sides run the same tests."""
    with _placed_many(base, {p: (patched / p).read_text(encoding="utf-8", errors="replace") for p in paths}):
        yield


@contextmanager
def _placed_many(tree: Path, files: dict[str, str]) -> Iterator[None]:
    if not files:
        yield
        return
    rel, content = next(iter(files.items()))
    rest = {k: v for k, v in files.items() if k != rel}
    with placed(tree, rel, content), _placed_many(tree, rest):
        yield


def touched_test_names(source: str, lines: set[int]) -> set[str]:
    """Names ('test_x' or 'TestK::test_x') of test functions whose span contains one of ``lines``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        scopes = [(node, "")] if not isinstance(node, ast.ClassDef) else [(n, node.name + "::") for n in node.body]
        for fn, prefix in scopes:
            if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
                if any(start <= n <= (fn.end_lineno or fn.lineno) for n in lines):
                    names.add(prefix + fn.name)
    return names


def _test_name(test_id: str) -> str:
    """'path.py::TestK::test_x[1]' → 'TestK::test_x'."""
    return test_id.split("::", 1)[-1].split("[", 1)[0]


def _broken_tests(base_run: PytestRun, patched_run: PytestRun) -> list[TestResult]:
    """Tests passing on base that fail behaviourally on the patch, plus collection crashes of files that collected."""
    base = base_run.by_id()
    broken = [t for t in patched_run.tests if t.status == "behavioural_fail" and _passed(base.get(t.test_id))]
    for t in patched_run.tests:
        if _is_collection_error(t) and t.test_id not in base and _collected_and_passed(base_run.tests, t.test_id):
            broken.append(t.model_copy(update={"status": "behavioural_fail", "failure_class": "crash"}))
    return broken


def _is_collection_error(test: TestResult | None) -> bool:
    return test is not None and test.status == "setup_error" and test.reason == "collection error"


def _collected_and_passed(tests: list[TestResult], file: str) -> bool:
    """The file collected (no collection error of its own) and at least one of its tests passed."""
    mine = [t for t in tests if t.test_id == file or t.test_id.startswith(file + "::")]
    return not any(_is_collection_error(t) for t in mine) and any(t.status == "pass" for t in mine)


def _passed(test: TestResult | None) -> bool:
    return test is not None and test.status == "pass"


def default_probe_sources(config: CascadeConfig) -> list[ProbeSource]:
    """The mined sources the config enables (the LLM generator registers itself next to these)."""
    available: dict[str, ProbeSource] = {
        "generated": GeneratedProbeSource(config),  # issue 5: the LLM generator; says why not when no model
        "issue": IssueProbeSource(),
        "trace": TraceProbeSource(),
        "pr_tests": PrTestProbeSource(),
    }
    return [available[name] for name in config.stage2.sources if name in available]


class ProbesStage:
    name = "probes"
    title = "Stage 2 — probes and regressions"

    def __init__(
        self,
        sources: Sequence[ProbeSource] | None = None,
        sandbox: Sandbox | None = None,
        environment: Environment | None = None,
        max_regression_files: int = MAX_REGRESSION_FILES,
    ) -> None:
        self._sources = sources
        self._sandbox = sandbox
        self._environment = environment
        self.max_regression_files = max_regression_files

    def run(self, ctx: ReviewContext) -> StageResult:
        started = time.perf_counter()
        if ctx.workspace is None:
            return _skipped(self.name, ctx.unavailable_reason() or "repository unavailable")
        base, patched = Path(ctx.workspace.base_dir), Path(ctx.workspace.patched_dir)
        try:
            sandbox = self._sandbox or make_sandbox(ctx.config)
            env = self._environment or make_environment(ctx, base)
        except CascadeError as exc:
            return _skipped(self.name, f"no execution environment: {exc}")
        session = _Session(ctx, sandbox, env, base, patched)
        session.evidence.append(
            Evidence(
                kind=EvidenceKind.INFO,
                grounded=False,
                summary=f"ran in sandbox '{sandbox.isolation}' with {env.description}",
                details={"isolation": sandbox.isolation, "python": env.python_version},
            )
        )
        try:
            if ctx.config.stage2.regression:
                session.regression(self.max_regression_files)
            sources = self._sources if self._sources is not None else default_probe_sources(ctx.config)
            if not session.rejects or ctx.config.stage2.exhaustive:
                session.probes(sources)
        finally:
            session.cleanup()
        session.side_effect_evidence()
        llm_cost, llm_notes = llm_accounting(sources)  # issue 5: the generator's LLM cost and why it stopped
        session.evidence.extend(llm_notes)
        result = _decide(self.name, session, time.perf_counter() - started)
        result.cost = result.cost + llm_cost
        return result


def _skipped(stage: str, reason: str) -> StageResult:
    evidence = Evidence(kind=EvidenceKind.UNAVAILABLE, grounded=False, summary=reason)
    return StageResult(stage=stage, outcome=Outcome.SKIPPED, reason=reason, evidence=[evidence])


def _decide(stage: str, session: _Session, seconds: float) -> StageResult:
    if session.rejects:
        outcome, reason = Outcome.REJECT, session.rejects[0]
    elif session.accepts:
        outcome, reason = Outcome.ACCEPT, session.accepts[0]
    else:
        outcome = Outcome.PASS
        probes = sum(e.kind == EvidenceKind.PROBE for e in session.evidence)
        reason = f"no patch-caused failure found ({probes} probe result(s))"
    result = StageResult(stage=stage, outcome=outcome, reason=reason, evidence=session.evidence)
    result.cost.seconds = round(seconds, 3)
    return result
