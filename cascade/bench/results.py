"""The results file of a run: one JSON row per (instance, model, arm), appended as rows finish, so a killed run
resumes after its last whole row."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from cascade.bench.rows import TraceRow, TraceStatus
from cascade.errors import BadInput, read_input_text

# --- the results file --------------------------------------------------------------------------------------


def read_rows(path: str | Path) -> list[TraceRow]:
    """Rows of a results JSONL; a torn last line (a run killed mid-write) is ignored, any other bad line is not."""
    path = Path(path)
    lines = read_input_text(path, "results").splitlines()
    rows: list[TraceRow] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            rows.append(TraceRow.model_validate_json(line))
        except ValidationError:
            if number == len(lines):
                break
            raise BadInput(f"{path}:{number}: not a result row of this schema") from None
    return rows


def _repair_tail(path: Path) -> None:
    """Cut a torn last line so appended rows start on a line of their own."""
    data = path.read_bytes()
    if data and not data.endswith(b"\n"):
        path.write_bytes(data[: data.rfind(b"\n") + 1])


def prepare_output(path: Path) -> list[TraceRow]:
    """Rows already in the output (created empty when new), after cutting a torn last line."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return []
    _repair_tail(path)
    return read_rows(path)


def failed_keys(rows: list[TraceRow]) -> set[tuple[str, str, str]]:
    return {r.key for r in rows if r.status in (TraceStatus.ERROR, TraceStatus.TIMEOUT)}


def drop_rows(path: Path, rows: list[TraceRow], keys: set[tuple[str, str, str]]) -> None:
    """Rewrite the output without the rows about to run again, so each key keeps one row."""
    if keys:
        path.write_text("".join(r.model_dump_json() + "\n" for r in rows if r.key not in keys), encoding="utf-8")
