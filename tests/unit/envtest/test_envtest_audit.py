"""Reading kube-apiserver's audit log: one event per complete request, Lease bodies kept."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from kubetrain.envtest import audit

LEASE_UPDATE = {
    "kind": "Event",
    "apiVersion": "audit.k8s.io/v1",
    "level": "Request",
    "stage": "ResponseComplete",
    "verb": "update",
    "user": {"username": "system:serviceaccount:kubeflow:training-operator"},
    "userAgent": "kubetrain-operator/0.1.0 (pod-a_1234)",
    "objectRef": {
        "resource": "leases",
        "namespace": "kubeflow",
        "name": "lock",
        "apiGroup": "coordination.k8s.io",
    },
    "responseStatus": {"metadata": {}, "code": 200},
    "requestObject": {"spec": {"holderIdentity": "pod-a_1234", "leaseDurationSeconds": 15}},
    "requestReceivedTimestamp": "2026-11-26T04:30:26.878575Z",
    "stageTimestamp": "2026-11-26T04:30:26.992826Z",
}
POD_BINDING = {
    **LEASE_UPDATE,
    "level": "Metadata",
    "verb": "create",
    "userAgent": "kube-scheduler/v1.34.4",
    "objectRef": {"resource": "pods", "namespace": "ns", "name": "p", "subresource": "binding"},
    "responseStatus": {"code": 201},
    "requestObject": None,
}


def test_a_complete_event_is_read_with_its_times_agent_and_answer() -> None:
    event = audit.parse_event(json.dumps(LEASE_UPDATE))
    assert event is not None
    assert (event.verb, event.resource, event.namespace, event.name) == (
        "update",
        "leases",
        "kubeflow",
        "lock",
    )
    assert (event.user_agent, event.code, event.succeeded) == (
        "kubetrain-operator/0.1.0 (pod-a_1234)",
        200,
        True,
    )
    assert event.received == datetime(2026, 11, 26, 4, 30, 26, 878575, tzinfo=UTC)
    assert event.completed > event.received
    assert event.request_object == {"spec": {"holderIdentity": "pod-a_1234", "leaseDurationSeconds": 15}}


def test_a_subresource_is_kept_apart_from_its_object() -> None:
    event = audit.parse_event(json.dumps(POD_BINDING))
    assert event is not None and (event.group, event.resource, event.subresource) == ("", "pods", "binding")


def test_a_line_cut_short_or_of_another_stage_is_no_event() -> None:
    assert audit.parse_event(json.dumps(LEASE_UPDATE)[:80]) is None
    assert audit.parse_event(json.dumps({**LEASE_UPDATE, "stage": "RequestReceived"})) is None


def test_a_run_directory_without_a_log_has_no_events(tmp_path: Path) -> None:
    assert list(audit.read_events(tmp_path)) == []


def test_the_log_is_read_in_order(tmp_path: Path) -> None:
    log = audit.log_path(tmp_path)
    log.parent.mkdir()
    log.write_text(json.dumps(LEASE_UPDATE) + "\n" + json.dumps(POD_BINDING) + "\n" + '{"kind": "Ev')
    assert [event.resource for event in audit.read_events(tmp_path)] == ["leases", "pods"]


def test_the_policy_file_is_written_beside_the_flags_that_name_it(tmp_path: Path) -> None:
    flags = audit.apiserver_args(tmp_path)
    assert f"--audit-policy-file={audit.policy_path(tmp_path)}" in flags
    assert audit.policy_path(tmp_path).read_text() == audit.WRITES
    assert "--audit-log-format=json" in flags
