"""What a person sees during ``kubetrain run``: prefixed replica logs, a live status, a summary.

Replica lines go to stdout, each one whole, behind a coloured ``<type>-<index> |`` prefix. The
runner's own output (status, events, the summary) goes to stderr, so ``kubetrain run job.yaml >
out.log`` captures exactly what the replicas printed. On a terminal the status is a live rich
table under the logs; elsewhere status changes are plain lines; ``--quiet`` shows the logs only.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Protocol, TextIO

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from kubetrain.local.state import ReplicaRecord

COLOURS = ("cyan", "magenta", "green", "yellow", "blue", "bright_red", "bright_cyan", "bright_magenta")
_ANSI = {"cyan": 36, "magenta": 35, "green": 32, "yellow": 33, "blue": 34, "bright_red": 91}


@dataclass(frozen=True)
class ConditionView:
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Snapshot:
    job: str
    kind: str
    conditions: tuple[ConditionView, ...]
    replicas: tuple[ReplicaRecord, ...]
    started_at: float
    progress: str = ""
    """The training's last report (``report_text``), empty until it reports."""

    @property
    def headline(self) -> str:
        true = [c for c in self.conditions if c.status == "True"]
        return true[-1].type if true else "Created"

    @property
    def last_condition(self) -> ConditionView | None:
        true = [c for c in self.conditions if c.status == "True"]
        return true[-1] if true else None


class Display(Protocol):
    def start(self) -> None: ...
    def line(self, prefix: str, text: str) -> None: ...
    def note(self, message: str) -> None: ...
    def status(self, snapshot: Snapshot) -> None: ...
    def finish(self, snapshot: Snapshot) -> None: ...


class _Prefixes:
    def __init__(self, names: list[str]) -> None:
        self.width = max((len(n) for n in names), default=0)
        self.colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(names)}


def report_text(
    progress: int | None, remaining_seconds: int | None, metrics: tuple[tuple[str, str], ...]
) -> str:
    """``40%, 75s left, loss=0.23``: a progress report in a line (empty for a report without values)."""
    parts = [] if progress is None else [f"{progress}%"]
    if remaining_seconds is not None:
        parts.append(f"{remaining_seconds}s left")
    return ", ".join([*parts, *(f"{name}={value}" for name, value in metrics)])


def status_table(snapshot: Snapshot) -> Table:
    elapsed = time.time() - snapshot.started_at
    reported = f" — {snapshot.progress}" if snapshot.progress else ""
    table = Table(
        title=f"{snapshot.kind} {snapshot.job}: {snapshot.headline} ({elapsed:.0f}s){reported}", expand=False
    )
    for column in ("replica", "pid", "phase", "restarts", "exit codes"):
        table.add_column(column)
    for replica in snapshot.replicas:
        codes = ", ".join(str(c) for c in replica.exit_codes) or "-"
        table.add_row(replica.name, str(replica.pid or "-"), replica.phase, str(replica.restarts), codes)
    condition = snapshot.last_condition
    if condition is not None and condition.message:
        table.caption = f"{condition.type}: {condition.message}"
    return table


def summary_lines(snapshot: Snapshot) -> list[str]:
    elapsed = time.time() - snapshot.started_at
    lines = [f"{snapshot.kind} {snapshot.job} {snapshot.headline} after {elapsed:.1f}s"]
    condition = snapshot.last_condition
    if condition is not None:
        lines.append(f"  {condition.type} ({condition.reason}): {condition.message}")
    if snapshot.progress:
        lines.append(f"  last progress report: {snapshot.progress}")
    for replica in snapshot.replicas:
        codes = ", ".join(str(c) for c in replica.exit_codes) or "-"
        lines.append(
            f"  {replica.name:<12} {replica.phase:<10} restarts={replica.restarts} exit codes: {codes}"
            f"  log: {replica.log}"
        )
    return lines


class PlainDisplay:
    """Lines only: for pipes, CI and ``--quiet``."""

    def __init__(
        self, names: list[str], *, quiet: bool, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        self._out = out or sys.stdout
        self._err = err or sys.stderr
        self._quiet = quiet
        self._prefixes = _Prefixes(names)
        self._colour = self._out.isatty()
        self._last: dict[str, tuple[str, int]] = {}
        self._last_headline = ""

    def start(self) -> None:
        """Plain lines need no set-up (the live display starts its table here)."""

    def line(self, prefix: str, text: str) -> None:
        label = f"{prefix:<{self._prefixes.width}} |"
        if self._colour:
            code = _ANSI.get(self._prefixes.colour.get(prefix, ""), 36)
            label = f"\x1b[{code}m{label}\x1b[0m"
        # One write per line: lines from different replicas never interleave.
        self._out.write(f"{label} {text}\n")
        self._out.flush()

    def note(self, message: str) -> None:
        if not self._quiet:
            self._err.write(f"kubetrain: {message}\n")
            self._err.flush()

    def status(self, snapshot: Snapshot) -> None:
        if self._quiet:
            return
        for replica in snapshot.replicas:
            now = (replica.phase, replica.restarts)
            if self._last.get(replica.name) != now:
                self._last[replica.name] = now
                detail = f"pid {replica.pid}" if replica.pid else f"exit code {replica.exit_code}"
                self.note(f"{replica.name} {replica.phase} ({detail}, restarts {replica.restarts})")
        condition = snapshot.last_condition
        headline = f"{condition.type}: {condition.message}" if condition else ""
        if headline and headline != self._last_headline:
            self._last_headline = headline
            self.note(f"{snapshot.kind} {snapshot.job} {headline}")

    def finish(self, snapshot: Snapshot) -> None:
        if not self._quiet:
            for text in summary_lines(snapshot):
                self.note(text)


class LiveDisplay:
    """A live rich table under the scrolling logs, on a terminal."""

    def __init__(self, names: list[str]) -> None:
        self._console = Console(highlight=False)
        self._prefixes = _Prefixes(names)
        self._live: Live | None = None

    def start(self) -> None:
        self._live = Live(console=self._console, refresh_per_second=4, transient=True)
        self._live.start()

    def line(self, prefix: str, text: str) -> None:
        label = Text(f"{prefix:<{self._prefixes.width}} |", style=self._prefixes.colour.get(prefix, "cyan"))
        self._console.print(Text.assemble(label, " ", text), soft_wrap=True)

    def note(self, message: str) -> None:
        self._console.print(Text(f"kubetrain: {message}", style="dim"))

    def status(self, snapshot: Snapshot) -> None:
        if self._live is not None:
            self._live.update(status_table(snapshot))

    def finish(self, snapshot: Snapshot) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        self._console.print(status_table(snapshot))


def make_display(names: list[str], *, quiet: bool) -> Display:
    if not quiet and sys.stdout.isatty() and sys.stderr.isatty():
        return LiveDisplay(names)
    return PlainDisplay(names, quiet=quiet)
