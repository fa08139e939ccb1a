"""What the caches keep of a pod or a service (kube.compact): less memory, the same observation."""

from __future__ import annotations

import copy
import json
from typing import Any

from kubetrain.api.manifest import parse_job
from kubetrain.frameworks.labels import OPERATOR_NAME_LABEL
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.compact import compact_batch_job, compact_object, compact_pod, compact_service
from kubetrain.kube.observe import observe
from kubetrain.kube.plan import kubernetes_plan

WIRE_JOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "train", "namespace": "team", "uid": "job-uid"},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "pytorch",
                                "image": "trainer:1",
                                "resources": {"limits": {"memory": "8Gi"}},
                                "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            }
                        ],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                        "tolerations": [{"key": "gpu", "operator": "Exists"}],
                    }
                },
            },
            "Worker": {
                "replicas": 3,
                "template": {"spec": {"containers": [{"name": "pytorch", "image": "trainer:1"}]}},
            },
        }
    },
}
JOB = parse_job(WIRE_JOB)
FRAMEWORK = framework_for(JOB)
MANAGED = [{"manager": "kubetrain", "operation": "Update", "fieldsV1": {"f:spec": {"f:containers": {}}}}]


def served(obj: dict[str, Any], status: dict[str, Any] | None = None) -> dict[str, Any]:
    """The object as the API server returns it: server fields, managedFields, a status."""
    returned = copy.deepcopy(obj)
    returned["metadata"].update(
        uid=f"uid-{obj['metadata']['name']}", resourceVersion="7", managedFields=MANAGED
    )
    if status is not None:
        returned["status"] = status
    return dict(json.loads(json.dumps(returned)))  # fresh strings, as the JSON decoder makes them


def children() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    plan = kubernetes_plan(JOB)
    return [o for o in plan if o["kind"] == "Pod"], [o for o in plan if o["kind"] == "Service"]


STATUSES: list[dict[str, Any]] = [
    {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient memory.",
            }
        ],
    },
    {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T06:00:00Z"}],
        "initContainerStatuses": [
            {"name": "init-pytorch", "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}
        ],
        "containerStatuses": [
            {
                "name": "pytorch",
                "imageID": "trainer@sha256:" + "a" * 64,
                "restartCount": 0,
                "state": {"running": {"startedAt": "2026-11-26T06:00:00Z"}},
            }
        ],
    },
    {
        "phase": "Running",
        "containerStatuses": [
            {
                "name": "pytorch",
                "restartCount": 4,
                "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
            }
        ],
    },
    {
        "phase": "Failed",
        "containerStatuses": [
            {
                "name": "pytorch",
                "restartCount": 0,
                "state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
            }
        ],
    },
]


def test_a_compacted_pod_is_observed_exactly_as_the_whole_pod() -> None:
    pods, _ = children()
    for status in STATUSES:
        whole = [served(p, status) for p in pods]
        for p in whole:
            p["spec"]["nodeName"] = "node-1"
        compacted = [compact_pod(copy.deepcopy(p)) for p in whole]
        assert observe(JOB, FRAMEWORK, compacted, None) == observe(JOB, FRAMEWORK, whole, None)


def test_a_compacted_pod_keeps_its_identity_ownership_and_status() -> None:
    pod = served(children()[0][0], STATUSES[1])
    compacted = compact_pod(copy.deepcopy(pod))
    assert compacted["metadata"] == {k: v for k, v in pod["metadata"].items() if k != "managedFields"}
    assert compacted["status"] == pod["status"]


def test_a_compacted_pod_drops_what_the_operator_never_reads() -> None:
    pod = served(children()[0][0], STATUSES[1])
    compacted = compact_pod(pod)
    assert "managedFields" not in compacted["metadata"]
    assert set(compacted["spec"]) <= {"nodeName", "schedulerName", "containers", "initContainers"}
    container = compacted["spec"]["containers"][0]
    assert container == {"name": "pytorch", "image": "trainer:1", "resources": {"limits": {"memory": "8Gi"}}}


def test_a_compacted_service_is_its_metadata_and_still_names_its_replica() -> None:
    _, services = children()
    whole = [served(s) for s in services]
    compacted = [compact_service(copy.deepcopy(s)) for s in whole]
    assert all(set(s) == {"metadata"} | ({"apiVersion", "kind"} & set(s)) for s in compacted)
    assert observe(JOB, FRAMEWORK, [], compacted) == observe(JOB, FRAMEWORK, [], whole)


def test_compacted_objects_share_their_keys_and_short_values() -> None:
    first, second = (compact_pod(served(p, STATUSES[1])) for p in children()[0][:2])
    first_key = next(k for k in first["status"] if k == "containerStatuses")
    second_key = next(k for k in second["status"] if k == "containerStatuses")
    assert first_key is second_key
    assert first["status"]["phase"] is second["status"]["phase"]
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]


def test_a_compacted_job_is_the_whole_job_but_its_managed_fields() -> None:
    wire = served(WIRE_JOB)
    compacted = compact_object(copy.deepcopy(wire))
    assert compacted == {
        **wire,
        "metadata": {k: v for k, v in wire["metadata"].items() if k != "managedFields"},
    }


def batch_job(owner: dict[str, Any] | None, template_labels: dict[str, str] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": "nightly-report",
        "namespace": "team",
        "uid": "batch-uid",
        "resourceVersion": "7",
        "labels": {"app": "nightly-report"},
        "managedFields": MANAGED,
    }
    if owner is not None:
        metadata["ownerReferences"] = [{**owner, "controller": True, "uid": "owner-uid", "name": "owner"}]
    template = {"metadata": {"labels": template_labels or {}}, "spec": {"containers": [{"name": "report"}]}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {"backoffLimit": 6, "template": template},
        "status": {"active": 1},
    }


def test_a_batch_job_a_training_job_controls_is_kept_whole_but_its_managed_fields() -> None:
    launcher = batch_job({"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob"})
    expected = copy.deepcopy(launcher)
    del expected["metadata"]["managedFields"]
    assert compact_batch_job(launcher) == expected


def test_a_batch_job_whose_pods_are_labelled_as_the_operators_is_kept_whole() -> None:
    orphan = batch_job(None, {OPERATOR_NAME_LABEL: "training-operator"})
    assert compact_batch_job(copy.deepcopy(orphan))["spec"] == orphan["spec"]


def test_any_other_batch_job_is_cached_as_its_identity_only() -> None:
    cron_run = batch_job({"apiVersion": "batch/v1", "kind": "CronJob"})
    assert compact_batch_job(copy.deepcopy(cron_run)) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            key: cron_run["metadata"][key]
            for key in ("name", "namespace", "uid", "resourceVersion", "ownerReferences")
        },
    }
