"""Every kind's CRD: the generic generator of ``api.crd`` fed with each framework's facts and rules.

Only one MPIJob CRD can be installed in a cluster (both are ``mpijobs.kubeflow.org``). The default
set carries the ``kubeflow.org/v2beta1`` one (mpi-operator's API, which Kueue and Horovod users
write); ``mpi_api="v1"`` swaps in the training operator's ``kubeflow.org/v1`` MPIJob.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kubetrain.api.crd import (
    Rule,
    ScaleSpec,
    crd_for,
    replica_count_rule,
    replica_map_field,
    replica_required_rule,
)
from kubetrain.api.jobs import (
    GROUP,
    V1,
    V2BETA1,
    MPIJob,
    MPIJobV2,
    MXJob,
    PaddleJob,
    PyTorchJob,
    TrainingJob,
    XGBoostJob,
)
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import FRAMEWORKS

MpiApi = Literal["v1", "v2beta1"]
MPI_API_VERSIONS: dict[MpiApi, str] = {"v1": V1, "v2beta1": V2BETA1}
DEFAULT_MPI_API: MpiApi = "v2beta1"

MULTIKUEUE = "kueue.x-k8s.io/multikueue"
"""The ``managedBy`` value Kueue's MultiKueue sets: the remote cluster's operator reconciles the job."""


@dataclass(frozen=True)
class KindRules:
    """What a kind's CRD validates beyond the rules every kind shares."""

    replica_map: Sequence[Rule] = ()
    spec: Sequence[Rule] = ()
    elsewhere: Mapping[str, Sequence[Rule]] = field(default_factory=dict)
    constraints: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def _elastic_min_at_most_max() -> Rule:
    return Rule(
        "!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        "spec.elasticPolicy.minReplicas must be at most spec.elasticPolicy.maxReplicas",
    )


_V2BETA1_RESTART_POLICIES = ("Never", "OnFailure")

_RULES: dict[type[TrainingJob], KindRules] = {
    PyTorchJob: KindRules(
        replica_map=(
            replica_count_rule(
                "pytorchReplicaSpecs", "Master", operator="==", bound=1, fix="scale the Workers instead"
            ),
            replica_count_rule(
                "pytorchReplicaSpecs",
                "Worker",
                operator=">=",
                bound=1,
                fix="remove the Worker spec for a Master-only job",
            ),
        ),
        spec=(
            Rule(
                "!has(self.elasticPolicy) || has(self.pytorchReplicaSpecs.Worker)",
                "spec.pytorchReplicaSpecs.Worker is required when spec.elasticPolicy is set",
            ),
            Rule(
                "!(has(self.nprocPerNode) && has(self.elasticPolicy)"
                " && has(self.elasticPolicy.nProcPerNode))",
                "spec.nprocPerNode and spec.elasticPolicy.nProcPerNode are mutually exclusive; "
                "set only spec.nprocPerNode (elasticPolicy.nProcPerNode is deprecated)",
            ),
        ),
        elsewhere={"spec.elasticPolicy": (_elastic_min_at_most_max(),)},
    ),
    XGBoostJob: KindRules(
        replica_map=(
            replica_required_rule("xgbReplicaSpecs", "Master", why="the Master runs the XGBoost tracker"),
            replica_count_rule(
                "xgbReplicaSpecs", "Master", operator="==", bound=1, fix="scale the Workers instead"
            ),
        ),
    ),
    PaddleJob: KindRules(elsewhere={"spec.elasticPolicy": (_elastic_min_at_most_max(),)}),
    MXJob: KindRules(
        replica_map=(
            replica_count_rule(
                "mxReplicaSpecs", "Scheduler", operator="<=", bound=1, fix="an MXJob has one Scheduler"
            ),
        ),
    ),
    MPIJob: KindRules(
        replica_map=(
            replica_required_rule("mpiReplicaSpecs", "Launcher", why="the Launcher runs mpirun"),
            replica_count_rule(
                "mpiReplicaSpecs", "Launcher", operator="==", bound=1, fix="scale the Workers instead"
            ),
        ),
        constraints={"spec.slotsPerWorker": {"minimum": 0}},
    ),
    MPIJobV2: KindRules(
        replica_map=(
            replica_required_rule("mpiReplicaSpecs", "Launcher", why="the Launcher runs mpirun"),
            replica_count_rule(
                "mpiReplicaSpecs", "Launcher", operator="==", bound=1, fix="scale the Workers instead"
            ),
            replica_count_rule(
                "mpiReplicaSpecs", "Worker", operator=">=", bound=1, fix="remove the Worker spec instead"
            ),
            Rule(
                "self.all(t, !has(self[t].restartPolicy) || self[t].restartPolicy in "
                f"[{', '.join(repr(p) for p in _V2BETA1_RESTART_POLICIES)}])",
                "spec.mpiReplicaSpecs.<type>.restartPolicy must be one of "
                f"{', '.join(_V2BETA1_RESTART_POLICIES)} in a kubeflow.org/v2beta1 MPIJob",
            ),
        ),
        # mpi-operator's CRD defaults (upstream §1.4), so `kubectl get -o yaml` shows what runs.
        constraints={
            "spec.slotsPerWorker": {"default": 1, "minimum": 0},
            "spec.runLauncherAsWorker": {"default": False},
            "spec.sshAuthMountPath": {"default": "/root/.ssh"},
            "spec.launcherCreationPolicy": {"default": "AtStartup"},
            "spec.mpiImplementation": {"default": "OpenMPI"},
        },
    ),
}


def crd_for_framework(framework: Framework[Any]) -> dict[str, Any]:
    model = framework.model
    rules = _RULES.get(model, KindRules())
    replica_map = f"spec.{replica_map_field(model)}"
    validations: dict[str, Sequence[Rule]] = {replica_map: rules.replica_map, "spec": rules.spec}
    validations.update(rules.elsewhere)
    scale = ScaleSpec(framework.scale_replica_type) if framework.scale_replica_type else None
    return crd_for(
        model,
        replica_types=framework.replica_types,
        scale=scale,
        managed_by=(framework.managed_by_self, MULTIKUEUE),
        validations={path: found for path, found in validations.items() if found},
        constraints=rules.constraints,
    )


def frameworks_for(mpi_api: MpiApi = DEFAULT_MPI_API) -> list[Framework[Any]]:
    """The frameworks whose CRDs are installed together: every kind, one MPIJob version."""
    chosen: list[Framework[Any]] = []
    for framework in FRAMEWORKS:
        is_other_mpijob = (
            framework.model.PLURAL == MPIJob.PLURAL and framework.api_version != MPI_API_VERSIONS[mpi_api]
        )
        if not is_other_mpijob:
            chosen.append(framework)
    return chosen


def all_crds(mpi_api: MpiApi = DEFAULT_MPI_API) -> list[dict[str, Any]]:
    return [crd_for_framework(framework) for framework in frameworks_for(mpi_api)]


def crd_file_name(crd: Mapping[str, Any]) -> str:
    """Upstream's file naming: ``kubeflow.org_pytorchjobs.yaml``."""
    return f"{GROUP}_{crd['spec']['names']['plural']}.yaml"
