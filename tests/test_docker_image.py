"""The Dockerfile: built from the locally made base image (no registry is reachable), then run
with no network on the demo example. The image must give the same static verdict as the gate on the host — which
proves ruff, pyright and node were pre-warmed at build time and nothing is fetched at review time.

Slow (a fresh build downloads the dependencies from PyPI); skipped only when the docker engine does not answer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import run_git

ROOT = Path(__file__).resolve().parents[1]
BASE_IMAGE = "cascade-base:bookworm"
TEST_IMAGE = "cascade-gate:test"
IMAGE_UID = 10001  # CASCADE_UID in the Dockerfile
DEMO = ROOT / "examples" / "demo"
BUILD_TIMEOUT = 840

# The build (fixture set-up) counts against pytest-timeout: a fresh one downloads every dependency from PyPI.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def docker(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    if shutil.which("docker") is None or docker("info", timeout=20).returncode != 0:
        pytest.skip("the docker engine does not answer")
    # The script skips the work when the image exists at its current recipe (and rebuilds an outdated one).
    made = subprocess.run(
        ["bash", str(ROOT / "docker" / "make-base-image.sh"), BASE_IMAGE], capture_output=True, text=True
    )
    assert made.returncode == 0, f"could not make {BASE_IMAGE}: {made.stderr.strip()[-2000:]}"
    context = build_context(tmp_path_factory.mktemp("context"))
    built = docker(
        "build", "--network=host", "--build-arg", f"BASE_IMAGE={BASE_IMAGE}", "-t", TEST_IMAGE, str(context),
        timeout=BUILD_TIMEOUT,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return TEST_IMAGE


def build_context(context: Path) -> Path:
    """Only what the Dockerfile copies, plus the CA bundle this machine trusts (a TLS-intercepting proxy may sit
    between the build and PyPI); the bundle goes to the build context, never into the repository."""
    for name in ("Dockerfile", "pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, context / name)
    shutil.copytree(ROOT / "cascade", context / "cascade", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (context / "docker").mkdir()
    bundle = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    if Path(bundle).is_file():
        shutil.copy2(bundle, context / "docker" / "build-ca.pem")
    return context


def demo_case(repo: Path) -> tuple[Path, Path | None]:
    """A git repo at the demo's base plus the patch: examples/demo/fix.diff when present, else a tiny patch."""
    repo.mkdir()
    run_git(repo, "init", "-q", "-b", "main")
    if (DEMO / "fix.diff").is_file() and (DEMO / "calc").is_dir():
        shutil.copytree(DEMO / "calc", repo / "examples/demo/calc", ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(DEMO / "issue.md", repo / "examples/demo/issue.md")
        patch, issue = DEMO / "fix.diff", Path("examples/demo/issue.md")
    else:
        (repo / "pkg").mkdir()
        (repo / "pkg" / "__init__.py").write_text("")
        (repo / "pkg" / "mod.py").write_text("def area(r):\n    return 3.14 * r * r\n")
        patch, issue = repo.parent / "tiny.diff", None
        patch.write_text(
            "--- a/pkg/mod.py\n+++ b/pkg/mod.py\n@@ -1,2 +1,2 @@\n def area(r):\n-    return 3.14 * r * r\n"
            "+    return math.pi * r * r\n"
        )
    run_git(repo, "add", "-A")
    run_git(repo, "commit", "-q", "-m", "base")
    return patch, issue


def review_args(patch: str, issue: Path | None) -> list[str]:
    return ["review", patch, "--format", "json", *(["--issue", str(issue)] if issue else [])]


def static_stage(verdict: dict[str, Any]) -> dict[str, Any]:
    return next(stage for stage in verdict["stages"] if stage["stage"] == "static")


def diagnostic_rules(stage: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted((d["tool"], d["rule"], d["path"]) for e in stage["evidence"] for d in e["diagnostics"])


def test_image_reviews_the_demo_offline_like_the_host(image: str, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    patch, issue = demo_case(repo)
    host = subprocess.run(
        [sys.executable, "-m", "cascade", *review_args(str(patch), issue), "--repo", str(repo)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    host_verdict = json.loads(host.stdout)

    shutil.copy(patch, tmp_path / "change.diff")
    if os.getuid() == 0:  # the image's user must own the checkout it reviews (git refuses foreign repositories)
        subprocess.run(["chown", "-R", f"{IMAGE_UID}:{IMAGE_UID}", str(tmp_path)], check=True)
    inside = docker(
        "run", "--rm", "--network", "none", "-v", f"{repo}:/repo", "-v", f"{tmp_path / 'change.diff'}:/change.diff:ro",
        "-w", "/repo", image, *review_args("/change.diff", issue),
        timeout=300,
    )  # fmt: skip
    assert inside.returncode in (0, 1, 2), inside.stderr
    verdict = json.loads(inside.stdout)
    assert inside.returncode == {"accept": 0, "reject": 1, "uncertain": 2}[verdict["decision"]]
    assert (verdict["decision"], inside.returncode) == (host_verdict["decision"], host.returncode)

    static = static_stage(verdict)
    assert static["outcome"] != "skipped"
    assert not [e for e in static["evidence"] if e["kind"] == "unavailable"], "a static tool was missing offline"
    assert diagnostic_rules(static) == diagnostic_rules(static_stage(host_verdict))
    assert diagnostic_rules(static), "the demo patch must produce a patch-caused diagnostic"


def test_image_runs_as_a_non_root_user_with_cascade_as_entrypoint(image: str) -> None:
    config = docker("image", "inspect", image, "--format", "{{json .Config}}")
    settings = json.loads(config.stdout)
    assert settings["Entrypoint"] == ["cascade"]
    assert settings["User"] not in ("", "root", "0")
    version = docker("run", "--rm", "--network", "none", image, "--version")
    assert version.returncode == 0 and version.stdout.startswith("cascade, version")
