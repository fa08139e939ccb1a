"""A replica's log keeps what the replica printed, and drops only whole lines its container engine wrote."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kubetrain.local.containers import ENGINE_NOISE
from kubetrain.local.logs import ReplicaLog


def pumped(log: ReplicaLog, output: bytes) -> list[str]:
    async def pump() -> None:
        reader = asyncio.StreamReader()
        reader.feed_data(output)
        reader.feed_eof()
        await log.pump(reader)

    log.open()
    asyncio.run(pump())
    log.close()
    return log.path.read_text().splitlines()


def test_the_engines_syslog_complaint_is_not_a_line_of_the_replica(tmp_path: Path) -> None:
    log = ReplicaLog("worker-0", tmp_path / "worker-0.log", lambda prefix, line: None)
    log.noise = ENGINE_NOISE
    output = b"failed to connect to syslog: Initialization\nServer listening on 0.0.0.0 port 22.\n"
    assert pumped(log, output) == ["Server listening on 0.0.0.0 port 22."]


def test_a_replica_printing_the_same_words_inside_a_line_keeps_them(tmp_path: Path) -> None:
    log = ReplicaLog("worker-0", tmp_path / "worker-0.log", lambda prefix, line: None)
    log.noise = ENGINE_NOISE
    output = b"note: failed to connect to syslog: Initialization\n"
    assert pumped(log, output) == ["note: failed to connect to syslog: Initialization"]
