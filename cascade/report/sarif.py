"""`--format sarif`: SARIF 2.1.0 for code-scanning tools (GitHub code scanning, IDE viewers).

One result per patch-caused static diagnostic, each `baselineState: "new"` (the stage already subtracted the base
tree's diagnostics) with the stage's fingerprint as a partial fingerprint, so a viewer tracks a finding across runs
even when unrelated lines move. The verdict itself rides on the invocation's properties.

A reject always yields at least one `error` result: when no diagnostic decided it (no change, hygiene, a failing
probe or test, a side effect, an unsafe trace), one result for the reject itself, located at the file that caused
it — the file named by the deciding evidence (a stripped test file, an artifact, the failing test when it is a file
of the patch), else the first changed file, else the patch itself — so code scanning never shows a reject as nothing.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

from cascade.models import (
    Decision,
    Diagnostic,
    HygieneDetails,
    NoChangeDetails,
    ProbeDetails,
    RegressionDetails,
    Verdict,
)
from cascade.report import view

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA_URI = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
FINGERPRINT_KEY = "cascadeFingerprint/v1"  # bump the version whenever Stage 1 changes how fingerprints are made
TOOL_NAME = "cascade"
INFORMATION_URI = "https://pypi.org/project/cascade-gate/"
SRCROOT = "%SRCROOT%"  # paths are relative to the repository root, as code-scanning uploads expect

_LEVEL = {"error": "warning", "warning": "warning", "information": "note"}


def rule_id(d: Diagnostic) -> str:
    return f"{d.tool}/{d.rule}"


def _rules(rows: list[view.Row]) -> list[dict[str, Any]]:
    rules: dict[str, dict[str, Any]] = {}
    for r in rows:
        d = r.diagnostic
        rule = rules.setdefault(
            rule_id(d),
            {
                "id": rule_id(d),
                "name": d.rule,
                "shortDescription": {"text": f"{d.tool} rule {d.rule}"},
                "defaultConfiguration": {"level": "warning"},
                "properties": {"tool": d.tool, "decidesReject": False},
            },
        )
        if r.decides:
            rule["defaultConfiguration"]["level"] = "error"
            rule["properties"]["decidesReject"] = True
    return list(rules.values())


def _region(r: view.Row) -> dict[str, int]:
    d = r.diagnostic
    region = {"startLine": max(d.line, 1)}
    if r.column is not None:
        region["startColumn"] = r.column
    if d.end_line is not None and d.end_line >= region["startLine"]:
        region["endLine"] = d.end_line
        end = r.end_column
        if end is not None and not (d.end_line == region["startLine"] and end < region.get("startColumn", 1)):
            region["endColumn"] = end
    return region


def _artifact(d: Diagnostic) -> dict[str, str]:
    return {"uri": quote(d.path), "uriBaseId": SRCROOT}  # percent-encoded: a path is not always a valid URI


def _result(r: view.Row, index: dict[str, int]) -> dict[str, Any]:
    d = r.diagnostic
    result: dict[str, Any] = {
        "ruleId": rule_id(d),
        "ruleIndex": index[rule_id(d)],
        "level": "error" if r.decides else _LEVEL[d.severity],
        "message": {"text": d.message},
        "locations": [{"physicalLocation": {"artifactLocation": _artifact(d), "region": _region(r)}}],
        "baselineState": "new",
        "properties": {"stage": r.stage, "tool": d.tool, "severity": d.severity, "decidesReject": r.decides},
    }
    if d.fingerprint:
        result["partialFingerprints"] = {FINGERPRINT_KEY: d.fingerprint}
    return result


PATCH_ARTIFACT = "patch.diff"  # stands for the reviewed patch when the reject names no file of the repository


def culprit(verdict: Verdict) -> str | None:
    """The repository file a reject without a diagnostic points at; None = the patch itself."""
    deciding = next((s for s in verdict.stages if s.stage == verdict.deciding_stage), None)
    changed = set(verdict.changed_files)
    for ev in deciding.evidence if deciding else []:
        if not ev.grounded:
            continue
        details = ev.details
        if isinstance(details, HygieneDetails) and details.findings and details.findings[0].path:
            return details.findings[0].path  # hygiene's artifacts
        if isinstance(details, NoChangeDetails) and details.stripped and details.stripped[0].path:
            return details.stripped[0].path  # no_change's stripped files
        test_file = details.test_id.split("::")[0] if isinstance(details, (ProbeDetails, RegressionDetails)) else ""
        if test_file and (test_file in changed or isinstance(details, RegressionDetails)):
            return test_file  # a test of the repository (nearby regression) or one the patch adds
    return verdict.changed_files[0] if verdict.changed_files else None


def _reject_rule(verdict: Verdict) -> dict[str, Any]:
    stage = verdict.deciding_stage or "gate"
    return {
        "id": f"cascade/{stage}",
        "name": f"{stage}-reject",
        "shortDescription": {"text": f"cascade stage {stage} rejected the patch"},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tool": "cascade", "decidesReject": True},
    }


def _reject_result(verdict: Verdict, rule_index: int) -> dict[str, Any]:
    path = culprit(verdict)
    location: dict[str, Any] = {"uri": quote(path), "uriBaseId": SRCROOT} if path else {"uri": PATCH_ARTIFACT}
    physical: dict[str, Any] = {"artifactLocation": location}
    if path:
        physical["region"] = {"startLine": 1}
    return {
        "ruleId": f"cascade/{verdict.deciding_stage or 'gate'}",
        "ruleIndex": rule_index,
        "level": "error",
        "message": {"text": verdict.reason},
        "locations": [{"physicalLocation": physical}],
        "baselineState": "new",
        "properties": {"stage": verdict.deciding_stage, "decidesReject": True, "culprit": path or "the patch"},
    }


def _invocation(verdict: Verdict) -> dict[str, Any]:
    notes = [
        {"level": "note", "message": {"text": f"stage {s.stage} skipped: {s.reason or 'no reason given'}"}}
        for s in view.skipped_stages(verdict)
    ]
    invocation: dict[str, Any] = {
        # The gate ran to a verdict; a reject or uncertain is its finding, not a failed execution.
        "executionSuccessful": True,
        "exitCode": verdict.exit_code,
        "properties": {
            "decision": verdict.decision.value,
            "decidingStage": verdict.deciding_stage,
            "reason": verdict.reason,
            "applyMethod": verdict.apply_method,
            "reportSchemaVersion": verdict.schema_version,
            "stages": [
                {"stage": s.stage, "outcome": s.outcome.value, "seconds": s.cost.seconds} for s in verdict.stages
            ],
        },
    }
    if notes:
        invocation["toolExecutionNotifications"] = notes
    return invocation


def sarif_log(verdict: Verdict) -> dict[str, Any]:
    rows = view.diagnostic_rows(verdict)
    rules = _rules(rows)
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = [_result(r, index) for r in rows]
    if verdict.decision == Decision.REJECT and not any(r["level"] == "error" for r in results):
        rules.append(_reject_rule(verdict))
        results.append(_reject_result(verdict, len(rules) - 1))
    driver = {
        "name": TOOL_NAME,
        "version": verdict.tool_version or "0",
        "informationUri": INFORMATION_URI,
        "rules": rules,
    }
    run = {
        "tool": {"driver": driver},
        "invocations": [_invocation(verdict)],
        "columnKind": "unicodeCodePoints",
        "results": results,
    }
    return {"$schema": SARIF_SCHEMA_URI, "version": SARIF_VERSION, "runs": [run]}


def render_sarif(verdict: Verdict) -> str:
    return json.dumps(sarif_log(verdict), indent=2, ensure_ascii=False) + "\n"
