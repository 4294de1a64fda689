"""Stage 2 on the docker backend, end to end: a real uv venv made on the host from Debian's interpreter
(base prefix /usr) runs pytest inside the container as its unprivileged user, on the image's own interpreter —
the host's /usr is never bound over the container's. Also: engine and start failures are one clear line.

Skipped only when the docker engine does not answer (CI starts dockerd and builds the image: .ci/run)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cascade.config import parse_config
from cascade.errors import CascadeError, ToolUnavailable
from cascade.execution.envs import EnvSpec, ensure_environment
from cascade.models import EvidenceKind, Outcome, ProbeDetails, ReviewRequest, StageResult
from cascade.pipeline import review
from cascade.redteam.safety import preflight
from cascade.sandbox.base import RunSpec, Sandbox
from cascade.sandbox.docker import DEFAULT_IMAGE, DockerSandbox, bound_read_only_paths, is_image_provided
from cascade.stages.probes import ProbesStage
from tests.support import MakeRepo, diff_of, sandbox_backend

pytestmark = pytest.mark.slow  # every test here runs the docker engine
# Debian interpreters docker/make-base-image.sh puts into the image (bullseye's 3.9 first: the old-repo case).
IMAGE_PYTHONS = ["/usr/bin/python3.9", "/usr/bin/python3.11"]

CALC = "def divide(a, b):\n    return a / b\n"
ZERO_TEST = "from pkg.calc import divide\n\n\ndef test_zero():\n    assert divide(1, 0) is None\n"
BASE_FILES = {"pkg/__init__.py": "", "pkg/calc.py": CALC, "tests/__init__.py": ""}


def fix(returned: str) -> str:
    return CALC.replace("    return a / b", f"    if b == 0:\n        return {returned}\n    return a / b")


@pytest.fixture(scope="module")
def docker_sandbox() -> Sandbox:
    return sandbox_backend("docker")


@pytest.fixture(scope="module")
def host_python() -> str:
    found = next((p for p in IMAGE_PYTHONS if Path(p).is_file()), None)
    if found is None or shutil.which("uv") is None:
        pytest.skip(f"needs uv and one of {IMAGE_PYTHONS} on the host (the interpreters the image carries)")
    return found


@pytest.fixture(scope="module")
def env_cache(tmp_path_factory: pytest.TempPathFactory, host_python: str) -> Path:
    """One cached venv for the module: what Stage 2 builds, made once (the reviews below reuse it)."""
    cache = tmp_path_factory.mktemp("envs")
    ensure_environment(EnvSpec(repo="repo0", python=host_python), cache_dir=cache, timeout=600)
    return cache


def stage2_on_docker(repo: Path, patch: str, host_python: str, cache: Path) -> StageResult:
    config = parse_config(
        {
            "sandbox": {"backend": "docker", "docker_image": DEFAULT_IMAGE, "timeout_seconds": 120},
            "env": {"python": host_python, "install_project": False, "cache_dir": str(cache)},
            "probes": {"regression": False},
        }
    )
    verdict = review(ReviewRequest(repo=str(repo), patch_text=patch, config=config), stages=[ProbesStage()])
    return verdict.stages[0]


def probe_of(result: StageResult) -> ProbeDetails:
    return next(e.details for e in result.evidence if isinstance(e.details, ProbeDetails))


@pytest.mark.usefixtures("docker_sandbox")
def test_pr_test_still_failing_on_the_patch_rejects_on_docker(
    make_repo: MakeRepo, host_python: str, env_cache: Path
) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": fix("0"), "tests/test_zero.py": ZERO_TEST})
    result = stage2_on_docker(repo, patch, host_python, env_cache)
    assert result.outcome == Outcome.REJECT, result.reason
    info = next(e for e in result.evidence if e.kind == EvidenceKind.INFO and "sandbox" in e.summary)
    assert info.details.isolation == "docker"
    assert str(info.details.python).startswith(host_python.removeprefix("/usr/bin/python"))
    probe = probe_of(result)
    assert probe.test_id == "tests/test_zero.py::test_zero"
    assert probe.base.status == "behavioural_fail"
    assert probe.patched.status == "behavioural_fail"
    assert "assert 0 is None" in probe.patched.excerpt


@pytest.mark.usefixtures("docker_sandbox")
def test_pr_test_passing_on_the_patch_does_not_reject_on_docker(
    make_repo: MakeRepo, host_python: str, env_cache: Path
) -> None:
    repo = make_repo(BASE_FILES)
    patch = diff_of(repo, {"pkg/calc.py": fix("None"), "tests/test_zero.py": ZERO_TEST})
    result = stage2_on_docker(repo, patch, host_python, env_cache)
    assert result.outcome == Outcome.PASS, result.reason
    probe = probe_of(result)
    assert probe.base.status == "behavioural_fail"
    assert probe.patched.status == "pass"
    assert probe.executed_changed_lines == {"pkg/calc.py": [2, 3]}  # coverage ran in the container too
    assert not [e for e in result.evidence if e.kind == EvidenceKind.SIDE_EFFECT and e.grounded]


def test_system_trees_are_never_bound_over_the_container(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    venv.mkdir()
    assert bound_read_only_paths([str(venv), "/usr", "/usr/lib/python3", "/", "/var", str(venv), "/no/such"]) == [
        str(venv)
    ]
    assert is_image_provided("/usr/local") and is_image_provided("/etc/passwd") and is_image_provided("/opt")
    assert not is_image_provided("/opt/python3.12") and not is_image_provided("/var/tmp/envs/x")


def test_host_usr_as_read_only_path_keeps_docker_init_and_runs_as_non_root(
    docker_sandbox: DockerSandbox, tmp_path: Path
) -> None:
    """The failure this module guards against: a venv's base prefix /usr used to hide the container's docker-init."""
    spec = RunSpec(argv=["python3", "-c", "import os; print(os.getuid())"], tree=str(tmp_path),
                   read_only_paths=["/usr"], timeout_seconds=60)  # fmt: skip
    result = docker_sandbox.run(spec)
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout.strip()) != 0
    assert not result.harmful_side_effects


def test_a_program_missing_from_the_image_is_one_clear_line(docker_sandbox: DockerSandbox, tmp_path: Path) -> None:
    spec = RunSpec(argv=["/usr/bin/python3.0-no-such"], tree=str(tmp_path), timeout_seconds=60)
    with pytest.raises(ToolUnavailable) as caught:
        docker_sandbox.run(spec)
    message = str(caught.value)
    assert "\n" not in message and "could not start" in message and DEFAULT_IMAGE in message
    assert "make-base-image.sh" in message


@pytest.mark.usefixtures("docker_sandbox")
def test_an_engine_error_is_one_clear_line(tmp_path: Path) -> None:
    spec = RunSpec(argv=["true"], tree=str(tmp_path), timeout_seconds=60)
    with pytest.raises(ToolUnavailable) as caught:
        DockerSandbox(image="cascade-missing:none").run(spec)
    assert "\n" not in str(caught.value) and str(caught.value).startswith("docker engine error")


def test_the_image_carries_the_debian_interpreters_for_the_unprivileged_user(
    docker_sandbox: DockerSandbox, tmp_path: Path
) -> None:
    code = "import sys, distutils.version, ssl, sqlite3; print('%d.%d' % sys.version_info[:2])"
    for python, version in (("/usr/bin/python3.9", "3.9"), ("/usr/bin/python3", "3.11")):
        result = docker_sandbox.run(RunSpec(argv=[python, "-c", code], tree=str(tmp_path), timeout_seconds=60))
        assert (result.exit_code, result.stdout.strip()) == (0, version), result.stderr
    # Host venv caches (~/.cache) and pyenv interpreters are mounted under /root: it must be traversable.
    result = docker_sandbox.run(RunSpec(argv=["sh", "-c", "test -x /root && ! test -r /root"], tree=str(tmp_path)))
    assert result.exit_code == 0


def test_red_team_preflight_runs_a_debian_venv_on_docker(
    docker_sandbox: DockerSandbox, host_python: str, env_cache: Path
) -> None:
    env = ensure_environment(EnvSpec(repo="repo0", python=host_python), cache_dir=env_cache)
    assert "/usr" in env.exposed_paths()  # the venv's base prefix: exactly what used to hide docker-init
    report = preflight(docker_sandbox, env.python, env.exposed_paths())
    assert report["isolation"] == "docker" and report["home_private"] and report["tmp_private"]


@pytest.mark.usefixtures("docker_sandbox")
def test_red_team_preflight_reports_a_broken_backend_in_one_line() -> None:
    with pytest.raises(CascadeError) as caught:
        preflight(DockerSandbox(image="cascade-missing:none"), "/usr/bin/python3")
    assert "\n" not in str(caught.value) and "cannot run the preflight: docker engine error" in str(caught.value)
