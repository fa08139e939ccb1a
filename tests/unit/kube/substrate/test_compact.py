"""What the caches keep of a pod or a service (kube.compact): less memory, the same observation."""

from __future__ import annotations

import copy
import json
from typing import Any

from kubetrain.api.manifest import parse_job
from kubetrain.frameworks.labels import OPERATOR_NAME_LABEL
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.compact import (
    POD_KEPT,
    SERVICE_KEPT,
    compact_batch_job,
    compact_object,
    compact_pod,
    compact_service,
)
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


def page_of(items: list[dict[str, Any]]) -> bytes:
    """A list page as the API server sends it: items without kind or apiVersion."""
    bare = [{k: v for k, v in item.items() if k not in ("kind", "apiVersion")} for item in items]
    return json.dumps({"metadata": {"resourceVersion": "9", "continue": "next"}, "items": bare}).encode()


def listed(item: dict[str, Any], kind: str) -> dict[str, Any]:
    """``item`` as the list path hands it to the general compaction: decoded, kind and apiVersion given."""
    return {"kind": kind, "apiVersion": "v1", **json.loads(json.dumps(item))}


def test_a_pod_decoded_from_the_wire_is_kept_exactly_as_compact_pod_keeps_it() -> None:
    pods, _ = children()
    for status in STATUSES:
        whole = [served(p, status) for p in pods]
        decoded = POD_KEPT.list_page(page_of(whole))
        assert decoded is not None
        items, version, continue_token = decoded
        for item in items:
            item.setdefault("kind", "Pod")
            item.setdefault("apiVersion", "v1")
        assert items == [compact_pod(listed(p, "Pod")) for p in whole]
        assert (version, continue_token) == ("9", "next")


def test_a_service_decoded_from_the_wire_is_kept_exactly_as_compact_service_keeps_it() -> None:
    _, services = children()
    whole = [served(s) for s in services]
    decoded = SERVICE_KEPT.list_page(page_of(whole))
    assert decoded is not None
    items = [{"kind": "Service", "apiVersion": "v1", **item} for item in decoded[0]]
    assert items == [compact_service(listed(s, "Service")) for s in whole]


def test_a_pod_decoded_from_a_watch_event_is_kept_exactly_as_compact_pod_keeps_it() -> None:
    pod = served(children()[0][0], STATUSES[2])
    line = json.dumps({"type": "MODIFIED", "object": pod})
    assert POD_KEPT.event(line) == ("MODIFIED", compact_pod(copy.deepcopy(pod)))


def test_pods_decoded_from_the_wire_share_their_keys_and_short_values() -> None:
    decoded = POD_KEPT.list_page(page_of([served(p, STATUSES[1]) for p in children()[0][:2]]))
    assert decoded is not None
    first, second = decoded[0]
    first_key = next(k for k in first["status"] if k == "containerStatuses")
    assert first_key is next(k for k in second["status"] if k == "containerStatuses")
    assert first["status"]["phase"] is second["status"]["phase"]
    assert first["metadata"]["namespace"] is second["metadata"]["namespace"]


def test_a_null_field_stays_null_and_an_absent_one_absent() -> None:
    pod = served(children()[0][0], STATUSES[0])
    pod["metadata"]["annotations"] = None
    pod["spec"]["containers"] = None
    pod["spec"].pop("nodeName", None)
    _, kept = POD_KEPT.event(json.dumps({"type": "ADDED", "object": pod}))
    assert kept == compact_pod(copy.deepcopy(pod))
    assert kept["metadata"]["annotations"] is None
    assert "nodeName" not in kept["spec"]


def test_a_metadata_field_the_schema_does_not_know_is_kept_by_the_general_way() -> None:
    pod = served(children()[0][0], STATUSES[0])
    pod["metadata"]["futureField"] = {"set": True}
    decoded = POD_KEPT.list_page(page_of([pod]))
    assert decoded is None  # the caller decodes the page whole and applies POD_KEPT.fallback
    _, kept = POD_KEPT.event(json.dumps({"type": "ADDED", "object": pod}))
    assert kept["metadata"]["futureField"] == {"set": True}
    assert kept == compact_pod(copy.deepcopy(pod))


def test_a_container_that_is_not_an_object_is_kept_as_compact_pod_keeps_it() -> None:
    pod = served(children()[0][0], STATUSES[0])
    pod["spec"]["containers"] = ["not-a-container"]
    _, kept = POD_KEPT.event(json.dumps({"type": "ADDED", "object": pod}))
    assert kept["spec"]["containers"] == ["not-a-container"]
    assert kept == compact_pod(copy.deepcopy(pod))
