"""A counting progress bar on standard error (rich is imported lazily), or a no-op when disabled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["counting_bar"]


@contextmanager
def counting_bar(enabled: bool, description: str, total: int, completed: int = 0) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(k)``, which moves a bar of ``total`` steps on by ``k``; nothing is shown when disabled.

    Parameters
    ----------
    enabled
        Show the bar (otherwise ``advance`` does nothing).
    description
        Text at the left of the bar.
    total
        Number of steps; no bar is shown for 0.
    completed
        Steps already done (a resumed campaign).
    """
    if not enabled or total == 0:
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task_id = bar.add_task(description, total=total, completed=completed)
        yield lambda k: bar.advance(task_id, k)
