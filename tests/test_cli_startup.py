"""`cascade --help` and `cascade review --help` start without the heavy imports (docs/architecture.md, Start-up)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cascade.bench.cli import bench
from cascade.cli import FORMATS, CascadeGroup, cli
from cascade.report import FORMATS as REPORT_FORMATS

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pydantic", "yaml", "cascade.config", "cascade.models", "cascade.bench.cli", "rich")


def _modules_after(*argv: str) -> set[str]:
    code = (
        "import sys\nfrom cascade.cli import main\nsys.argv = ['cascade', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\nprint('\\n'.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "Usage:" in proc.stdout
    return set(proc.stderr.split())


def test_help_imports_neither_pydantic_nor_the_config() -> None:
    for argv in (["--help"], ["review", "--help"], ["config", "--help"]):
        loaded = _modules_after(*argv)
        assert not [m for m in HEAVY if m in loaded], argv


def test_the_lazy_bench_command_is_listed_with_its_own_help() -> None:
    assert CascadeGroup.lazy["bench"][1] == " ".join((bench.help or "").split())
    listing = CliRunner().invoke(cli, ["--help"]).output
    assert "bench   Replay SWE-bench-format predictions" in listing
    assert "Replay SWE-bench-format" in CliRunner().invoke(cli, ["bench", "--help"]).output


def test_the_cli_offers_every_report_format() -> None:
    assert FORMATS == REPORT_FORMATS
