"""`cascade bench scan NAME`: one scan of the dev data (`cascade/bench/scans/`), its rows and their summary."""

from __future__ import annotations

import shlex
import sys
import tempfile
from pathlib import Path

import click

from cascade.bench.data import DATA_ENV
from cascade.bench.repos import REPOS_ENV
from cascade.errors import BadInput

ROWS_FILE, SUMMARY_FILE, COMMAND_FILE = "rows.jsonl", "summary.md", "COMMAND.txt"


@click.command("scan")
@click.argument("name")
@click.option("--data-dir", envvar=DATA_ENV, show_envvar=True, type=click.Path(file_okay=False, path_type=str),
              help="The SWE-bench dev data (its README names the files).")  # fmt: skip
@click.option("--repos-dir", envvar=REPOS_ENV, show_envvar=True, type=click.Path(file_okay=False, path_type=str),
              help="Local repositories (as `cascade bench run`): scans that read base trees use them.")  # fmt: skip
@click.option("--output", "out_dir", required=True, type=click.Path(path_type=str),
              help=f"Output directory: {ROWS_FILE} (one typed row per thing scanned) and {SUMMARY_FILE}.")  # fmt: skip
@click.option("--jobs", default=1, show_default=True, type=click.IntRange(min=1), help="Worker processes.")
@click.option("--limit", default=0, type=click.IntRange(min=0), help="A long scan's first N things only (0: all).")
@click.option("--reps", default=7, show_default=True, type=click.IntRange(min=1), help="A timing scan's rounds.")
@click.option("--from-rows", is_flag=True, help=f"Only recompute {SUMMARY_FILE} from the directory's {ROWS_FILE}.")
def scan_command(
    name: str,
    data_dir: str | None,
    repos_dir: str | None,
    out_dir: str,
    jobs: int,
    limit: int,
    reps: int,
    from_rows: bool,
) -> None:
    """Run measurement NAME (injection, hygiene, …, sandbox-overhead): every number of its summary recomputes from
    its rows."""
    from cascade.bench.data import DevData
    from cascade.bench.repos import RepoResolver
    from cascade.bench.scans import ScanInputs, registry

    scans = registry()
    if name not in scans:
        raise BadInput(f"no scan named {name!r}; the scans: {', '.join(sorted(scans))}")
    scan, out = scans[name], Path(out_dir)
    if from_rows:
        rows_text = _read(out / ROWS_FILE)
        rows = [scan.row.model_validate_json(line) for line in rows_text.splitlines() if line.strip()]
        command = _read(out / COMMAND_FILE).strip().splitlines()[-1]
    else:
        if scan.needs_data and (data_dir is None or not DevData(data_dir).has("lite")):
            raise BadInput(f"scan {name} needs the dev data: --data-dir or {DATA_ENV} (a directory with its README)")
        if out.exists() and not out.is_dir():
            raise BadInput(f"--output {out} is a file: give a directory")
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"cascade-scan-{name}-") as scratch:
            inputs = ScanInputs(DevData(data_dir or "."), RepoResolver(repos_dir), Path(scratch), jobs, limit, reps)
            rows = list(scan.rows(inputs))
        (out / ROWS_FILE).write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
        command = shlex.join(["cascade", *sys.argv[1:]])
        (out / COMMAND_FILE).write_text(command + "\n", encoding="utf-8")
    lines = [f"# {scan.title}", "", f"Command: `{command}`", "", *scan.summary(rows)]
    (out / SUMMARY_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    click.echo(f"{len(rows)} row(s): {out / ROWS_FILE}; summary: {out / SUMMARY_FILE}")


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--from-rows: cannot read {path}: {exc.strerror}") from None
