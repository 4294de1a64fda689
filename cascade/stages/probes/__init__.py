"""Stage 2 — probes and regressions, executed in a sandbox.

* Regression (`regression.py`, with the selection of `cascade/execution/test_selection.py`): existing tests near the
  change run on both trees.
* Probes (`probing.py`): each source's candidates (`cascade/probesources/`) run on base; kept tests run on the patch.
* Judging (`judging.py`): what the runs mean — evidence, rejects and accepts; side effects outside the worktree.
* The run session (`session.py`) owns the trees, sandbox and environment (`environment.py`); `changes.py` says what
  the patch changed. `stage.py` is the adapter to the `Stage` protocol.
* No environment (no sandbox, dependencies fail to install) → ``skipped`` with the reason.
"""

from cascade.stages.probes.stage import ProbesStage

__all__ = ["ProbesStage"]
