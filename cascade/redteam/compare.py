"""Two red-team runs, case by case: the same rows, the wall time aside? (`cascade bench compare` on two
``redteam.jsonl``, as on two benchmark results files: a change that should not alter what the oracle records is
checked against the suite's rows before and after.)"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cascade.errors import BadInput, read_input_text
from cascade.redteam.models import CaseResult


class CaseDifference(BaseModel):
    model_config = ConfigDict(extra="forbid")

    case: str
    backend: str
    fields: list[str] = Field(description="The row fields that differ, the wall time aside")


class CaseIdentity(BaseModel):
    model_config = ConfigDict(extra="forbid")

    identical: int
    different: list[CaseDifference]
    only_a: int
    only_b: int


def is_case_rows(path: str | Path) -> bool:
    """Whether the file's first row is a red-team case result (not a benchmark trace row)."""
    first = next((line for line in read_input_text(Path(path), "results").splitlines() if line.strip()), "")
    try:
        CaseResult.model_validate_json(first)
    except ValidationError:
        return False
    return True


def read_cases(path: str | Path) -> list[CaseResult]:
    rows: list[CaseResult] = []
    for number, line in enumerate(read_input_text(Path(path), "results").splitlines(), start=1):
        if line.strip():
            try:
                rows.append(CaseResult.model_validate_json(line))
            except ValidationError:
                raise BadInput(f"{path}:{number}: not a red-team case row") from None
    return rows


def case_identity(rows_a: list[CaseResult], rows_b: list[CaseResult]) -> CaseIdentity:
    """Rows of A and B paired by (case, backend), compared with their wall times left out."""
    by_a = {(r.case, r.backend): r.model_dump(mode="json", exclude={"seconds"}) for r in rows_a}
    by_b = {(r.case, r.backend): r.model_dump(mode="json", exclude={"seconds"}) for r in rows_b}
    different = [
        CaseDifference(case=k[0], backend=k[1], fields=sorted(f for f in by_a[k] if by_a[k][f] != by_b[k][f]))
        for k in sorted(by_a.keys() & by_b.keys())
        if by_a[k] != by_b[k]
    ]
    common = len(by_a.keys() & by_b.keys())
    return CaseIdentity(identical=common - len(different), different=different,
                        only_a=len(by_a.keys() - by_b.keys()), only_b=len(by_b.keys() - by_a.keys()))  # fmt: skip


def render_case_identity(identity: CaseIdentity, name_a: str, name_b: str) -> str:
    lines = [f"# cascade bench compare: red-team cases of `{name_a}` (A) vs `{name_b}` (B)", "",
             f"Rows, the wall time aside: {identity.identical} identical, {len(identity.different)} different, "
             f"{identity.only_a} only in A, {identity.only_b} only in B."]  # fmt: skip
    lines += [f"- {d.case} ({d.backend}): {', '.join(d.fields)}" for d in identity.different]
    return "\n".join(lines) + "\n"
