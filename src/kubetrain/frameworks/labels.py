"""The ``training.kubeflow.org/*`` labels upstream puts on every replica (§3)."""

from __future__ import annotations

LABEL_PREFIX = "training.kubeflow.org"
OPERATOR_NAME_LABEL = f"{LABEL_PREFIX}/operator-name"
JOB_NAME_LABEL = f"{LABEL_PREFIX}/job-name"
REPLICA_TYPE_LABEL = f"{LABEL_PREFIX}/replica-type"
REPLICA_INDEX_LABEL = f"{LABEL_PREFIX}/replica-index"
JOB_ROLE_LABEL = f"{LABEL_PREFIX}/job-role"
APP_LABEL = "app"
"""What upstream's MPI controllers put on the objects beside the pods (ConfigMap, RBAC, Service)."""


def job_labels(controller_name: str, job_name: str) -> dict[str, str]:
    """The labels every replica of a job carries; substrates list a job's replicas by them."""
    return {OPERATOR_NAME_LABEL: controller_name, JOB_NAME_LABEL: job_name}
