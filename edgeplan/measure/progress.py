"""A counting progress bar on standard error (rich is imported lazily), or a no-op when disabled.

On a terminal it is a live bar; otherwise (a log file, ``nohup``) it is a plain line every minute or so, so that a
long campaign's log says how far it is before it ends.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["counting_bar"]


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
        lines = _PlainLines(description, total, completed, every_s)
        yield lines.advance
        lines.line()
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task_id = bar.add_task(description, total=total, completed=completed)
        yield lambda k: bar.advance(task_id, k)


class _PlainLines:
    """Off a terminal: ``description: done/total, elapsed, left`` at most every ``every_s`` seconds, and at the end."""

    def __init__(self, description: str, total: int, completed: int, every_s: float) -> None:
        self.description, self.total, self.completed, self.every_s = description, total, completed, every_s
        self.started = self.last = time.monotonic()
        self.done = 0

    def advance(self, k: int) -> None:
        self.done += k
        if time.monotonic() - self.last >= self.every_s:
            self.line()

    def line(self) -> None:
        now = self.last = time.monotonic()
        left = self.total - self.completed - self.done
        rate = (now - self.started) / self.done if self.done else 0.0
        eta = f", about {left * rate / 60:.0f} min left" if left > 0 and self.done else ""
        print(f"{self.description}: {self.completed + self.done}/{self.total}, {now - self.started:.0f} s{eta}",
              file=sys.stderr, flush=True)
