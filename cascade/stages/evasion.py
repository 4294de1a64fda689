"""Code that checks whether it is being watched: a finding, never a reject (docs/architecture.md, "Run model").

A test that does harm only when it believes nobody is watching first has to look: at CI variables, at container and
sandbox tell-tales (``/.dockerenv``, ``/proc/1/cgroup``, a tracer in ``/proc/self/status``), at the audit machinery
(``sys.addaudithook``, ``sitecustomize``, the objects of a hook found through ``gc``), at names a gate or honeypot
would use. The sandbox minimises what such code could see (decoys in real formats, no tool names in paths or
variables); this stage names the code that looks, in the lines the patch adds. Legitimate code reads ``CI`` too, so a
finding is evidence for the reviewer and — like text addressed to the reviewer — turns an accept into ``uncertain``
(``cascade.pipeline.cap_accept``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from cascade.context import ReviewContext
from cascade.models import EvasionDetails, Evidence, EvidenceKind, Outcome, StageResult

_CI_VARS = (r"CI|CONTINUOUS_INTEGRATION|GITHUB_ACTIONS?|GITHUB_RUN_\w+|GITHUB_WORKFLOW|GITLAB_CI|BUILDKITE\w*|"
            r"JENKINS_\w+|TRAVIS\w*|CIRCLECI|TF_BUILD|TEAMCITY_\w+|CODEBUILD_\w+|RUNNER_\w+|CASCADE\w*")  # fmt: skip


@dataclass(frozen=True)
class Rule:
    name: str
    pattern: re.Pattern[str]
    why: str


RULES = (
    Rule("ci-variable", re.compile(rf"""(?:environ(?:\.get)?\s*[\[(]|getenv\s*\()\s*(?:b?["'])(?:{_CI_VARS})["']"""),
         "reads a CI variable: behaviour that differs under CI is hidden from whoever reviews it elsewhere"),
    Rule("container-marker", re.compile(r"/\.dockerenv|/run/\.containerenv|/proc/(?:1|self)/(?:cgroup|mountinfo)|"
                                        r"/proc/mounts|\bkubepods\b"),
         "looks for a container or sandbox"),
    Rule("tracer-check", re.compile(r"TracerPid|\bptrace\b|PR_SET_DUMPABLE|\bstrace\b|\bbwrap\b|bubblewrap|seccomp"),
         "looks for a tracer or the sandbox tool"),
    Rule("audit-machinery", re.compile(r"sys\.addaudithook|sys\.audit\b|\baudithook|sitecustomize|gc\.get_objects\(\)"
                                       r"|gc\.get_referrers"),
         "inspects Python's audit hooks or the interpreter's start-up code (where a watcher lives)"),
    Rule("watcher-name", re.compile(r"(?i)\bcascade\b|honeypot|\bcanary\b|\bdecoy\b|pysite"),
         "names a gate, honeypot, canary or decoy"),
)  # fmt: skip


class EvasionStage:
    name = "evasion"
    needs_sandbox = False
    title = "Evasion check — code that looks for its watcher"

    def run(self, ctx: ReviewContext) -> StageResult:
        findings: list[Evidence] = []
        for changed in ctx.patch.files:
            if not changed.path.endswith(".py"):
                continue
            for hunk in changed.hunks:
                for number, line in zip(hunk.changed_target_lines, hunk.added, strict=False):
                    findings += [self._finding(changed.path, number, line, rule) for rule in RULES
                                 if rule.pattern.search(line)]  # fmt: skip
        if not findings:
            return StageResult(stage=self.name, outcome=Outcome.PASS, reason="no added code looks for its watcher")
        summary = f"{len(findings)} added line(s) look for a sandbox, CI or watcher (first: {findings[0].summary})"
        return StageResult(stage=self.name, outcome=Outcome.PASS, reason=summary, evidence=findings)

    @staticmethod
    def _finding(path: str, number: int, line: str, rule: Rule) -> Evidence:
        return Evidence(
            kind=EvidenceKind.EVASION,
            grounded=True,
            summary=f"{path}:{number} {rule.why} ({rule.name})",
            details=EvasionDetails(path=path, line=number, rule=rule.name, text=line.strip()[:200]),
        )


def evasion_findings(results: list[StageResult]) -> list[Evidence]:
    return [e for r in results for e in r.evidence if e.kind == EvidenceKind.EVASION]
