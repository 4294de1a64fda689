"""The bad-input matrix: `cascade review` over bad inputs, per case its exit code, first line and verdict reason.

Test support (tests/test_crlf.py runs every patch case with its CRLF twin and the rest for a documented exit code;
other tests build their repositories with the helpers here) and a printable table: it checks the command-line
contract rather than measuring the gate, so it lives beside the tests, not in `benchmarks/`. Every patch case also
runs as its CRLF twin (``<case> +CRLF``): a CRLF patch must get exactly the verdict of its LF twin. The repository
under review is a fresh git repository holding this project's demo package (``examples/``), so the demo patches
apply to it.

    python3 -m tests.bad_inputs > benchmarks/results/bad_input_matrix.after.md

Run it from the project root: ``python3 -m cascade`` then runs this checkout's package.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIT_ENV = {
    "GIT_AUTHOR_NAME": "m",
    "GIT_AUTHOR_EMAIL": "m@example.invalid",
    "GIT_COMMITTER_NAME": "m",
    "GIT_COMMITTER_EMAIL": "m@example.invalid",
}
TEST_ONLY = """\
diff --git a/tests/test_x.py b/tests/test_x.py
new file mode 100644
--- /dev/null
+++ b/tests/test_x.py
@@ -0,0 +1,2 @@
+def test_x():
+    assert True
"""
BINARY = "diff --git a/img.png b/img.png\nindex 1111111..2222222 100644\nBinary files a/img.png and b/img.png differ\n"


@dataclass
class Case:
    name: str
    args: list[str]
    patch: str | bytes | None = None  # written to <tmp>/<name>.diff and passed as the PATCH argument
    env: dict[str, str] = field(default_factory=dict)
    python: str = sys.executable
    crlf_twin: bool = True


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    )
    if proc.returncode != 0:
        raise RuntimeError(f"git {args}: {proc.stderr}")
    return proc.stdout


def make_demo_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    shutil.copytree(ROOT / "examples", path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    git(path, "add", "-A")
    git(path, "commit", "-qm", "demo")
    return path


def diff_of(repo: Path, changes: dict[str, str]) -> str:
    """A patch made by git: edit files in ``repo``, diff, restore the checkout."""
    for rel, text in changes.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    patch = git(repo, "diff", "--cached")
    git(repo, "reset", "-q", "--hard", "HEAD")
    return patch


def make_partial_repo(path: Path) -> Path:
    """The demo repository plus a data blob whose object is then deleted: like a mirror missing a large blob."""
    make_demo_repo(path)
    (path / "data.bin").write_bytes(os.urandom(2048))
    git(path, "add", "data.bin")
    git(path, "commit", "-qm", "data")
    blob = git(path, "rev-parse", "HEAD:data.bin").strip()
    (path / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    return path


def venv_without_tools(path: Path) -> str:
    """A venv that sees cascade's packages but whose scripts directory holds ruff and no pyright (as on main before
    the first bad-input matrix, where ruff ran as ``python -m ruff`` and pyright came from PATH)."""
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(path)], check=True)
    ruff = shutil.which("ruff", path=sysconfig.get_path("scripts"))
    if ruff:
        (path / "bin" / "ruff").symlink_to(ruff)
    return str(path / "bin" / "python")


def cases(tmp: Path, twins_only: bool = False) -> list[Case]:
    """The matrix; ``twins_only`` keeps the patch cases that run with a CRLF twin (what tests/test_crlf.py runs)."""
    demo = str(make_demo_repo(tmp / "demo"))
    plain = tmp / "plain"
    plain.mkdir()
    empty = tmp / "nocommits"
    empty.mkdir()
    git(empty, "init", "-q")
    partial = str(make_partial_repo(tmp / "partial"))
    fix = (ROOT / "examples/demo/fix.diff").read_text()
    clean = (ROOT / "examples/demo/clean.diff").read_text()
    stats_path = "examples/demo/calc/stats.py"
    stats = (ROOT / stats_path).read_text()
    syntax_error = diff_of(
        Path(demo),
        {
            stats_path: stats.replace(
                "def stdev(values: Sequence[float]) -> float:", "def stdev(values: Sequence[float]) -> float", 1
            )
        },
    )
    unapplicable = clean.replace("    centre = mean(values)", "    centre = median(values)", 1)
    config = tmp / "configs"
    config.mkdir()
    (config / "unknown.yaml").write_text("stage9:\n  x: 1\n")
    (config / "invalid.yaml").write_text("llm: [unclosed\n")
    (config / "apikey.yaml").write_text("llm:\n  model: openai/x\n  api_key: sk-not-a-real-key\n")
    (config / "unreachable.yaml").write_text(
        "llm:\n  model: openai/x\n  api_base: http://127.0.0.1:9/v1\n  max_retries: 1\n  retry_backoff_seconds: 0\n"
    )
    (config / "tiny.yaml").write_text("limits:\n  max_patch_bytes: 100\n")
    no_path = {"PATH": "/usr/bin:/bin"}
    repo = ["--repo", demo]
    matrix = [
        Case("demo fix.diff (LF)", repo, fix),
        Case("demo clean.diff (LF)", repo, clean),
        Case("syntax error", repo, syntax_error),
        Case("test-only change", repo, TEST_ONLY),
        Case("empty patch", repo, ""),
        Case("whitespace-only file", repo, "\n\n  \n"),
        Case("not a diff", repo, "hello, world\n"),
        Case("malformed hunk", repo, "--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-a\n"),
        Case("git binary diff", repo, BINARY),
        Case("raw binary bytes", repo, b"\x89PNG\r\n\x1a\n\0\0\0", crlf_twin=False),
        Case("huge patch (over cap)", [*repo, "--config", str(config / "tiny.yaml")], clean),
        Case("unapplicable patch", repo, unapplicable),
        Case("patch of a missing file", repo, clean.replace("calc/stats.py", "calc/gone.py")),
        Case("missing patch file", [str(tmp / "nope.diff"), *repo], crlf_twin=False),
        Case("not a git repo", ["--repo", str(plain)], clean),
        Case("repo with no commits", ["--repo", str(empty)], clean),
        Case("unknown base ref", [*repo, "--base", "nope"], clean),
        Case("tools next to interpreter, PATH without them", repo, fix, env=no_path, crlf_twin=False),
        Case(
            "missing tool (no pyright anywhere)",
            repo,
            fix,
            env=no_path,
            python="" if twins_only else venv_without_tools(tmp / "venv"),
            crlf_twin=False,
        ),
        Case("output to a missing dir", [*repo, "--output", str(tmp / "no/such/dir/r.txt")], fix, crlf_twin=False),
        Case("output to a dir", [*repo, "--output", str(tmp)], fix, crlf_twin=False),
        Case("unknown config key", [*repo, "--config", str(config / "unknown.yaml")], clean, crlf_twin=False),
        Case("invalid YAML config", [*repo, "--config", str(config / "invalid.yaml")], clean, crlf_twin=False),
        Case("llm.api_key in config", [*repo, "--config", str(config / "apikey.yaml")], clean, crlf_twin=False),
        Case("unreachable api_base", [*repo, "--config", str(config / "unreachable.yaml")], clean, crlf_twin=False),
        Case("partial mirror (missing blob)", ["--repo", partial], clean),
    ]
    return [c for c in matrix if c.crlf_twin] if twins_only else matrix


def with_crlf(data: str | bytes) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return raw.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


def run(case: Case, tmp: Path, patch: bytes | None, label: str) -> tuple[str, int, str, str, float]:
    """Run one case: (label, exit code, first line of stderr+stdout, the text report's reason line, seconds)."""
    args = list(case.args)
    if patch is not None:
        path = tmp / f"{label.replace(' ', '_').replace('/', '_')}.diff"
        path.write_bytes(patch)
        args = [str(path), *args]
    env = {**os.environ, **case.env}
    started = time.perf_counter()
    proc = subprocess.run(
        [case.python, "-m", "cascade", "review", *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=900
    )
    seconds = time.perf_counter() - started
    out = (proc.stderr + proc.stdout).replace(str(tmp), "<tmp>")
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    return label, proc.returncode, first, reason_of(out), seconds


def reason_of(text_report: str) -> str:
    """The text report's Reason, with the lines it wraps onto joined."""
    lines = text_report.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith("Reason:")), None)
    if start is None:
        return ""
    parts = [lines[start].removeprefix("Reason:").strip()]
    for ln in lines[start + 1 :]:
        if not ln.startswith(" ") or not ln.strip():
            break
        parts.append(ln.strip())
    return " ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default=None, help="Run only cases whose name contains this text.")
    options = parser.parse_args()
    print(
        f"# bad-input matrix — `{' '.join(['python3', *sys.argv])}`\n\n"
        f"python {sys.executable}, scripts dir {sysconfig.get_path('scripts')}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n"
    )
    print("| case | exit | first line | reason (text report) |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="cascade-matrix-") as tmp_name:
        tmp = Path(tmp_name)
        for case in cases(tmp):
            if options.only and options.only not in case.name:
                continue
            raw = case.patch.encode() if isinstance(case.patch, str) else case.patch
            runs = [(case.name, raw)]
            if case.crlf_twin and raw is not None:
                runs.append((f"{case.name} +CRLF", with_crlf(raw)))
            for label, patch in runs:
                name, code, first, reason, _ = run(case, tmp, patch, label)
                cell = first.replace("|", "\\|")[:400]
                print(f"| {name} | {code} | {cell} | {reason.replace('|', chr(92) + '|')[:400]} |", flush=True)


if __name__ == "__main__":
    main()
