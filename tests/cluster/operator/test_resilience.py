"""The operator survives what production does to it: a kill -9 in the middle of a job's creation, and a
leader that dies or stops while a standby waits. Hand-overs are checked in the Lease's own record (its
versions, timestamps, transitions); how fast they are is bench/operator_latency.py's to measure."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from operator_support import (
    StartOperator,
    create_job,
    eventually,
    pods,
    pytorch_job,
    services,
    wait_condition,
    wait_pods,
)

from kubetrain.envtest.kubeapi import KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.kube.runtime.leader import parse_micro_time
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


def test_a_kill_9_mid_creation_then_a_restart_creates_no_duplicate_and_the_job_completes(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, start_operator: StartOperator
) -> None:
    # Throttled to 5 requests/s, creating 16 pods and 16 services takes seconds: time to kill it midway.
    first = start_operator("--kube-api-qps", "5", "--kube-api-burst", "1")
    create_job(kube_api, namespace, pytorch_job("j", workers=15))
    eventually(lambda: len(pods(kube_api, namespace)) >= 3, what="the first pods")
    first.kill()
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods(kube_api, namespace)}
    services_before = len(services(kube_api, namespace))
    assert 3 <= len(before) < 16, "the kill must land in the middle of the creation"

    second = start_operator()
    expected = ["j-master-0", *(f"j-worker-{i}" for i in range(15))]
    created = wait_pods(kube_api, namespace, expected)
    survivors = {
        p["metadata"]["name"]: p["metadata"]["uid"] for p in created if p["metadata"]["name"] in before
    }
    assert survivors == before, "pods created before the kill are kept, not replaced"
    assert sorted(s["metadata"]["name"] for s in services(kube_api, namespace)) == sorted(expected)
    # The restarted operator created exactly what was missing: nothing it found was created again. Its
    # reconcile logs the count once every call is answered, which can be after the watch shows the pods.
    missing = (16 - len(before)) + (16 - services_before)

    def created_by_second() -> int:
        return sum(
            json.loads(line).get("created", 0)
            for line in second.log.splitlines()
            if '"outcome": "reconciled"' in line
        )

    eventually(lambda: created_by_second() >= missing, what="the restarted operator's reconcile logged")
    assert created_by_second() == missing

    for name in expected:
        pod_driver.run((namespace, name))
    pod_driver.succeed((namespace, "j-master-0"))
    wait_condition(kube_api, "PyTorchJob", namespace, "j", "Succeeded")


LEASE_ID = "kubetrain-test"


def _leader_flags(namespace: str) -> list[str]:
    return [
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--leader-election-id",
        LEASE_ID,
    ]


def _is_leading(log: str) -> bool:
    return "leading as " in log or "became leader" in log


def _leases(namespace: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


def _lease(api: KubeApi, namespace: str) -> KubeObject:
    return api.get(f"{_leases(namespace)}/{LEASE_ID}")


def _holder(lease: KubeObject) -> str:
    return str(lease["spec"].get("holderIdentity") or "")


def _moment(lease: KubeObject, field: str) -> datetime:
    moment = parse_micro_time(lease["spec"].get(field))
    assert moment is not None, f"the Lease has no {field}: {lease['spec']}"
    return moment


def _expiry(lease: KubeObject) -> datetime:
    """When a Lease not renewed again may be taken by another candidate."""
    return _moment(lease, "renewTime") + timedelta(seconds=lease["spec"]["leaseDurationSeconds"])


def _created(item: KubeObject) -> datetime:
    return datetime.fromisoformat(item["metadata"]["creationTimestamp"].replace("Z", "+00:00"))


def _versions_until(api: KubeApi, namespace: str, since: str, holder: str) -> list[KubeObject]:
    """The Lease's versions written after resourceVersion ``since``, in order, up to the first ``holder``
    holds: the API server's own record of how it changed hands."""
    versions = []
    for kind, lease in api.watch(_leases(namespace), since, int(PATIENCE)):
        if kind in ("ADDED", "MODIFIED") and lease["metadata"]["name"] == LEASE_ID:
            versions.append(lease)
            if _holder(lease) == holder:
                return versions
    raise AssertionError(f"no version of the Lease held by {holder} after {since}: {versions}")


def test_with_leader_election_only_one_operator_acts_and_a_standby_takes_over_once_the_lease_expires(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    one = start_operator(*_leader_flags(namespace))
    two = start_operator(*_leader_flags(namespace))
    create_job(kube_api, namespace, pytorch_job("first", workers=1))
    wait_pods(kube_api, namespace, ["first-master-0", "first-worker-0"])
    # The reconcile's log line follows its API calls: wait for it before telling the two apart.
    eventually(lambda: '"job": "' in one.log + two.log, what="a reconcile logged")
    leader, standby = (one, two) if '"job": "' in one.log else (two, one)
    assert '"job": "' not in standby.log, "the standby must not reconcile"
    assert _is_leading(leader.log) and not _is_leading(standby.log)

    # Read before the kill: a renewal after the read only moves the expiry later.
    last_renewed = _lease(kube_api, namespace)
    leader.kill()
    create_job(kube_api, namespace, pytorch_job("second", workers=1))
    created = wait_pods(
        kube_api, namespace, ["first-master-0", "first-worker-0", "second-master-0", "second-worker-0"]
    )
    assert _is_leading(standby.log)
    taken = _lease(kube_api, namespace)
    assert _holder(taken) not in ("", _holder(last_renewed))
    assert taken["spec"]["leaseTransitions"] == last_renewed["spec"].get("leaseTransitions", 0) + 1
    # Nothing acted for the job before the dead leader's Lease expired: the new leader's pods are from after.
    # (creationTimestamp has whole seconds: compare the expiry cut to the second too.)
    expired = _expiry(last_renewed).replace(microsecond=0)
    for made in created:
        if made["metadata"]["name"].startswith("second-"):
            assert _created(made) >= expired, f"{made['metadata']['name']} created before {expired}"


def test_sigterm_releases_the_lease_and_the_standby_takes_the_released_lease(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    one = start_operator(*_leader_flags(namespace))
    eventually(lambda: _is_leading(one.log), what="the first operator leads")
    two = start_operator(*_leader_flags(namespace))
    eventually(lambda: "caches synced" in two.log, what="the standby's caches synced")
    held = _lease(kube_api, namespace)
    assert _holder(held)

    assert one.terminate() == 0
    eventually(lambda: _is_leading(two.log), what="the standby leads")

    taken = _lease(kube_api, namespace)
    versions = _versions_until(kube_api, namespace, held["metadata"]["resourceVersion"], _holder(taken))
    holders = [_holder(version) for version in versions]
    # Renewals by the first, then its release (an empty holder, for 1 s), then the standby: never a
    # hand-over straight from one holder to the other, which is what a Lease left to expire looks like.
    assert holders[-2:] == ["", _holder(taken)], holders
    assert set(holders[:-2]) <= {_holder(held)}, holders
    released = versions[-2]
    assert released["spec"]["leaseDurationSeconds"] == 1
    assert taken["spec"]["leaseTransitions"] == held["spec"].get("leaseTransitions", 0) + 1
