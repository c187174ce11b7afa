"""What ``commerce-api products import`` shows while it runs: on a terminal, a progress bar
(rows, rows/s, time left, from how much of the file is read); elsewhere nothing until the
one-line summary."""

from __future__ import annotations

import time
from types import TracebackType
from typing import IO

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

from commerce_api.catalog.import_file import ImportFile


class ImportReport:
    """``with ImportReport(source, stream) as report:`` pass ``report.rows`` as the import's
    progress; then :meth:`summary`."""

    def __init__(self, source: ImportFile, stream: IO[str]) -> None:
        self.bytes_read = source.bytes_read
        total_bytes = source.size
        self.started = time.monotonic()
        self.progress: Progress | None = None
        if stream.isatty():
            self.progress = Progress(
                TextColumn("Importing"),
                BarColumn(),
                TaskProgressColumn(),
                TextColumn("{task.fields[rows]:,} rows, {task.fields[rate]:,.0f} rows/s,"),
                TimeRemainingColumn(),
                TextColumn("left"),
                console=Console(file=stream),
            )
            self.task = self.progress.add_task("import", total=max(total_bytes, 1), rows=0, rate=0)

    def __enter__(self) -> ImportReport:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self.progress is not None:
            self.progress.stop()

    def rows(self, count: int) -> None:
        """``count`` records read so far."""
        if self.progress is not None:
            rate = count / max(time.monotonic() - self.started, 1e-6)
            self.progress.update(self.task, completed=self.bytes_read(), rows=count, rate=rate)

    def summary(self, created: int, updated: int) -> str:
        seconds = time.monotonic() - self.started
        return (
            f"Imported {created + updated:,} products ({created:,} created, {updated:,} updated)"
            f" in {seconds:.1f} s"
        )
