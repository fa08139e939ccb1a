"""JAXJob → TrainJob on the jax policy.

v1 gave every process ``COORDINATOR_ADDRESS`` (worker 0's host), ``COORDINATOR_PORT``, ``NUM_PROCESSES``
and ``PROCESS_ID``; Trainer's policy gives ``JAX_COORDINATOR_ADDRESS`` (host and port in one),
``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID``, the names ``jax.distributed.initialize()`` reads by itself.
The program runs under ``sh``, which exports v1's names from Trainer's, so code that passes them explicitly
works unchanged.
"""

from __future__ import annotations

from typing import ClassVar

from kubetrain.api.jobs import JAXJob
from kubetrain.frameworks.migration.common import Obj, exporting, with_env
from kubetrain.frameworks.migration.result import Note
from kubetrain.frameworks.migration.single import Program

V1_ENV = {
    "COORDINATOR_ADDRESS": '"${JAX_COORDINATOR_ADDRESS%:*}"',
    "COORDINATOR_PORT": '"${JAX_COORDINATOR_ADDRESS##*:}"',
    "NUM_PROCESSES": '"$JAX_NUM_PROCESSES"',
    "PROCESS_ID": '"$JAX_PROCESS_ID"',
}
UNBUFFERED = {"name": "PYTHONUNBUFFERED", "value": "1"}


class JAXRendezvous:
    policy: ClassVar[str] = "jax"
    builtin_runtime: ClassVar[str] = "jax-distributed"
    framework_label: ClassVar[str] = "jax"
    rank_order: ClassVar[tuple[str, ...]] = ("Worker",)
    reserved_env: ClassVar[frozenset[str]] = frozenset()

    def program(self, job: JAXJob, container: Obj, nodes: int, path: str) -> Program:
        command = [str(c) for c in container.get("command") or []]
        args = [str(a) for a in container.get("args") or []]
        env = with_env(list(container.get("env") or []), UNBUFFERED)
        if not command:
            note = Note(
                f"{path}.command",
                "unset, so the image's entrypoint runs and migrate cannot give it v1's COORDINATOR_ADDRESS, "
                "COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID: it must read Trainer's JAX_* env (as "
                "jax.distributed.initialize() does with no arguments)",
            )
            return Program(None, args or None, env, None, (note,))
        note = Note(
            f"{path}.command",
            "runs under sh, which exports v1's COORDINATOR_ADDRESS, COORDINATOR_PORT, NUM_PROCESSES and "
            "PROCESS_ID from Trainer's JAX_* env (the image needs sh)",
        )
        return Program(exporting(V1_ENV, command), args or None, env, None, (note,))
