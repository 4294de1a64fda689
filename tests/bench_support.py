"""The self-made SWE-bench-format fixture `cascade bench`'s tests replay (real git repositories, every label class
and failure kind), and running the CLI on it. Shared by tests/test_bench.py and tests/test_bench_ray.py."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from click.testing import CliRunner

from cascade.cli import cli
from tests.support import diff_of, run_git

OPS = "def add(a, b):\n    return a + b\n"
TEST_OPS = "from calc.ops import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
MODEL = "agent-x"


def init_repo(path: Path, files: dict[str, str]) -> str:
    path.mkdir(parents=True)
    run_git(path, "init", "-q", "-b", "main")
    for rel, text in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_text(text)
    run_git(path, "add", "-A")
    run_git(path, "commit", "-q", "-m", "base")
    return run_git(path, "rev-parse", "HEAD").strip()


def write_jsonl(path: Path, records: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def make_swe(tmp_path: Path) -> dict[str, Path]:
    """repos dir + task rows + predictions + results covering every label class and failure kind."""
    repos = tmp_path / "repos"
    calc = repos / "acme__calc"  # non-bare, SWE-bench spelling
    base = init_repo(calc, {"calc/__init__.py": "", "calc/ops.py": OPS, "tests/test_ops.py": TEST_OPS})
    good = diff_of(calc, {"calc/ops.py": OPS + "\n\ndef sub(a, b):\n    return a - b\n"})
    # a syntax error: undefined names left the default allow-list (one resolved submission has a latent NameError)
    undefined = diff_of(calc, {"calc/ops.py": OPS.replace("a + b", "a + (b")})
    test_only = diff_of(calc, {"tests/test_ops.py": TEST_OPS + "\n\ndef test_more():\n    assert add(2, 2) == 4\n"})
    stale = undefined.replace("-    return a + b", "-    return a ** b")  # removes a line the file lacks
    tasks = [
        {
            "instance_id": f"acme__calc-{i}",
            "repo": "acme/calc",
            "base_commit": base,
            "patch": good,
            "problem_statement": "add sub()",
        }
        for i in range(1, 6)
    ] + [
        {
            "instance_id": f"ghost__missing-{i}",
            "repo": "ghost/missing",
            "base_commit": base,
            "patch": good,
            "problem_statement": "x",
        }
        for i in (1, 2)
    ]
    patches = {
        "acme__calc-1": good,  # resolved → acceptable
        "acme__calc-2": undefined,  # unresolved → defect, Stage 1 rejects (syntax error)
        "acme__calc-3": "",  # empty class, Stage 0 rejects
        "acme__calc-4": test_only,  # unresolved → defect, Stage 0 rejects
        "acme__calc-5": stale,  # resolved but does not apply here → bad input
        "ghost__missing-1": undefined,  # repo unavailable → Stage 1 skipped, uncertain
        "ghost__missing-2": test_only,  # repo unavailable, Stage 0 still rejects
    }
    preds = [{"instance_id": k, "model_name_or_path": MODEL, "model_patch": v} for k, v in patches.items()]
    preds.append({"instance_id": "not__in-tasks-1", "model_name_or_path": MODEL, "model_patch": good})
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"resolved": ["acme__calc-1", "acme__calc-5"], "unresolved": []}))
    return {
        "repos": repos,
        "tasks": write_jsonl(tmp_path / "tasks.jsonl", tasks),
        "preds": write_jsonl(tmp_path / "preds.jsonl", preds),
        "results": results,
        "out": tmp_path / "out",
    }


def run_cli(args: list[str]) -> str:
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def run_args(swe: dict[str, Path], jobs: int) -> list[str]:
    return [
        "bench", "run", "--tasks", str(swe["tasks"]), "--predictions", str(swe["preds"]),
        "--results", str(swe["results"]), "--repos-dir", str(swe["repos"]), "--output", str(swe["out"]),
        "--jobs", str(jobs), "--timeout", "300", "--quiet", "--resamples", "500",
    ]  # fmt: skip
