"""No process outlives a run, not even one that left its replica's process group.

Stopping a replica's process group catches everything it spawned, except a descendant that called
``setsid`` itself (a daemonising helper). On Linux the runner makes itself the *child subreaper*:
such a descendant, once its parent dies, is re-parented to the runner instead of to init, so the
runner can still find it among its own children and kill it when the run ends.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys

import psutil

_PR_SET_CHILD_SUBREAPER = 36


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
