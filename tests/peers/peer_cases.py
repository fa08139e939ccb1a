"""The conformance cases: every example job the peers ship, and each kind's status scenarios.

A scenario is a job and what happens to its pods, step by step, as a kubelet would report it: a success, a
failure under each restart policy, a restart, suspend and resume, cleanPodPolicy and TTL. The same steps run
under the peer and under kubetrain (``peer_runner``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubetrain.envtest.kubeapi import KubeObject

from .peer_runner import (
    Await,
    AwaitDeleted,
    AwaitLauncherJobDeleted,
    Case,
    Fail,
    Patch,
    RestartInPlace,
    Run,
    Step,
    Succeed,
)

IMAGE = "example.com/trainer:1"

SUSPEND = Patch({"spec": {"runPolicy": {"suspend": True}}}, "suspend")
RESUME = Patch({"spec": {"runPolicy": {"suspend": False}}}, "resume")


# --- the peers' examples -----------------------------------------------------------------------------------


def example_jobs(directory: Path, kinds: set[str], api_version: str, prefix: str = "example") -> list[Case]:
    """Every job manifest under ``directory`` of one of ``kinds`` and ``api_version``, as its release ships
    it, each a case named ``<prefix>-<its file>``; created and compared as they are made (no pod is
    driven)."""
    cases = []
    for path in sorted(directory.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict):
                continue
            if document.get("kind") in kinds and document.get("apiVersion") == api_version:
                name = str(path.relative_to(directory).with_suffix("")).replace("/", "-")
                cases.append(Case(f"{prefix}-{name}", document))
    return cases


# --- scenarios ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    """What the scenarios need to know of a job kind."""

    kind: str
    api_version: str
    specs_field: str
    container: str
    """The framework's default container name."""
    leader: str
    """The replica type whose end decides the job (Master, Chief, Launcher; Worker when there is none)."""
    replicas: tuple[tuple[str, int], ...]
    policies: tuple[str, ...] = ("Never", "OnFailure", "Always", "ExitCode")
    recreates_failed: bool = True
    """A replica whose pod failed is re-created under OnFailure and Always (XGBoost's and MPI's failures fail
    the job instead; the v2beta1 MPIJob's workers are never re-created)."""
    name: str = ""
    """What its scenarios' names start with (the kind's, lower case, when empty)."""
    ttl_deletes: str = "job"
    """What ``ttlSecondsAfterFinished`` deletes: the ``job``, or the ``launcher`` Job only (MPIJob v2beta1:
    the mpi-operator copies it into the launcher Job and never deletes the MPIJob)."""

    @property
    def short(self) -> str:
        return self.name or self.kind.removesuffix("Job").lower()

    def manifest(self, name: str, restart_policy: str | None = None, **run_policy: Any) -> KubeObject:
        specs: dict[str, Any] = {}
        for replica_type, count in self.replicas:
            spec: dict[str, Any] = {
                "replicas": count,
                "template": {"spec": {"containers": [{"name": self.container, "image": IMAGE}]}},
            }
            if restart_policy is not None:
                spec["restartPolicy"] = restart_policy
            specs[replica_type] = spec
        body: dict[str, Any] = {self.specs_field: specs}
        if run_policy:
            body["runPolicy"] = run_policy
        return {"apiVersion": self.api_version, "kind": self.kind, "metadata": {"name": name}, "spec": body}

    @property
    def followers(self) -> tuple[str, ...]:
        return tuple(t for t, _ in self.replicas if t != self.leader)

    def run_all(self) -> tuple[Step, ...]:
        return tuple(Run(t) for t, _ in self.replicas)

    def finish(self) -> tuple[Step, ...]:
        """The others end first, then the replica that decides."""
        return (*(Succeed(t) for t in self.followers), Succeed(self.leader))


PYTORCH = Kind(
    "PyTorchJob",
    "kubeflow.org/v1",
    "pytorchReplicaSpecs",
    "pytorch",
    "Master",
    (("Master", 1), ("Worker", 2)),
)
TENSORFLOW = Kind(
    "TFJob",
    "kubeflow.org/v1",
    "tfReplicaSpecs",
    "tensorflow",
    "Chief",
    (("Chief", 1), ("PS", 1), ("Worker", 2)),
)
XGBOOST = Kind(
    "XGBoostJob",
    "kubeflow.org/v1",
    "xgbReplicaSpecs",
    "xgboost",
    "Master",
    (("Master", 1), ("Worker", 2)),
    recreates_failed=False,
)
PADDLE = Kind(
    "PaddleJob", "kubeflow.org/v1", "paddleReplicaSpecs", "paddle", "Master", (("Master", 1), ("Worker", 2))
)
JAX = Kind("JAXJob", "kubeflow.org/v1", "jaxReplicaSpecs", "jax", "Worker", (("Worker", 2),))
MPI_V1 = Kind(
    "MPIJob",
    "kubeflow.org/v1",
    "mpiReplicaSpecs",
    "mpi",
    "Launcher",
    (("Launcher", 1), ("Worker", 2)),
    recreates_failed=False,
    name="mpiv1",
)
MPI_V2 = Kind(
    "MPIJob",
    "kubeflow.org/v2beta1",
    "mpiReplicaSpecs",
    "mpi",
    "Launcher",
    (("Launcher", 1), ("Worker", 2)),
    policies=("Never", "OnFailure"),
    recreates_failed=False,
    ttl_deletes="launcher",
)
TRAINING_OPERATOR_KINDS = (PYTORCH, TENSORFLOW, XGBOOST, PADDLE, JAX)


def _follower(kind: Kind) -> str:
    return kind.followers[0] if kind.followers else kind.leader


def scenarios(kind: Kind) -> Iterator[Case]:
    """Each kind's status scenarios (a job of the kind's usual shape, one container each)."""
    name = kind.short
    worker = _follower(kind)
    yield Case(
        f"{name}-succeeds",
        kind.manifest(f"{name}-succeeds"),
        (*kind.run_all(), Await("Running"), *kind.finish(), Await("Succeeded")),
    )
    for policy in kind.policies:
        job = f"{name}-{worker.lower()}-fails-{policy.lower()}"
        steps: tuple[Step, ...] = (*kind.run_all(), Await("Running"), Fail(worker, 0, 1))
        if policy in ("OnFailure", "Always") and kind.recreates_failed:
            # The pod is replaced: run the new one.
            steps = (*steps, Run(worker, (0,)), Await("Running"))
        yield Case(job, kind.manifest(job, policy), steps)
    if "ExitCode" in kind.policies:
        job = f"{name}-{kind.leader.lower()}-killed-exitcode"
        steps = (
            *kind.run_all(),
            Await("Running"),
            Fail(kind.leader, 0, 137),
            Run(kind.leader, (0,)),
            Await("Running"),
            *kind.finish(),
            Await("Succeeded"),
        )
        yield Case(job, kind.manifest(job, "ExitCode"), steps)
    job = f"{name}-restarts-in-place"
    steps = (
        *kind.run_all(),
        Await("Running"),
        RestartInPlace(worker, 0, 1),
        *kind.finish(),
        Await("Succeeded"),
    )
    yield Case(job, kind.manifest(job, "OnFailure"), steps)
    job = f"{name}-suspended-resumed"
    steps = (
        *kind.run_all(),
        Await("Running"),
        SUSPEND,
        Await("Suspended"),
        RESUME,
        *kind.run_all(),
        Await("Running"),
    )
    yield Case(job, kind.manifest(job), steps)
    job = f"{name}-created-suspended"
    yield Case(job, kind.manifest(job, suspend=True), (Await("Suspended"),))
    for policy in ("All", "Running"):
        job = f"{name}-clean-pod-policy-{policy.lower()}"
        # The leader ends while the others still run: what each policy deletes shows.
        steps = (*kind.run_all(), Await("Running"), Succeed(kind.leader), Await("Succeeded"))
        yield Case(job, kind.manifest(job, cleanPodPolicy=policy), steps)
    job = f"{name}-ttl"
    deleted = AwaitLauncherJobDeleted() if kind.ttl_deletes == "launcher" else AwaitDeleted()
    steps = (*kind.run_all(), Await("Running"), *kind.finish(), Await("Succeeded"), deleted)
    yield Case(job, kind.manifest(job, ttlSecondsAfterFinished=1), steps)


def tensorflow_extras() -> Iterator[Case]:
    """TFJob's successPolicy: with no Chief, worker 0 alone ends the job under the default policy; every
    worker must under AllWorkers."""
    shape = Kind(
        "TFJob", "kubeflow.org/v1", "tfReplicaSpecs", "tensorflow", "Worker", (("PS", 1), ("Worker", 2))
    )
    for policy in ("", "AllWorkers"):
        job = f"tf-workers-success-policy-{policy.lower() or 'default'}"
        manifest = shape.manifest(job)
        if policy:
            manifest["spec"]["successPolicy"] = policy
        steps = (
            *shape.run_all(),
            Await("Running"),
            Succeed("Worker", (0,)),
            Succeed("Worker", (1,)),
            Succeed("PS"),
        )
        yield Case(job, manifest, steps)


def mpi_v2_extras() -> Iterator[Case]:
    """The v2beta1 MPIJob's own settings: the launcher created once the workers are ready, the launcher as one
    of the workers, and the Intel and MPICH implementations."""
    job = "mpi-wait-for-workers-ready"
    manifest = MPI_V2.manifest(job)
    manifest["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    steps: tuple[Step, ...] = (Run("Worker", (0,)), Run("Worker", (1,)), Run("Launcher"), Await("Running"))
    yield Case(job, manifest, (*steps, *MPI_V2.finish(), Await("Succeeded")))
    job = "mpi-launcher-as-worker"
    manifest = MPI_V2.manifest(job)
    manifest["spec"]["runLauncherAsWorker"] = True
    yield Case(job, manifest, (*MPI_V2.run_all(), Await("Running"), *MPI_V2.finish(), Await("Succeeded")))
    for implementation in ("Intel", "MPICH"):
        job = f"mpi-{implementation.lower()}"
        manifest = MPI_V2.manifest(job)
        manifest["spec"]["mpiImplementation"] = implementation
        yield Case(job, manifest, (*MPI_V2.run_all(), Await("Running"), *MPI_V2.finish(), Await("Succeeded")))
    job = "mpi-launcher-fails"
    manifest = MPI_V2.manifest(job, "Never", backoffLimit=0)
    yield Case(job, manifest, (*MPI_V2.run_all(), Await("Running"), Fail("Launcher", 0, 1), Await("Failed")))


def with_name(case: Case, name: str) -> Case:
    manifest = copy.deepcopy(case.manifest)
    manifest["metadata"]["name"] = name
    return Case(case.name, manifest, case.steps)
