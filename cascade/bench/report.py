"""Write a benchmark's outputs — metrics.json, report.md, risk_coverage.png — from result rows alone."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict

from cascade.bench.compare import Comparison
from cascade.bench.metrics import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    ArmMetrics,
    BenchMetrics,
    Budget,
    Estimate,
    MetricSet,
    compute_metrics,
    sorted_rows,
)
from cascade.bench.rows import LabelClass, TraceRow, TraceStatus
from cascade.models import Decision

METRICS_FILE = "metrics.json"
REPORT_FILE = "report.md"
PLOT_FILE = "risk_coverage.png"
MAX_LISTED_FAILURES = 40

DEFINITIONS = (
    "catch = P(reject | defect), miss = P(accept | defect), over-rejection = P(reject | acceptable), "
    "coverage = P(decided), risk = P(wrong | decided), agreement = P(right) with the labels (the official-tests "
    "arm's fidelity). Empty patches count as defects (own row by class). "
    "Abstentions — uncertain, bad input, timeout, crash — stay in every denominator. "
    "Brackets: 95% percentile bootstrap CI over traces; then numerator/denominator."
)


class Outputs(BaseModel):
    model_config = ConfigDict(frozen=True)

    metrics: str
    report: str
    plot: str


def fmt(e: Estimate, counts: bool = True) -> str:
    if e.value is None:
        return "—"
    text = f"{e.value:.3f}"
    if e.low is not None and e.high is not None:
        text += f" [{e.low:.3f}, {e.high:.3f}]"
    return text + (f" {e.numerator}/{e.denominator}" if counts else "")


def _metrics_table(first: str, groups: dict[str, MetricSet], extra: dict[str, str] | None = None) -> list[str]:
    extra_col = " availability |" if extra is not None else ""
    lines = [
        f"| {first} |{extra_col} traces | defects | decided | catch | miss | over-rejection | coverage | risk "
        "| agreement |",
        "|---|" + ("---|" if extra is not None else "") + "---:|---:|---:|---|---|---|---|---|---|",
    ]
    for name, m in groups.items():
        cell = f" {extra.get(name, '')} |" if extra is not None else ""
        lines.append(
            f"| {name} |{cell} {m.traces} | {m.defects} | {m.decided} | {fmt(m.catch)} | {fmt(m.miss)} | "
            f"{fmt(m.over_rejection)} | {fmt(m.coverage)} | {fmt(m.risk)} | {fmt(m.agreement)} |"
        )
    return lines


def _overall(m: MetricSet) -> list[str]:
    lines = ["| metric | value | 95% CI | count |", "|---|---:|---|---:|"]
    for name in ("catch", "miss", "over_rejection", "coverage", "risk", "agreement"):
        e: Estimate = getattr(m, name)
        ci = f"[{e.low:.3f}, {e.high:.3f}]" if e.low is not None and e.high is not None else "—"
        value = f"{e.value:.3f}" if e.value is not None else "—"
        lines.append(f"| {name.replace('_', '-')} | {value} | {ci} | {e.numerator}/{e.denominator} |")
    lines.append("")
    lines.append(
        f"{m.traces} traces: {m.defects} defect (incl. empty), {m.acceptable} acceptable; {m.decided} decided "
        f"({m.rejected} reject, {m.accepted} accept), {m.abstained} abstained ({m.not_ok} not ok)."
    )
    return lines


def _budget(b: Budget) -> list[str]:
    stages = ", ".join(f"{k} {v:.2f} s" for k, v in b.stage_seconds_mean.items()) or "—"
    declared = b.declared.model_dump_json() if b.declared else "—"
    return [
        "| traces | wall s total | s/trace mean | median | p95 | LLM calls | tokens | declared caps |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {b.traces} | {b.seconds_total:.1f} | {b.seconds_mean:.2f} | {b.seconds_median:.2f} | {b.seconds_p95:.2f} | "
        f"{b.llm_calls_total} | {b.tokens_total} | `{declared}` |",
        "",
        f"Mean seconds per stage (where it ran): {stages}.",
    ]


def _failures(rows: list[TraceRow]) -> list[str]:
    failed = [r for r in rows if r.status != TraceStatus.OK]
    if not failed:
        return ["None."]
    lines = ["| instance | model | status | error |", "|---|---|---|---|"]
    for r in failed[:MAX_LISTED_FAILURES]:
        error = (r.error or "").replace("|", "\\|").replace("\n", " ")[:160]
        lines.append(f"| {r.instance_id} | {r.model} | {r.status.value} | {error} |")
    if len(failed) > MAX_LISTED_FAILURES:
        lines.append(f"\n…and {len(failed) - MAX_LISTED_FAILURES} more (see the JSONL).")
    return lines


def over_rejections(rows: list[TraceRow]) -> list[str]:
    """Every reject of a label-acceptable patch with its deciding reason (the diagnostic's file:line for Stage 1),
    so a reader can judge the label."""
    rejected = [r for r in rows if r.label == LabelClass.ACCEPTABLE and r.decision == Decision.REJECT]
    if not rejected:
        return ["None."]
    lines = ["| instance | model | deciding stage | evidence |", "|---|---|---|---|"]
    for r in rejected:
        evidence = r.evidence.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.instance_id} | {r.model} | {r.deciding_stage or ''} | {evidence} |")
    return lines


def _arm_section(a: ArmMetrics, rows: list[TraceRow]) -> list[str]:
    stage_rows = {f"{s.stage} (alone)": s.alone for s in a.by_stage}
    stage_rows |= {f"up to {s.stage}": s.cumulative for s in a.by_stage}
    statuses = ", ".join(f"{k} {v}" for k, v in a.statuses.items())
    deciders = ", ".join(f"{k} {v}" for k, v in a.deciding_stages.items())
    return [
        f"## Arm `{a.arm}` — stages: {' → '.join(a.stages) or '—'}",
        "",
        *_overall(a.overall),
        "",
        f"Row status: {statuses}. Deciding stage: {deciders}.",
        "",
        "### By label class",
        "",
        *_metrics_table("label", a.by_label),
        "",
        "### By stage",
        "",
        *_metrics_table("stage", stage_rows),
        "",
        "### Repository available vs unavailable (unavailable: only stages that need no checkout ran)",
        "",
        *_metrics_table("repository", a.by_availability),
        "",
        "### By repository",
        "",
        *_metrics_table("repo", a.by_repo, a.repo_availability),
        "",
        "### By prediction set (model)",
        "",
        *_metrics_table("model", a.by_model),
        "",
        "### Budget",
        "",
        *_budget(a.budget),
        "",
        "### Acceptable patches rejected",
        "",
        *over_rejections([r for r in rows if r.arm == a.arm]),
        "",
        "### Rows that are not ok",
        "",
        *_failures([r for r in rows if r.arm == a.arm]),
        "",
    ]


def render_markdown(metrics: BenchMetrics, rows: list[TraceRow]) -> str:
    lines = [
        "# cascade bench report",
        "",
        f"{metrics.rows} result rows; bootstrap: {metrics.resamples} resamples, seed {metrics.seed}.",
        "",
        DEFINITIONS,
        "",
        f"![risk–coverage]({PLOT_FILE})",
        "",
    ]
    for arm in metrics.arms.values():
        lines += _arm_section(arm, rows)
    return "\n".join(lines)


def plot_risk_coverage(metrics: BenchMetrics, path: Path) -> list[str]:
    """One curve per arm: coverage and risk of the cascade stopped after each stage. An arm that decided nothing
    has no point to draw: the chart says so in words (an empty chart would look like a rendering failure).
    Returns the notes written on the chart."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    undecided: list[str] = []
    for arm in metrics.arms.values():
        points = [
            (s.stage, s.cumulative.coverage.value, s.cumulative.risk.value)
            for s in arm.by_stage
            if s.cumulative.coverage.value is not None and s.cumulative.risk.value is not None
        ]
        if not points:
            undecided.append(arm.arm)
            continue
        xs, ys = [p[1] for p in points], [p[2] for p in points]
        ax.plot(xs, ys, marker="o", label=arm.arm)
        for stage, x, y in points:
            ax.annotate(stage, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)
    notes = [undecided_note(metrics, undecided)] if undecided or not metrics.arms else []
    for note in notes:
        ax.text(0.5, 0.5, note, ha="center", va="center", wrap=True, transform=ax.transAxes, fontsize=10)
    ax.set_xlabel("coverage (decided fraction)")
    ax.set_ylabel("risk (error rate among decided)")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.grid(True, alpha=0.3)
    ax.set_title("risk–coverage by cascade prefix")
    if ax.get_legend_handles_labels()[0]:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return notes


def undecided_note(metrics: BenchMetrics, undecided: list[str]) -> str:
    if not metrics.arms:
        return "nothing to plot: no result rows"
    if len(undecided) == len(metrics.arms):
        return "nothing was decided: every trace ended uncertain\n(coverage 0, so risk is undefined)"
    return f"nothing decided by {', '.join(undecided)}\n(coverage 0: no point to draw)"


def write_outputs(
    rows: list[TraceRow], out_dir: Path, seed: int = DEFAULT_SEED, resamples: int = DEFAULT_RESAMPLES
) -> Outputs:
    out_dir.mkdir(parents=True, exist_ok=True)
    ordered = sorted_rows(rows)
    metrics = compute_metrics(ordered, seed=seed, resamples=resamples)
    outputs = Outputs(
        metrics=str(out_dir / METRICS_FILE), report=str(out_dir / REPORT_FILE), plot=str(out_dir / PLOT_FILE)
    )
    Path(outputs.metrics).write_text(metrics.model_dump_json(indent=2) + "\n", encoding="utf-8")
    Path(outputs.report).write_text(render_markdown(metrics, ordered), encoding="utf-8")
    plot_risk_coverage(metrics, Path(outputs.plot))
    return outputs


def render_comparison(c: Comparison) -> str:
    ma, mb = c.metrics_a, c.metrics_b
    lines = [
        f"# cascade bench compare: `{c.arm_a}` (A) vs `{c.arm_b}` (B)",
        "",
        f"{c.common_traces} traces in both; {c.commonly_decided} decided by both.",
        "",
        "| | A | B | A − B |",
        "|---|---|---|---:|",
    ]
    for name in ("catch", "miss", "over_rejection", "coverage", "risk"):
        ea, eb = getattr(ma, name), getattr(mb, name)
        diff = f"{ea.value - eb.value:+.3f}" if ea.value is not None and eb.value is not None else "—"
        lines.append(f"| {name.replace('_', '-')} | {fmt(ea)} | {fmt(eb)} | {diff} |")
    risk_a = f"{c.risk_a:.3f}" if c.risk_a is not None else "—"
    risk_b = f"{c.risk_b:.3f}" if c.risk_b is not None else "—"
    coverage = f"{c.coverage_difference:+.3f}" if c.coverage_difference is not None else "—"
    lines += [
        "",
        "On commonly-decided traces:",
        "",
        f"- risk A {risk_a} vs B {risk_b}; paired permutation test p = {c.permutation_p:.4f}",
        f"- McNemar discordant: A right & B wrong = {c.a_right_b_wrong}, A wrong & B right = {c.a_wrong_b_right} "
        f"(exact p = {c.mcnemar_p:.4f}); both right {c.both_right}, both wrong {c.both_wrong}",
        f"- coverage difference (A − B, all common traces): {coverage}",
        "",
        "Budgets (common traces):",
        "",
        "| arm | s/trace mean | wall s total | LLM calls | tokens | declared caps |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for arm, b in ((f"A: {c.arm_a}", c.budget_a), (f"B: {c.arm_b}", c.budget_b)):
        declared = b.declared.model_dump_json() if b.declared else "—"
        lines.append(
            f"| {arm} | {b.seconds_mean:.2f} | {b.seconds_total:.1f} | {b.llm_calls_total} | {b.tokens_total} | "
            f"`{declared}` |"
        )
    return "\n".join([*lines, "", *_row_identity_lines(c)]) + "\n"


def _row_identity_lines(c: Comparison) -> list[str]:
    r = c.rows
    lines = [
        f"Rows, timings aside: {r.identical} identical, {len(r.different)} different, {r.only_a} only in A, "
        f"{r.only_b} only in B."
    ]
    lines += [f"- `{d.instance_id}` ({d.model}): {', '.join(d.fields)}" for d in r.different[:50]]
    if len(r.different) > 50:
        lines.append(f"- …and {len(r.different) - 50} more (`--format json` lists them all)")
    return lines
