"""The `none` backend: no isolation at all, only an explicit opt-in (``sandbox.backend: none``); every result says
``isolation: none``. It still scrubs the environment, applies the limits and the timeout, points HOME and TMPDIR at
private directories and records side effects, so a report from it is comparable — but the host is not protected."""

from __future__ import annotations

from cascade.sandbox.base import Isolation, RunSpec
from cascade.sandbox.host import HostSandbox
from cascade.sandbox.oracle import PrivateDirs


class NoSandbox(HostSandbox):
    isolated_network = False

    @property
    def isolation(self) -> Isolation:
        return "none"

    def available(self) -> str | None:
        return None

    def private_dirs(self, spec: RunSpec) -> PrivateDirs:
        return PrivateDirs(spec, spec.read_only_paths, home_in_sandbox=None, tmp_in_sandbox=None)

    def wrap(self, spec: RunSpec, dirs: PrivateDirs) -> list[str]:
        return list(spec.argv)
