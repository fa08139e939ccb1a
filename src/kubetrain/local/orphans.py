"""No process outlives a run, not even one that left its replica's process group, nor one whose runner died.

Stopping a replica's process group catches everything it spawned, except a descendant that called
``setsid`` itself (a daemonising helper). On Linux the runner makes itself the *child subreaper*:
such a descendant, once its parent dies, is re-parented to the runner instead of to init, so the
runner can still find it among its own children and kill it when the run ends.

A runner that dies without ending its run (SIGKILL, the OOM killer, a crash) stops nothing itself: its
reaper (``local.reaper``) finds the run's processes by ``RUN_ID_ENV``, which every replica process carries
and passes on to whatever it spawns, in whichever session and under whichever parent they now are.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

import psutil

_PR_SET_CHILD_SUBREAPER = 36
RUN_ID_ENV = "KUBETRAIN_LOCAL_RUN_ID"
"""Names the run in the environment of each of its replica processes."""


def become_subreaper() -> bool:
    """Adopt orphaned descendants (Linux only); True when it worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def kill_adopted() -> list[int]:
    """SIGKILL and reap every remaining descendant of this process; their pids."""
    me = psutil.Process()
    survivors = me.children(recursive=True)
    for child in survivors:
        with contextlib.suppress(psutil.NoSuchProcess):
            child.kill()
    psutil.wait_procs(survivors, timeout=5)
    for child in survivors:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(child.pid, os.WNOHANG)
    return [c.pid for c in survivors]


def this_process_started_at() -> float:
    return float(psutil.Process().create_time())


def processes_of_run(run_id: str) -> list[psutil.Process]:
    """Every process whose environment names ``run_id`` (readable by this user)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.environ().get(RUN_ID_ENV) == run_id:
                found.append(process)
    return found


def stop_processes(processes: list[psutil.Process], grace_period: float) -> None:
    """SIGTERM each, wait up to ``grace_period`` seconds for them all, then SIGKILL the rest."""
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace_period)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=5)
