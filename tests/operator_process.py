"""``kubetrain operator`` as a subprocess watching one namespace, for the tiers that need the operator running
(the SDK's cluster tests, the browser tier)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from waiting import PATIENCE

KUBETRAIN = Path(sys.executable).parent / "kubetrain"


@contextmanager
def running_operator(
    kubeconfig: Path, namespace: str | None, log_path: Path, flags: Sequence[str] = (), show_log: bool = True
) -> Iterator[None]:
    """``kubetrain operator`` watching only ``namespace`` (other tests share the cluster; None: every
    namespace), with ``flags``; its log is printed afterwards (unless not ``show_log``), so a failing test
    shows what the operator did. Leaving stops it as its Deployment would: SIGTERM, then its graceful
    shutdown (the Lease released, the last reports written), however long a busy machine makes that."""
    command = [str(KUBETRAIN), "operator", "--kubeconfig", str(kubeconfig)]
    command += ["--namespace", namespace] if namespace is not None else []
    command += ["--metrics-bind-address", "0", "--health-probe-bind-address", "0", *flags]
    with log_path.open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        yield
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(PATIENCE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(PATIENCE)
        if show_log:
            print(f"--- operator log\n{log_path.read_text(errors='replace')[-4000:]}")
