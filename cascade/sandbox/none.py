"""The `none` backend: no isolation at all, only an explicit opt-in (``sandbox.backend: none``); every result says
``isolation: none``. It still gives the run fresh places, scrubs the environment, applies the limits and the
timeout, points HOME and TMPDIR at private directories and records side effects, so a report from it is comparable —
but the host is not protected, and no strace witness runs."""

from __future__ import annotations

from cascade.sandbox.base import Isolation, RunSpec
from cascade.sandbox.host import HostSandbox
from cascade.sandbox.places import RunPlaces


class NoSandbox(HostSandbox):
    isolated_network = False

    @property
    def isolation(self) -> Isolation:
        return "none"

    def available(self) -> str | None:
        return None

    def wrap(self, spec: RunSpec, places: RunPlaces) -> list[str]:
        places.notes.append("no sandbox: the run was not isolated and had no witness outside its processes")
        return list(spec.argv)
