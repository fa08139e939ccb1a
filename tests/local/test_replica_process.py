"""A replica's process supervisor, with real processes: what stopping it does at awkward moments."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from kubetrain.local.logs import ReplicaLog
from kubetrain.local.process import InPlaceRestart, LaunchSpec, ReplicaProcess

pytestmark = pytest.mark.local

FAILS_ONCE_THEN_SLEEPS = (
    "import pathlib, sys, time\n"
    "marker = pathlib.Path(sys.argv[1])\n"
    "if not marker.exists():\n"
    "    marker.touch()\n"
    "    sys.exit(1)\n"
    "time.sleep(300)\n"
)


class RestartHeldAtSpawn(ReplicaProcess):
    """Its in-place restart waits, just before spawning, until the test lets it go."""

    def __init__(self, spec: LaunchSpec, log: ReplicaLog) -> None:
        super().__init__(spec, log, lambda: None)
        self.restarting = asyncio.Event()
        self.go_on = asyncio.Event()

    async def _before_spawn(self) -> None:
        if self.state.restarts > 0:
            self.restarting.set()
            await self.go_on.wait()


async def stop_while_a_restart_spawns(tmp_path: Path) -> RestartHeldAtSpawn:
    spec = LaunchSpec(
        replica_type="Worker",
        index=0,
        prefix="worker-0",
        argv=(sys.executable, "-c", FAILS_ONCE_THEN_SLEEPS, str(tmp_path / "failed-once")),
        env={},
        cwd=tmp_path,
        restart=InPlaceRestart.ON_FAILURE,
    )
    replica = RestartHeldAtSpawn(
        spec, ReplicaLog("worker-0", tmp_path / "worker-0.log", lambda _prefix, _line: None)
    )
    await replica.start()
    await replica.restarting.wait()  # the first run exited 1; its restart is about to spawn
    stopping = asyncio.create_task(replica.stop(grace_period=5.0))
    await asyncio.sleep(0)  # stop() finds the first run over and waits for the supervisor
    replica.go_on.set()
    await stopping
    return replica


def test_a_replica_stopped_while_its_restart_spawns_stops_the_new_run_too(tmp_path: Path) -> None:
    # Restart scope Job stops every replica the moment one fails: the failed one may be mid-restart. Its new
    # run must be stopped with it, or the runner waits for ever on a rank blocked at a closed rendezvous.
    replica = asyncio.run(stop_while_a_restart_spawns(tmp_path))
    assert replica.finished
    assert replica.state.history == [1, 143], "the restarted run was sent SIGTERM"
