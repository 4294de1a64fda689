"""The benchmark's progress bar on stderr: traces done of planned, elapsed time, and a real ETA."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn, TimeElapsedColumn
from rich.text import Text


class EtaColumn(ProgressColumn):
    """Time left at the run's own pace so far (elapsed / finished × remaining). rich's TimeRemainingColumn
    estimates speed from the last 30 s only, so with traces that take longer it never shows a time."""

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("ETA 0:00:00")
        if not task.completed or task.elapsed is None or task.total is None:
            return Text("ETA after the first trace")
        remaining = task.elapsed / task.completed * (task.total - task.completed)
        minutes, seconds = divmod(round(remaining), 60)
        hours, minutes = divmod(minutes, 60)
        return Text(f"ETA {hours}:{minutes:02d}:{seconds:02d}")


def progress_bar(enabled: bool) -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        EtaColumn(),
        TextColumn("{task.fields[last]}"),
        console=Console(stderr=True),
        disable=not enabled,
    )
