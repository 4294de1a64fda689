"""`cascade bench redteam`: run the red-team suite through the full gate on every available sandbox backend.

Exit codes: 0 every target met (all unsafe and trace cases caught, no false alarm, no error), 1 the suite ran and
missed something or raised a false alarm, 3 bad input (e.g. unsafe cases on the `none` backend), 4 internal error."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import cast

import click

from cascade.config import load_config
from cascade.options import config_option, quiet_option
from cascade.redteam.corpus import DEFAULT_CORPUS, load_corpus
from cascade.redteam.models import CaseKind, CaseResult, SuiteReport
from cascade.redteam.report import write_report
from cascade.sandbox.select import BACKENDS, isolating_backends

KINDS = ["unsafe", "benign", "trace", "trace-benign"]


def targets_met(report: SuiteReport) -> bool:
    """Catch everything, no false alarm, no error, on every backend that ran."""
    ran = [s for s in report.backends if s.available]
    return bool(ran) and all(
        s.caught == s.unsafe_total
        and s.trace_caught == s.trace_total
        and s.false_alarms == 0
        and s.trace_false_alarms == 0
        and s.errors == 0
        for s in ran
    )


def _progress(result: CaseResult) -> None:
    click.echo(f"  {result.backend:6} {result.case:55} {result.outcome:14} {result.seconds:6.1f}s", err=True)


@click.command("redteam")
@click.option(
    "--backend",
    "backends",
    multiple=True,
    type=click.Choice(list(BACKENDS)),
    help=f"Sandbox backend(s) to run on [default: every available one of {', '.join(isolating_backends())}].",
)
@click.option("--kind", "kinds", multiple=True, type=click.Choice(KINDS), help="Only these case kinds.")
@click.option("--case", "only", multiple=True, help="Only cases whose id contains this text (repeatable).")
@click.option("--corpus", default=str(DEFAULT_CORPUS), show_default=True, help="Corpus directory.")
@config_option("YAML config for the gate (sandbox limits, stages).")
@click.option(
    "--output",
    "out_dir",
    default="redteam-results",
    show_default=True,
    type=click.Path(path_type=str),
    help="Output directory.",
)
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(1, 8), help="Cases reviewed in parallel.")
@quiet_option("No per-case progress lines.")
def redteam(
    backends: tuple[str, ...],
    kinds: tuple[str, ...],
    only: tuple[str, ...],
    corpus: str,
    config_file: str | None,
    out_dir: str,
    jobs: int,
    quiet: bool,
) -> None:
    """Run the red-team suite: unsafe tests disguised as routine PRs must be rejected with side-effect evidence."""
    from cascade.redteam.runner import run_suite  # late: pulls in the sandbox backends and every stage

    corpus_dir = Path(corpus)
    cases = load_corpus(corpus_dir, kinds={cast(CaseKind, k) for k in kinds} or None, only=list(only) or None)
    report = run_suite(
        cases,
        backends=list(backends) or None,
        config=load_config(config_file),
        corpus=corpus_dir,
        jobs=jobs,
        progress=None if quiet else _progress,
    )
    paths = write_report(report, Path(out_dir))
    for s in report.backends:
        if s.available:
            click.echo(
                f"{s.backend}: caught {s.caught}/{s.unsafe_total} unsafe, {s.trace_caught}/{s.trace_total} "
                f"trace; false alarms {s.false_alarms}/{s.benign_total} benign, {s.trace_false_alarms}/"
                f"{s.trace_benign_total} trace-benign; errors {s.errors}; {s.seconds}s"
            )
        else:
            click.echo(f"{s.backend}: not available — {s.reason}")
    click.echo(f"listener connections: {len(report.listener.get('connections', []))}; report: {paths['markdown']}")
    sys.exit(0 if targets_met(report) else 1)
