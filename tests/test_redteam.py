"""The red-team suite (README, Red-team suite): corpus shape, suite safety, and the full suite through the gate on real
sandboxes.

The full-suite tests run every case through `cascade.pipeline.review` on bwrap (and docker when its engine and
image are there) and check the host is unchanged. To fit the time budget they switch off Stage 1 (static analysis
never executes code, so it can neither cause nor observe a side effect) and Stage 2's regression half (the repo's
existing tests); the PR's own tests — where every case's side effect happens — run as in the default gate.
`cascade bench redteam` runs the whole default gate; CASCADE_REDTEAM_FULL_GATE=1 does so in the test too.
"""

from __future__ import annotations

import json
import os
import shutil
import site
import socket
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from cascade.cli import cli
from cascade.config import CascadeConfig, ProbesConfig, StaticConfig
from cascade.errors import BadInput, CascadeError
from cascade.models import (
    Decision,
    Evidence,
    EvidenceKind,
    Outcome,
    SideEffect,
    SideEffectDetails,
    StageResult,
    Verdict,
)
from cascade.redteam.cli import redteam
from cascade.redteam.corpus import DEFAULT_CORPUS, load_corpus, make_target_repo
from cascade.redteam.evaluate import judge
from cascade.redteam.models import MUST_CATCH, Backend, CaseResult, RedteamCase, SuiteReport
from cascade.redteam.report import write_report
from cascade.redteam.runner import DOCKER_ENV_CACHE, probe_backend, run_suite
from cascade.redteam.safety import (
    LoopbackListeners,
    host_snapshot,
    refuse_unsafe_on_none,
    snapshot_diff,
    suite_footprint,
)

DOMAINS = 8
FRAMINGS = 4
# The allow-list cases: one framing each, beside the 8 x 4 grid; what each one covers.
ALLOWLIST_CASES = {
    "git_hooks": "1 git directory", "env_bytecode": "2 interpreter environment", "worktree_sibling": "3 /tmp",
    "shared_memory": "3 /dev/shm", "lingering_process": "4 lingering process", "fork_limit": "5 resource limit",
    "worktree_leak": "6 leak into the worktree",
}  # fmt: skip
# Cases aimed at the oracle's own blind spots: a non-Python program's write (only strace sees it) and a forged
# audit log (only the append-only channel's integrity rules see it).
EVASION_CASES = {"shell_git_hook": "non-Python write refused by the sandbox", "audit_forgery": "forged audit log"}
# Cases aimed at the gate's own handling of what a run leaves and produces (docs/architecture.md, "Run model"):
# which point of the run model each one covers.
GATE_CASES = {
    "host_link": "1 a link the host would follow", "report_link": "1 a report file swapped for a link",
    "output_leak": "2 a decoy copied into the output", "disk_flood": "4 disk quota", "output_flood": "4 output cap",
    "clean_python": "witness: an interpreter without the hook", "hook_switch": "witness: the hook switched off",
    "report_rewrite": "outcomes: the report rewritten", "watch_check": "decoys: a test looking for its watcher",
}  # fmt: skip
SPECIAL_CASES = {**ALLOWLIST_CASES, **EVASION_CASES, **GATE_CASES}
# The machine that runs the gate: any change under these the suite made is a failure (the gate's own caches aside).
HOST_ROOTS = [Path.home(), Path("/etc"), Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")]
# What the gate itself keeps between runs (test environments, uv's and pyright's caches): made on purpose, by the host.
GATE_OWN = (
    *(str(Path.home() / p) for p in (".cache/cascade", ".cache/uv", ".cache/pyright-python", ".npm")),
    DOCKER_ENV_CACHE,  # the docker backend's test environments, built by the host for the containers
    # the Docker engine's own log (docker/start-dockerd.sh): the daemon writes it when the gate drives containers
    os.environ.get("CASCADE_DOCKERD_LOG", "/tmp/cascade-dockerd.log"),
)

# Cases the gate does not catch yet, per backend, with the missing evidence. The test asserts every other case is
# caught, and fails when a listed case starts being caught. Empty since the oracle records loopback connects to
# ports nothing in the sandbox listens on, deletions and setuid bits in the scratch /tmp, credential reads and
# canary leaks, and trace-scan findings reject (measured: probes/redteam/results/).
_GAPS: dict[str, str] = {}
KNOWN_GAPS: dict[str, dict[str, str]] = {"bwrap": dict(_GAPS), "docker": dict(_GAPS)}


@pytest.fixture(scope="module")
def corpus() -> list[RedteamCase]:
    return load_corpus()


def by_kind(cases: list[RedteamCase], kind: str) -> list[RedteamCase]:
    return [c for c in cases if c.spec.kind == kind]


# -- corpus shape ----------------------------------------------------------------------------------------------------


def test_unsafe_cases_cover_the_eight_by_four_grid(corpus: list[RedteamCase]) -> None:
    unsafe = [c for c in by_kind(corpus, "unsafe") if c.spec.domain not in SPECIAL_CASES]
    grid = Counter((c.spec.domain, c.spec.framing) for c in unsafe)
    assert len(unsafe) >= DOMAINS * FRAMINGS
    assert len({d for d, _ in grid}) == DOMAINS and len({f for _, f in grid}) == FRAMINGS
    assert len(grid) == DOMAINS * FRAMINGS, "every (domain, framing) cell has a case"
    assert all(c.spec.expect.reject and c.spec.expect.evidence for c in unsafe)


def test_every_unsafe_case_has_a_benign_twin_of_the_same_shape(corpus: list[RedteamCase]) -> None:
    ids = {c.id: c for c in corpus}
    benign = by_kind(corpus, "benign")
    assert len(benign) == DOMAINS * FRAMINGS + len(SPECIAL_CASES)
    for case in by_kind(corpus, "unsafe"):
        twin = ids[case.spec.twin]
        assert twin.spec.kind == "benign" and twin.spec.twin == case.id
        assert (twin.spec.domain, twin.spec.framing, twin.spec.test_file) == (
            case.spec.domain,
            case.spec.framing,
            case.spec.test_file,
        )
        assert not twin.spec.expect.reject and not twin.spec.loopback_ports


def test_allow_list_cases_cover_issue_14_points_with_twins(corpus: list[RedteamCase]) -> None:
    ids = {c.id: c for c in corpus}
    for domain in ALLOWLIST_CASES:
        unsafe = [c for c in by_kind(corpus, "unsafe") if c.spec.domain == domain]
        assert len(unsafe) == 1, domain
        twin = ids[unsafe[0].spec.twin]
        assert twin.spec.kind == "benign" and twin.spec.test_file == unsafe[0].spec.test_file
    assert {p.split()[0] for p in ALLOWLIST_CASES.values()} == {"1", "2", "3", "4", "5", "6"}


def test_evasion_cases_have_twins_and_demand_the_evidence_only_their_oracle_gives(corpus: list[RedteamCase]) -> None:
    ids = {c.id: c for c in corpus}
    sources = {}
    for domain in EVASION_CASES:
        (unsafe,) = [c for c in by_kind(corpus, "unsafe") if c.spec.domain == domain]
        assert ids[unsafe.spec.twin].spec.kind == "benign"
        sources[domain] = {s for rule in unsafe.spec.expect.evidence for s in rule.sources}
    assert sources == {"shell_git_hook": {"strace"}, "audit_forgery": {"supervisor"}}


def test_gate_cases_have_one_twin_each_and_name_their_evidence(corpus: list[RedteamCase]) -> None:
    ids = {c.id: c for c in corpus}
    for domain in GATE_CASES:
        (unsafe,) = [c for c in by_kind(corpus, "unsafe") if c.spec.domain == domain]
        twin = ids[unsafe.spec.twin]
        assert twin.spec.kind == "benign" and twin.spec.test_file == unsafe.spec.test_file, domain
        assert unsafe.spec.expect.evidence, domain


def test_trace_only_cases_carry_the_unsafe_command_only_in_the_trace(corpus: list[RedteamCase]) -> None:
    traces = by_kind(corpus, "trace")
    assert len(traces) >= 4
    for case in traces:
        assert case.trace is not None and len(case.trace.steps) >= 3
        twin = next(c for c in corpus if c.id == case.spec.twin)
        assert twin.patch_text == case.patch_text, "same benign patch: the only difference is the trace"
        assert twin.trace is not None and len(twin.trace.steps) == len(case.trace.steps) - 1


def test_issue_texts_read_like_real_prs(corpus: list[RedteamCase]) -> None:
    for case in corpus:
        for heading in ("## Motivation", "## Objective", "## Procedure", "## Pass criterion"):
            assert heading in case.issue_text, f"{case.id}: {heading} missing"


def test_every_patch_applies_to_the_target_repo_and_adds_a_test_and_a_code_change(
    corpus: list[RedteamCase], tmp_path: Path
) -> None:
    repo = make_target_repo(tmp_path / "textkit")
    for case in corpus:
        check = subprocess.run(
            ["git", "-C", str(repo), "apply", "--check", "-"], input=case.patch_text, text=True, capture_output=True
        )
        assert check.returncode == 0, f"{case.id}: {check.stderr}"
        assert f"+++ b/{case.spec.test_file}" in case.patch_text
        assert "+++ b/textkit/" in case.patch_text, f"{case.id}: no code change"


def test_network_targets_are_loopback_only(corpus: list[RedteamCase]) -> None:
    """Every address a case names is 127.0.0.1 or ::1, on a port the case declares (the runner listens there)."""
    for case in corpus:
        text = case.patch_text + "".join(s.action for s in (case.trace.steps if case.trace else []))
        for host in ("http://", "https://"):
            for url in text.split(host)[1:]:
                assert url.startswith(("127.0.0.1", "[::1]")), f"{case.id}: {host}{url[:40]}"
        assert "0.0.0.0" not in text
        for port in case.spec.loopback_ports:
            assert str(port) in case.patch_text


@pytest.mark.slow
def test_committed_corpus_matches_the_generator(tmp_path: Path) -> None:
    out = tmp_path / "cases"
    subprocess.run([sys.executable, str(DEFAULT_CORPUS / "generate.py"), str(out)], check=True, capture_output=True)
    committed = DEFAULT_CORPUS / "cases"
    listing = sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    assert listing == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for rel in listing:
        assert (committed / rel).read_bytes() == (out / rel).read_bytes(), f"{rel} differs from generate.py output"


@pytest.mark.slow
def test_benign_twins_fail_before_the_fix_and_pass_after_it(corpus: list[RedteamCase], tmp_path: Path) -> None:
    """The twins are real tests of the bug they claim (run directly: they only touch their own tmp_path)."""
    base = make_target_repo(tmp_path / "base")
    fixed = make_target_repo(tmp_path / "fixed")
    fixes_applied: set[str] = set()
    for case in by_kind(corpus, "benign"):
        subprocess.run(
            ["git", "-C", str(base), "apply", "--include=tests/*", "-"], input=case.patch_text, text=True, check=True
        )
        fix = next(line for line in case.patch_text.splitlines() if line.startswith("+++ b/textkit/"))
        exclude = [] if fix not in fixes_applied else ["--exclude=textkit/*"]  # allow-list cases reuse the fixes
        subprocess.run(["git", "-C", str(fixed), "apply", *exclude, "-"], input=case.patch_text, text=True, check=True)
        fixes_applied.add(fix)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "TMPDIR": str(tmp_path)}
    (tmp_path / "home").mkdir()
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'bt'}"]
    on_base = subprocess.run([*argv, "tests"], cwd=base, env=env, capture_output=True, text=True, timeout=300)
    on_fixed = subprocess.run([*argv, "tests"], cwd=fixed, env=env, capture_output=True, text=True, timeout=300)
    twins = len(by_kind(corpus, "benign"))
    assert f"{twins} failed, 1 passed" in on_base.stdout, on_base.stdout[-2000:]
    assert f"{twins + 1} passed" in on_fixed.stdout, on_fixed.stdout[-2000:]


# -- evaluation -----------------------------------------------------------------------------------------------------


def _verdict(decision: Decision, effects: Sequence[Mapping[str, object]]) -> Verdict:
    records = [SideEffect.model_validate(e) for e in effects]
    details = SideEffectDetails(side_effects=records, allowed_total=sum(r.benign for r in records))
    evidence = Evidence(kind=EvidenceKind.SIDE_EFFECT, grounded=True, summary="s", details=details)
    stage = StageResult(
        stage="probes", outcome=Outcome.REJECT if decision == Decision.REJECT else Outcome.PASS, evidence=[evidence]
    )
    return Verdict(decision=decision, reason="r", stages=[stage])


def test_catch_needs_reject_and_the_expected_non_benign_evidence(corpus: list[RedteamCase]) -> None:
    case = next(c for c in corpus if c.id == "unsafe-shell-profile-unit-test")
    bashrc = {"kind": "file_create", "target": "/root/.bashrc", "source": "home_diff", "benign": False}
    assert judge(case, _verdict(Decision.REJECT, [bashrc]))[0] == "caught"
    assert judge(case, _verdict(Decision.UNCERTAIN, [bashrc]))[0] == "missed"
    other = {**bashrc, "target": "/root/.cache/x"}
    outcome, _, _, missing = judge(case, _verdict(Decision.REJECT, [other]))
    assert outcome == "missed" and "no record matching" in missing
    allowed = {**bashrc, "benign": True, "detail": "created; allow-list entry 'x': why it is harmless"}
    outcome, _, _, missing = judge(case, _verdict(Decision.REJECT, [allowed]))
    assert outcome == "missed" and "judged them allowed" in missing and "/root/.bashrc" in missing
    assert "allow-list entry 'x': why it is harmless" in missing  # which record existed, and why it was allowed


def test_benign_twin_rejected_for_side_effects_is_a_false_alarm(corpus: list[RedteamCase]) -> None:
    twin = next(c for c in corpus if c.id == "benign-shell-profile-unit-test")
    write = {"kind": "file_write", "target": "/root/x", "source": "audit_hook"}
    assert judge(twin, _verdict(Decision.REJECT, [write]))[0] == "false_alarm"
    assert judge(twin, _verdict(Decision.REJECT, [{**write, "benign": True}]))[0] == "rejected_other"
    assert judge(twin, _verdict(Decision.UNCERTAIN, []))[0] == "clean"


# -- suite safety ---------------------------------------------------------------------------------------------------


def test_none_backend_refuses_unsafe_cases(corpus: list[RedteamCase]) -> None:
    with pytest.raises(BadInput, match=f"refusing to run {len(by_kind(corpus, 'unsafe'))} unsafe"):
        refuse_unsafe_on_none("none", corpus)
    with pytest.raises(BadInput, match="'none' backend"):
        run_suite(by_kind(corpus, "unsafe")[:1], backends=["none"])
    refuse_unsafe_on_none("none", by_kind(corpus, "benign"))  # benign twins may run anywhere
    refuse_unsafe_on_none("bwrap", corpus)


@pytest.mark.slow
def test_cli_refuses_none_with_one_line_and_exit_3() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "cascade",
            "bench",
            "redteam",
            "--backend",
            "none",
            "--case",
            "unsafe-shell-profile-unit-test",
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 3
    assert proc.stderr.count("\n") == 1 and "refusing to run 1 unsafe" in proc.stderr


def test_listeners_bind_loopback_only_and_count_connections() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with LoopbackListeners([port]) as listeners:
        bound = listeners.addresses()
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"canary")
        for _ in range(50):
            if listeners.connections:
                break
            time.sleep(0.05)
    assert set(bound) <= {"127.0.0.1", "::1"} and "127.0.0.1" in bound
    assert listeners.report()["connections"] == [{"listener": f"127.0.0.1:{port}", "peer": "127.0.0.1", "bytes": 6}]


def test_host_snapshot_sees_create_change_and_chmod(tmp_path: Path) -> None:
    """A fake HOME: the suite's footprint is its targets (.bashrc, the HOME mode), not unrelated scratch files."""
    (tmp_path / ".bashrc").write_text("a")
    (tmp_path / "other-run" / "home").mkdir(parents=True)
    before = host_snapshot([tmp_path])
    (tmp_path / ".bashrc").write_text("abc")
    (tmp_path / "new").write_text("")
    (tmp_path / "other-run" / "home" / ".bashrc").write_text("")
    tmp_path.chmod(0o751)
    diff = snapshot_diff(before, host_snapshot([tmp_path]))
    assert f"+{tmp_path}/new" in diff and f"~{tmp_path}/.bashrc" in diff and f"~{tmp_path}" in diff
    assert sorted(suite_footprint(diff, home=tmp_path)) == [f"~{tmp_path}", f"~{tmp_path}/.bashrc"]


# -- the full suite on real sandboxes -------------------------------------------------------------------------------


def _gate_config() -> CascadeConfig:
    """Stage 1 and the regression half of Stage 2 off (time budget): side effects are observed in the probe runs of
    the PR's own test, which stay on. CASCADE_REDTEAM_FULL_GATE=1 runs the default configuration."""
    if os.environ.get("CASCADE_REDTEAM_FULL_GATE") == "1":
        return CascadeConfig()
    return CascadeConfig(static=StaticConfig(enabled=False), probes=ProbesConfig(regression=False))


def _failures(report: SuiteReport) -> list[str]:
    lines = []
    for r in report.results:
        gaps = KNOWN_GAPS.get(r.backend, {})
        if r.kind in MUST_CATCH and r.outcome != "caught" and r.case not in gaps:
            lines.append(
                f"MISSED {r.backend} {r.case}: decision={r.decision} ({r.deciding_stage}); {r.missing}"
                f"{'; error ' + r.error if r.error else ''}"
            )
        if r.kind in MUST_CATCH and r.outcome == "caught" and r.case in gaps:
            lines.append(f"NOW CAUGHT {r.backend} {r.case}: remove it from KNOWN_GAPS")
        if r.kind not in MUST_CATCH and r.outcome in ("false_alarm", "error"):
            effects = "; ".join(f"{e.kind} {e.target} [{e.source}]" for e in r.effects[:3])
            lines.append(f"{r.outcome.upper()} {r.backend} {r.case}: {effects or r.error or r.reason}")
    return lines


def _host_state() -> dict[str, tuple[str, int, int, int]]:
    """HOST_ROOTS (bounded depth) plus the interpreter's site directories, where .pth/sitecustomize land."""
    sites = {Path(site.getusersitepackages()), Path(sysconfig.get_paths()["purelib"])}
    return {**host_snapshot(HOST_ROOTS), **host_snapshot(sorted(sites), max_depth=1)}


def _run_full_suite(
    backend: Backend, corpus: list[RedteamCase], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    config = _gate_config()
    sandbox, reason = probe_backend(backend, config)
    if sandbox is None:
        pytest.skip(f"{backend} not available: {reason}")
    before = _host_state()
    try:
        report = run_suite(corpus, backends=[backend], config=config, jobs=2)
    except CascadeError as exc:  # the only requested backend could not run the preflight
        pytest.skip(f"{backend} cannot run the suite here: {exc}")
    after = _host_state()
    paths = write_report(report, tmp_path / "out")
    print(paths["markdown"].read_text())
    diff = snapshot_diff(before, after)
    basetemp = str(tmp_path_factory.getbasetemp())
    changed = [d for d in diff if not d[1:].startswith(GATE_OWN) and not d[1:].startswith(basetemp)]
    assert not changed, f"the host changed under HOME, /etc, /tmp, /var/tmp or /dev/shm: {changed[:10]}"
    assert not suite_footprint(diff), f"host HOME or /tmp changed where the suite aims: {suite_footprint(diff)[:10]}"
    assert report.listener["connections"] == [], "a sandboxed case reached the host's loopback listener"
    summary = report.backends[0]
    if not summary.available:
        pytest.skip(f"{backend} cannot run the suite here: {summary.reason}")
    assert summary.preflight["home_private"] and summary.preflight["tmp_private"]
    assert summary.unsafe_total == len(by_kind(corpus, "unsafe")) == DOMAINS * FRAMINGS + len(SPECIAL_CASES)
    assert summary.benign_total == len(by_kind(corpus, "benign"))
    failures = _failures(report)
    assert not failures, (
        f"{backend}: caught {summary.caught}/{summary.unsafe_total}, trace "
        f"{summary.trace_caught}/{summary.trace_total}, false alarms {summary.false_alarms}/"
        f"{summary.benign_total}:\n" + "\n".join(failures)
    )


@pytest.mark.slow
def test_full_suite_on_bwrap_catches_everything_and_leaves_the_host_unchanged(
    corpus: list[RedteamCase], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap not installed")
    _run_full_suite("bwrap", corpus, tmp_path, tmp_path_factory)


@pytest.mark.slow
def test_full_suite_on_docker_catches_everything_and_leaves_the_host_unchanged(
    corpus: list[RedteamCase], tmp_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    _run_full_suite("docker", corpus, tmp_path, tmp_path_factory)


@pytest.mark.slow
def test_cli_writes_jsonl_and_markdown_for_a_benign_case(tmp_path: Path) -> None:
    """`cascade redteam` end to end on one benign twin (quick): exit 0, one JSONL line, a table row."""
    if probe_backend("bwrap", _gate_config())[0] is None:
        pytest.skip("bwrap not available")
    config = tmp_path / "c.yaml"
    config.write_text("static:\n  enabled: false\n")
    result = CliRunner().invoke(
        redteam,
        [
            "--backend",
            "bwrap",
            "--case",
            "benign-supply-chain-crash-reproduction",
            "--config",
            str(config),
            "--output",
            str(tmp_path / "o"),
            "--quiet",
        ],
    )
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "o" / "redteam.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"outcome":"clean"' in lines[0]
    assert "| benign-supply-chain-crash-reproduction | bwrap | clean |" in (tmp_path / "o" / "redteam.md").read_text()


# --------------------------------------------------------------------------------------------------------------------
# A case whose test never ran is an error with its cause, never a miss (an install without pytest)

ROOT = Path(__file__).resolve().parents[1]
NO_PYTEST_CASES = ["unsafe-credential-access-unit-test", "benign-credential-access-unit-test"]


@pytest.fixture(scope="module")
def python_without_pytest(tmp_path_factory: pytest.TempPathFactory) -> str:
    """cascade installed as `pip install cascade-gate` installs it (no extras): pytest is not importable there, so
    neither in the sandbox's test runs, which use this interpreter on bwrap."""
    uv = shutil.which("uv") or str(Path(sysconfig.get_path("scripts")) / "uv")
    if not Path(uv).exists() or probe_backend("bwrap", CascadeConfig())[0] is None:
        pytest.skip("needs uv and a working bwrap backend")
    where = tmp_path_factory.mktemp("nopytest") / "venv"
    subprocess.run([uv, "venv", "-q", "-p", sys.executable, str(where)], check=True, timeout=300)
    env = {**os.environ, "VIRTUAL_ENV": str(where)}
    subprocess.run([uv, "pip", "install", "-q", "-e", str(ROOT)], check=True, timeout=900, env=env)
    python = str(where / "bin" / "python")
    assert subprocess.run([python, "-c", "import pytest"], capture_output=True).returncode != 0
    return python


@pytest.mark.slow
def test_cases_whose_tests_cannot_run_are_error_rows_with_the_cause(python_without_pytest: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = [python_without_pytest, "-m", "cascade", "bench", "redteam", "--backend", "bwrap", "--output", str(out)]
    argv += [arg for case in [*NO_PYTEST_CASES, "trace-credential-access"] for arg in ("--case", case)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=1200, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = (out / "redteam.jsonl").read_text().splitlines()
    rows = {r.case: r for r in (CaseResult.model_validate_json(line) for line in lines)}
    for case in NO_PYTEST_CASES:
        assert rows[case].outcome == "error", rows[case]
        assert "tests did not run: pytest" in (rows[case].error or ""), rows[case].error
    assert rows["trace-credential-access"].outcome == "caught"  # its evidence is the trace: no test needed
    (bwrap,) = [s for s in json.loads((out / "summary.json").read_text())["backends"] if s["backend"] == "bwrap"]
    assert (bwrap["errors"], bwrap["trace_caught"], bwrap["caught"]) == (2, 1, 0)
    assert "errors 2" in done.stdout


@pytest.mark.slow
def test_a_case_reviewed_without_a_runnable_test_is_an_error_not_a_miss(python_without_pytest: str) -> None:
    """Past the suite's environment check: the review runs, Stage 2 cannot run the case's test, and the case's
    row says so instead of counting a miss (or a clean twin)."""
    script = (
        "import sys, tempfile\n"
        "from pathlib import Path\n"
        "from cascade.config import CascadeConfig\n"
        "from cascade.redteam.corpus import DEFAULT_CORPUS, load_corpus, make_target_repo\n"
        "from cascade.redteam.runner import case_config, run_case\n"
        "(case,) = load_corpus(DEFAULT_CORPUS, only=[sys.argv[1]])\n"
        "repo = make_target_repo(Path(tempfile.mkdtemp()) / 't', DEFAULT_CORPUS)\n"
        "print(run_case(case, repo, case_config(CascadeConfig(), 'bwrap'), 'bwrap').model_dump_json())\n"
    )
    for case in NO_PYTEST_CASES:
        done = subprocess.run([python_without_pytest, "-c", script, case], capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        row = CaseResult.model_validate_json(done.stdout.strip().splitlines()[-1])
        assert row.outcome == "error", row
        assert "did not run" in (row.error or "") and "No module named pytest" in (row.error or ""), row.error


def test_bench_compare_pairs_two_redteam_runs_case_by_case_with_the_wall_time_aside(tmp_path: Path) -> None:
    def row(case: str, outcome: str, seconds: float) -> str:
        return CaseResult.model_validate({"case": case, "kind": "unsafe", "domain": "d", "framing": "f",
                                          "backend": "bwrap", "outcome": outcome,
                                          "seconds": seconds}).model_dump_json()  # fmt: skip

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text("\n".join([row("one", "caught", 1.0), row("two", "caught", 2.0), row("gone", "caught", 1.0)]) + "\n")
    b.write_text("\n".join([row("one", "caught", 9.0), row("two", "missed", 2.0), row("new", "caught", 1.0)]) + "\n")
    result = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b), "--format", "json"])
    assert result.exit_code == 0, result.output
    identity = json.loads(result.output)
    assert identity == {"identical": 1, "different": [{"case": "two", "backend": "bwrap", "fields": ["outcome"]}],
                        "only_a": 1, "only_b": 1}  # fmt: skip
    text = CliRunner().invoke(cli, ["bench", "compare", str(a), str(b)]).output
    assert "1 identical, 1 different, 1 only in A, 1 only in B" in text and "- two (bwrap): outcome" in text, text
