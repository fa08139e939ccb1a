"""Replica output: whole lines, read from the child's pipe, written to its log file and the console.

torchrun's tee tails files from a thread and can split a line between ranks or lose the last one
written before exit (ecosystem notes §4.1). Here the runner reads each child's pipe itself, line by
line on the event loop, and hands complete lines to one writer, so lines are never interleaved
mid-line and nothing is lost at exit.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TextIO

LINE_LIMIT = 1 << 20
"""Longest line read in one piece; longer lines are emitted in pieces of this size."""

TAIL_CHARACTERS = 4096
"""How much of an attempt's output is kept for its diagnosis (its last lines)."""

LineHandler = Callable[[str, str], None]
"""Called with (replica prefix such as ``worker-1``, one line without its newline)."""


async def read_lines(reader: asyncio.StreamReader) -> AsyncIterator[str]:
    """Complete lines until EOF; a last line without a newline is still yielded."""
    while True:
        try:
            raw = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as end:
            if end.partial:
                yield _decode(end.partial)
            return
        except asyncio.LimitOverrunError as overrun:
            raw = await reader.readexactly(overrun.consumed)
        yield _decode(raw)


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", errors="replace").rstrip("\r\n")


class ReplicaLog:
    """One replica's log: a file under the run's state directory, plus the console handler."""

    def __init__(self, prefix: str, path: Path, on_line: LineHandler) -> None:
        self.prefix = prefix
        self.path = path
        self._on_line = on_line
        self._file: TextIO | None = None
        self.noise: frozenset[str] = frozenset()
        """Whole lines that the container engine prints into a replica's output, not the replica: dropped."""

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Appended across restarts so ``logs`` shows every attempt, like a kubelet's previous logs.
        self._file = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def size(self) -> int:
        """The log file's length so far (where the next attempt's output will begin)."""
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def tail(self, start: int, characters: int = TAIL_CHARACTERS) -> str | None:
        """The end of what was written from offset ``start`` on (one attempt's output): at most
        ``characters`` of it, from a line's start; None when it wrote nothing."""
        try:
            with self.path.open("rb") as handle:
                end = handle.seek(0, 2)
                handle.seek(max(start, end - characters))
                data = handle.read()
        except OSError:
            return None
        if start < end - characters:
            data = data.partition(b"\n")[2]  # from the first whole line
        text = data.decode("utf-8", errors="replace")
        return text or None

    def write(self, line: str) -> None:
        if self._file is not None:
            self._file.write(line + "\n")
            # Flushed per line so ``kubetrain logs -f`` from another terminal sees it at once.
            self._file.flush()
        self._on_line(self.prefix, line)

    async def pump(self, reader: asyncio.StreamReader) -> None:
        async for line in read_lines(reader):
            if line not in self.noise:
                self.write(line)
