"""A counting progress bar on standard error (rich is imported lazily), or a no-op when disabled.

On a terminal it is a live bar; otherwise (a log file, ``nohup``) it is a plain line every minute or so, so that a
long campaign's log says how far it is before it ends.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["PlainLines", "counting_bar"]


@contextmanager
def counting_bar(enabled: bool, description: str, total: int, completed: int = 0,
                 every_s: float = 60.0) -> Iterator[Callable[[int], None]]:
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
    every_s
        Off a terminal: seconds between two plain lines.
    """
    if not enabled or total == 0:
        yield lambda k: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    if not Console(stderr=True).is_terminal:
        lines = PlainLines(description, total, completed, every_s)
        yield lines.advance
        lines.line()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task_id = bar.add_task(description, total=total, completed=completed)
        yield lambda k: bar.advance(task_id, k)


class PlainLines:
    """Off a terminal: ``description: done/total, elapsed, left`` at most every ``every_s`` seconds, and at the end."""

    def __init__(self, description: str, total: int, completed: int, every_s: float) -> None:
        self.description, self.total, self.completed, self.every_s = description, total, completed, every_s
        self.started = self.last = time.monotonic()
        self.done = 0

    def advance(self, k: int, note: str = "") -> None:
        """Count ``k`` more steps; print a line (ending with ``note``, e.g. the last step's name) when one is due."""
        self.done += k
        if time.monotonic() - self.last >= self.every_s:
            self.line(note)

    def line(self, note: str = "") -> None:
        """Print where the work stands now."""
        now = self.last = time.monotonic()
        left = self.total - self.completed - self.done
        left_min = left * (now - self.started) / self.done / 60 if self.done else 0.0
        eta = "" if left <= 0 or not self.done else (
            f", about {left_min:.0f} min left" if left_min < 90 else f", about {left_min / 60:.1f} h left")
        print(f"{self.description}: {self.completed + self.done}/{self.total}, {now - self.started:.0f} s{eta}"
              + (f" ({note})" if note else ""), file=sys.stderr, flush=True)
