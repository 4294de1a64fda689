"""The flow shared by every backend (docs/architecture.md, "Run model"): fresh places, a scrubbed environment with
decoys, the supervisor around the command, limits, then the oracle over everything the run did and produced. The
host-process backends (bwrap, none) run it here; docker reuses the pieces."""

from __future__ import annotations

import os
import sys

from cascade.decoys import decoys
from cascade.safety import SideEffect
from cascade.sandbox import safefs
from cascade.sandbox.allowlist import RunScope
from cascade.sandbox.base import HOOK, RESULTS, TREE, Isolation, RunResult, RunSpec
from cascade.sandbox.oracle import SUPERVISOR, Observation, observe
from cascade.sandbox.places import Layout, RunPlaces
from cascade.sandbox.process import run_limited, scrubbed_env

MIB = 1024 * 1024
SYSTEM_PYTHON = "/usr/bin/python3"  # the supervisor's interpreter; docker/make-base-image.sh puts one in the image


def expand(text: str, layout: Layout) -> str:
    """The caller's tokens for the run's places replaced by where this backend shows them."""
    return text.replace(TREE, layout.tree).replace(RESULTS, layout.results).replace(HOOK, layout.hook)


def run_env(spec: RunSpec, layout: Layout) -> tuple[dict[str, str], list[str]]:
    """The environment a run gets: scrubbed, the caller's extras (tokens expanded), decoy tokens, the hook on
    PYTHONPATH (an interpreter that drops it still loads the hook through the test environment's ``.pth``)."""
    env, dropped = scrubbed_env({k: expand(v, layout) for k, v in spec.env.items()}, layout.home, layout.scratch)
    env.update(decoys().env())
    env["PYTHONPATH"] = layout.hook + (":" + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env, dropped


def supervised(python: str, layout: Layout, argv: list[str]) -> list[str]:
    """argv run under the supervisor (``audit_hook/_supervise.py``), isolated from the run's environment."""
    return [python, "-I", "-S", f"{layout.hook}/{SUPERVISOR}", "--", *[expand(a, layout) for a in argv]]


def host_python() -> str:
    """The interpreter for the supervisor: the system one (visible in every backend), else the gate's own."""
    return SYSTEM_PYTHON if os.path.exists(SYSTEM_PYTHON) else sys.executable


def scope_of(places: RunPlaces, read_only: list[str], isolated_network: bool) -> RunScope:
    layout = places.layout
    gate = [layout.hook, layout.audit, layout.objects]
    return RunScope(worktree=layout.tree, git_dirs=[f"{layout.tree}/.git"], scratch=layout.scratch, tmp=layout.tmp,
                    home=layout.home, read_only=[*read_only, *(g for g in gate if g)], results=layout.results,
                    channel=layout.audit, isolated_network=isolated_network)  # fmt: skip


def read_results(places: RunPlaces) -> list[safefs.ReadBack]:
    cap = places.spec.result_cap_mb * MIB
    return [safefs.read_capped(places.results, name, cap) for name in places.spec.results]


def output_limit(spec: RunSpec, total: int) -> list[SideEffect]:
    if total <= spec.output_cap_mb * MIB:
        return []
    return [SideEffect(kind="resource_limit", target="output", source="supervisor",
                       detail=f"the run printed {total} bytes, over the {spec.output_cap_mb} MiB output cap "
                       "(only the tail was kept)")]  # fmt: skip


def result_of(
    isolation: Isolation, spec: RunSpec, places: RunPlaces, seen: Observation, **outcome: object
) -> RunResult:
    return RunResult.model_validate({
        "isolation": isolation, "argv": list(spec.argv), **outcome, "stdout": seen.stdout, "stderr": seen.stderr,
        "side_effects": seen.effects, "reports": seen.reports, "results": seen.results, "tree": places.layout.tree,
        "notes": list(places.notes),
    })  # fmt: skip


class HostSandbox:
    """Template: a subclass decides the layout the run sees and how argv is wrapped."""

    isolated_network = False

    @property
    def isolation(self) -> Isolation:
        return "none"

    def layout(self, spec: RunSpec) -> Layout | None:
        """Where the run sees its places; None = at their host paths."""
        return None

    def wrap(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        raise TypeError(f"{type(self).__name__} must define wrap")

    def read_only(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        return list(spec.read_only_paths)

    def run(self, spec: RunSpec) -> RunResult:
        places = RunPlaces(spec, self.layout(spec), mounts=spec.read_only_paths)
        try:
            env, dropped = run_env(spec, places.layout)
            argv = self.wrap(spec.model_copy(update={"argv": supervised(host_python(), places.layout, spec.argv)}),
                             places)  # fmt: skip
            outcome = run_limited(argv, spec, env, places.layout.tree if self.isolation == "none" else "/")
            scope = scope_of(places, self.read_only(spec, places), self.isolated_network)
            seen = observe(places, scope, outcome.timed_out, outcome.stdout, outcome.stderr, read_results(places))
            seen.effects += output_limit(spec, outcome.output_bytes)
            return result_of(self.isolation, spec, places, seen, exit_code=outcome.exit_code,
                             timed_out=outcome.timed_out, seconds=outcome.seconds, dropped_env=dropped)  # fmt: skip
        finally:
            places.cleanup()
