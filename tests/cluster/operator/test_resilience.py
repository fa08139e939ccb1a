"""The operator survives what production does to it: a kill -9 in the middle of a job's creation, and a
leader that dies while a standby waits."""

from __future__ import annotations

import json
import time

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

from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver

pytestmark = pytest.mark.cluster

LEASE_DURATION = 15.0
RETRY_PERIOD = 2.0


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


def _leader_flags(namespace: str) -> list[str]:
    return [
        "--leader-elect",
        "--leader-election-namespace",
        namespace,
        "--leader-election-id",
        "kubetrain-test",
    ]


def _is_leading(log: str) -> bool:
    return "leading as " in log or "became leader" in log


def test_with_leader_election_only_one_operator_acts_and_a_standby_takes_over_within_the_lease(
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

    leader.kill()
    killed_at = time.monotonic()
    create_job(kube_api, namespace, pytorch_job("second", workers=1))
    wait_pods(
        kube_api,
        namespace,
        ["first-master-0", "first-worker-0", "second-master-0", "second-worker-0"],
        timeout=LEASE_DURATION + 10,
    )
    took = time.monotonic() - killed_at
    assert took <= LEASE_DURATION + 1.2 * RETRY_PERIOD + 1.0, f"take-over took {took:.1f}s"
    assert _is_leading(standby.log)


def test_sigterm_releases_the_lease_so_the_standby_takes_over_at_once(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    one = start_operator(*_leader_flags(namespace))
    eventually(lambda: _is_leading(one.log), what="the first operator leads")
    two = start_operator(*_leader_flags(namespace))
    eventually(lambda: "caches synced" in two.log, what="the standby's caches synced")
    assert one.terminate() == 0
    stopped_at = time.monotonic()
    eventually(lambda: _is_leading(two.log), timeout=LEASE_DURATION, what="the standby leads")
    assert time.monotonic() - stopped_at < LEASE_DURATION / 2, "a released lease is taken at the next retry"
