"""PyTorchJob → TrainJob on the torch policy.

A v1 PyTorchJob with a Master gave every process ``MASTER_ADDR``, ``MASTER_PORT``, ``RANK`` and ``WORLD_SIZE``
(one process per pod); Trainer gives torchrun its ``PET_*`` options instead. So a program that is not torchrun
runs under torchrun, one process per node, and torchrun sets those four for it. A job that ran torchrun
already (elastic jobs, ``nprocPerNode``) keeps its command: torchrun reads the same ``PET_*`` names.
"""

from __future__ import annotations

import posixpath
import re
from typing import ClassVar

from kubetrain.api.jobs import PyTorchJob
from kubetrain.frameworks.migration.common import Obj, with_env
from kubetrain.frameworks.migration.result import Note
from kubetrain.frameworks.migration.single import Program
from kubetrain.frameworks.trainer.constants import TORCH_RESERVED_ENV

TORCHRUN = "torchrun"
TORCHRUN_MODULES = ("torch.distributed.run", "torch.distributed.launch")
PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
UNBUFFERED = {"name": "PYTHONUNBUFFERED", "value": "1"}
"""v1 gave every PyTorchJob container this; Trainer does not."""


def under_torchrun(command: list[str]) -> list[str]:
    """``command`` started by torchrun: ``python x.py`` as ``torchrun x.py``, ``python -m m`` as
    ``torchrun -m m``, anything else as ``torchrun --no-python ...``."""
    program, rest = posixpath.basename(command[0]), command[1:]
    if PYTHON.match(program):
        if rest and not rest[0].startswith("-"):
            return [TORCHRUN, *rest]
        if len(rest) >= 2 and rest[0] == "-m":
            return [TORCHRUN, "-m", *rest[1:]]
    return [TORCHRUN, "--no-python", *command]


def runs_torchrun(command: list[str], args: list[str]) -> bool:
    """Whether the container already starts torchrun (directly, as a module, or inside a shell line)."""
    return any(TORCHRUN in word or any(m in word for m in TORCHRUN_MODULES) for word in (*command, *args))


class PyTorchRendezvous:
    policy: ClassVar[str] = "torch"
    builtin_runtime: ClassVar[str] = "torch-distributed"
    framework_label: ClassVar[str] = "torch"
    rank_order: ClassVar[tuple[str, ...]] = ("Master", "Worker")
    reserved_env: ClassVar[frozenset[str]] = TORCH_RESERVED_ENV

    def program(self, job: PyTorchJob, container: Obj, nodes: int, path: str) -> Program:
        command = [str(c) for c in container.get("command") or []]
        args = [str(a) for a in container.get("args") or []]
        env = with_env(list(container.get("env") or []), UNBUFFERED)
        notes: list[Note] = []
        elastic = job.spec.elastic_policy
        if elastic is not None:
            notes.append(
                Note(
                    "spec.elasticPolicy",
                    "is dropped: Trainer v2.3 has no elastic training (removed in v2.2, "
                    f"kubeflow/trainer#3235); the TrainJob runs a fixed {nodes} nodes with torchrun's "
                    "static rendezvous, and a failed node restarts its pod instead of the others "
                    "re-forming the group without it",
                )
            )
        nproc = job.spec.nproc_per_node
        count = int(nproc) if nproc is not None and nproc.isdigit() else None
        if runs_torchrun(command, args):
            if nproc in ("cpu", "gpu"):
                notes.append(
                    Note(
                        "spec.nprocPerNode",
                        f"{nproc} is dropped (Trainer v2.2 took it out): torchrun runs one process per GPU "
                        "the node asks for, else per CPU it requests",
                    )
                )
            return Program(command or None, args or None, env, count, tuple(notes))
        if "Master" not in job.replica_specs:
            # v1 gave a Worker-only job no MASTER_ADDR, RANK or WORLD_SIZE: its program keeps what it had.
            return Program(command or None, args or None, env, None, tuple(notes))
        if not command:
            notes.append(
                Note(
                    f"{path}.command",
                    "unset, so the image's entrypoint runs and migrate cannot start it under torchrun: it "
                    "gets Trainer's PET_* env but not MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE; write "
                    "the command and migrate again",
                )
            )
            return Program(None, args or None, env, 1, tuple(notes))
        notes.append(
            Note(
                f"{path}.command",
                "runs under torchrun, one process per node: torchrun sets MASTER_ADDR, MASTER_PORT, RANK "
                "and WORLD_SIZE from Trainer's PET_* env, as v1 set them (the image needs torchrun, as "
                "PyTorch's have)",
            )
        )
        if count is not None and count != 1:
            notes.append(
                Note(
                    "spec.nprocPerNode",
                    f"{nproc}: v1 counted it into WORLD_SIZE but started one process per pod; the TrainJob "
                    "runs one per node (numProcPerNode 1): raise numProcPerNode to have torchrun start more",
                )
            )
        return Program(under_torchrun(command), args or None, env, 1, tuple(notes))
