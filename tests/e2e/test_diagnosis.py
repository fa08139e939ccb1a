"""The seeds' failure modes on real pods, each diagnosed by the operator as a Warning event on the job naming
the pod and the cause.

The seeds' exercise first: 1 master + 4 workers each asking 1 of the node's 4 ``nvidia.com/gpu`` (the node's
status patched to advertise them, removed afterwards). With no gang scheduler (the session's operator held at
zero replicas while an operator without ``--gang-scheduler-name`` watches the test's namespace, as
test_helm.py holds it for its release) four pods are placed and the fifth waits: ``GangDeadlock``, said once
that pod could not be placed, naming it and the scheduler's reason. With the session's operator (gang
scheduling by scheduler-plugins' coscheduling) nothing is placed and there is no such event. Then, under the
session's operator: a crash loop (its exit code and the last lines its previous run wrote, read through the
API), an image that is not there, an OOM kill under a memory limit, workers waiting for a master that is
never Ready, and two replicas running different digests of one image reference (retagged in the node's
containerd between their starts).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, delete_namespace, wait_until
from e2e.session_operator import held_at_zero
from kubetrain.envtest import realnode
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

GPU = "nvidia.com/gpu"
NODE_STATUS = f"/api/v1/nodes/{realnode.NODE_NAME}/status"
BUSYBOX = "localhost/kubetrain/busybox:1.35"
NOTHING_PLACED_WINDOW_SECONDS = 35.0
"""How long a gang-scheduled job is watched for a pod placed or a GangDeadlock said, neither of which may
happen: a window for what must not happen, which load can only make less telling, never fail."""
SLEEP = "import time; print('up', flush=True); time.sleep(900)"


# --- jobs and what is seen of them -------------------------------------------------------------------------


def pytorch_job(
    name: str,
    workers: int,
    command: str = SLEEP,
    *,
    restart_policy: str = "OnFailure",
    **fields: Any,
) -> dict[str, Any]:
    main = container(
        "pytorch", TEST_IMAGE, imagePullPolicy="Never", command=["python", "-u", "-c", command], **fields
    )
    replicas: dict[str, int | None] = {"Master": 1, "Worker": workers} if workers else {"Master": 1}
    job = manifest(
        "PyTorchJob", replicas, name=name, namespace=None, containers=[main], restart_policy=restart_policy
    )
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        # A process that is PID 1 ignores SIGTERM: without this each pod holds its namespace's deletion for
        # the default 30 s.
        spec["template"]["spec"]["terminationGracePeriodSeconds"] = 1
    return job


def create(cluster: RealCluster, namespace: str, job: dict[str, Any]) -> None:
    cluster.api.create(f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs", job)


def pods_of(cluster: RealCluster, namespace: str, job: str) -> list[dict[str, Any]]:
    selector = {"labelSelector": f"training.kubeflow.org/job-name={job}"}
    return list(cluster.api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"])


def warnings(cluster: RealCluster, namespace: str, job: str, reason: str) -> list[dict[str, Any]]:
    selector = f"involvedObject.kind=PyTorchJob,involvedObject.name={job},reason={reason},type=Warning"
    return list(
        cluster.api.get(f"/api/v1/namespaces/{namespace}/events", {"fieldSelector": selector})["items"]
    )


def warning(
    cluster: RealCluster, namespace: str, job: str, reason: str, containing: str = "", timeout: float = 120.0
) -> dict[str, Any]:
    """The job's first ``reason`` Warning whose message holds ``containing``."""

    def found() -> list[dict[str, Any]]:
        return [e for e in warnings(cluster, namespace, job, reason) if containing in e["message"]]

    return dict(wait_until(f"a {reason} event on {job} with {containing!r}", found, timeout)[0])


def unschedulable_since(pod: dict[str, Any]) -> datetime | None:
    for condition in pod.get("status", {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
            return _time(condition["lastTransitionTime"])
    return None


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def describe(cluster: RealCluster, namespace: str, job: str) -> list[str]:
    described = cluster.kubetrain("describe", "pytorchjob", job, "-n", namespace)
    assert described.returncode == 0, described.stderr
    return described.stdout.splitlines()


# --- the node's GPUs and an operator without gang scheduling ------------------------------------------------


@pytest.fixture
def four_gpus(operator: RealCluster) -> Iterator[None]:
    """The real node advertises 4 ``nvidia.com/gpu`` (its status patched, as the Kubernetes docs advertise an
    extended resource; the kubelet derives allocatable from it) while the test runs."""
    operator.api.patch(NODE_STATUS, {"status": {"capacity": {GPU: "4"}}})
    try:
        wait_until(
            "4 allocatable GPUs on the node",
            lambda: (
                operator.api.get(f"/api/v1/nodes/{realnode.NODE_NAME}")["status"]["allocatable"].get(GPU)
                == "4"
            ),
            PATIENCE,
        )
        yield
    finally:
        # A merge patch's null removes the key.
        operator.api.patch(NODE_STATUS, {"status": {"capacity": {GPU: None}, "allocatable": {GPU: None}}})


@pytest.fixture
def without_gang_scheduling(operator: RealCluster, tmp_path: Path) -> Iterator[str]:
    """A namespace watched by ``kubetrain operator`` run without ``--gang-scheduler-name`` (this checkout's,
    on the host, as the envtest admin), the session's gang-scheduling operator held at zero replicas; the
    namespace is gone before that one comes back, so it never sees the namespace's jobs."""
    namespace = f"no-gang-{secrets.token_hex(3)}"
    operator.api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    log_path = tmp_path / "operator-without-gang.log"
    with held_at_zero(operator):
        command = [
            str(Path(sys.executable).with_name("kubetrain")),
            "operator",
            "--kubeconfig",
            str(operator.kubeconfig),
            "--namespace",
            namespace,
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
            f"--pytorch-init-container-image={BUSYBOX}",
        ]
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
        try:
            wait_until(
                f"the default ServiceAccount of {namespace}",
                lambda: operator.api.exists(f"/api/v1/namespaces/{namespace}/serviceaccounts/default"),
                PATIENCE,
            )
            yield namespace
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
            print(f"--- {log_path.name}\n{log_path.read_text(errors='replace')[-4000:]}")
            delete_namespace(operator, namespace)


def gpu_exercise(name: str) -> dict[str, Any]:
    """The seeds' "Try this": 1 master + 4 workers, each requesting 1 GPU."""
    return pytorch_job(name, workers=4, resources={"limits": {GPU: "1"}})


# --- the tests ---------------------------------------------------------------------------------------------


@pytest.mark.usefixtures("four_gpus")
def test_the_seeds_gpu_exercise_without_gang_scheduling_is_a_gang_deadlock_naming_the_pending_pod(
    operator: RealCluster, without_gang_scheduling: str
) -> None:
    namespace = without_gang_scheduling
    create(operator, namespace, gpu_exercise("ddp"))
    wait_until("five pods", lambda: len(pods_of(operator, namespace, "ddp")) == 5, PATIENCE)
    [pending] = wait_until(
        "the pod that does not fit",
        lambda: [p for p in pods_of(operator, namespace, "ddp") if unschedulable_since(p)],
        PATIENCE,
    )
    pending_name = pending["metadata"]["name"]

    event = warning(operator, namespace, "ddp", "GangDeadlock", pending_name, timeout=PATIENCE)
    pods = pods_of(operator, namespace, "ddp")
    text = describe(operator, namespace, "ddp")

    cause = unschedulable_since(pending)
    assert cause is not None
    # Said once the pod could not be placed, by the objects' own clocks (how soon is a speed, and the load's).
    assert _time(event["firstTimestamp"]) >= cause, (event["firstTimestamp"], cause)
    placed = [p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")]
    assert len(placed) == 4 and pending_name not in placed
    assert event["message"].startswith(
        f"pod {pending_name} cannot be scheduled (0/1 nodes are available: 1 Insufficient {GPU}) while the "
        "job's other pods were placed: without gang scheduling those wait at the rendezvous"
    ), event["message"]
    assert text[:2] == ["Diagnosis:", f"  GangDeadlock: {event['message']}"]


@pytest.mark.usefixtures("four_gpus")
def test_the_seeds_gpu_exercise_with_gang_scheduling_starts_nothing_and_is_no_gang_deadlock(
    operator: RealCluster, namespace: str, gang_scheduler: str
) -> None:
    create(operator, namespace, gpu_exercise("ddp"))
    wait_until("five pods", lambda: len(pods_of(operator, namespace, "ddp")) == 5, PATIENCE)
    # Past the coscheduling plugin's permit wait, with time for a pod to be placed or a deadlock said.
    time.sleep(NOTHING_PLACED_WINDOW_SECONDS)

    pods = pods_of(operator, namespace, "ddp")
    try:
        event = warning(operator, namespace, "ddp", "InsufficientResources", timeout=PATIENCE)
    except AssertionError as error:
        said = [c.get("message") for p in pods for c in p["status"].get("conditions") or []]
        raise AssertionError(f"{error}; the scheduler said: {said}") from error

    assert [p["spec"].get("nodeName") for p in pods] == [None] * 5
    assert {p["spec"]["schedulerName"] for p in pods} == {gang_scheduler}
    assert warnings(operator, namespace, "ddp", "GangDeadlock") == []
    assert f"Fix: free or add {GPU} on the nodes" in event["message"], event["message"]


def test_a_crash_loop_event_quotes_the_exit_code_and_the_last_lines_of_the_previous_run(
    operator: RealCluster, namespace: str
) -> None:
    command = "print('loading shards', flush=True); print('KeyError: learning_rate'); raise SystemExit(3)"
    create(operator, namespace, pytorch_job("crashing", workers=0, command=command))

    event = warning(operator, namespace, "crashing", "CrashLoop", "its last lines", timeout=180.0)

    assert event["message"].startswith(
        "pod crashing-master-0 is in a crash loop: container pytorch exited with code 3 (Error) and is "
        'restarted again and again; its last lines: "loading shards | KeyError: learning_rate". Fix:'
    ), event["message"]


def test_an_image_that_is_not_there_is_an_image_pull_failed_event_naming_it(
    operator: RealCluster, namespace: str
) -> None:
    job = pytorch_job("typo", workers=0)
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["image"] = (
        "localhost/kubetrain/does-not-exist:1"
    )
    create(operator, namespace, job)

    event = warning(operator, namespace, "typo", "ImagePullFailed", timeout=PATIENCE)

    assert event["message"].startswith(
        "pod typo-master-0 cannot start: image localhost/kubetrain/does-not-exist:1 of container pytorch "
        'cannot be pulled (ErrImageNeverPull: Container image "localhost/kubetrain/does-not-exist:1" is not '
        "present with pull policy of Never). Fix:"
    ), event["message"]


def test_an_oom_kill_under_a_memory_limit_is_an_out_of_memory_event_naming_the_container_and_limit(
    operator: RealCluster, namespace: str
) -> None:
    job = pytorch_job(
        "hungry",
        workers=0,
        command="x = bytearray(512 * 1024 * 1024)",
        restart_policy="Never",
        resources={"limits": {"memory": "64Mi"}},
    )
    create(operator, namespace, job)

    event = warning(operator, namespace, "hungry", "OutOfMemory", timeout=PATIENCE)

    assert event["message"].startswith(
        "pod hungry-master-0: container pytorch was killed for running out of memory (OOMKilled, exit code "
        "137) under its memory limit of 64Mi. Fix: raise container pytorch's memory limit "
        "(spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory)"
    ), event["message"]


def test_workers_waiting_for_a_master_that_is_never_ready_are_init_waiting_for_master(
    operator: RealCluster, namespace: str
) -> None:
    job = pytorch_job("unready", workers=1)
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    master["readinessProbe"] = {"exec": {"command": ["false"]}, "periodSeconds": 2}
    create(operator, namespace, job)

    event = warning(operator, namespace, "unready", "InitWaitingForMaster", timeout=180.0)

    assert event["message"].startswith(
        "pod unready-worker-0 waits in init container init-pytorch for master unready-master-0, which is not "
        "Ready: workers start only once the master's name resolves. Fix:"
    ), event["message"]


def test_replicas_running_different_digests_of_one_image_reference_are_an_image_digest_mismatch(
    operator: RealCluster, namespace: str
) -> None:
    socket = str(realnode.node_paths(operator.run_dir).containerd_socket)
    reference = f"localhost/kubetrain/diagnosis-retagged:{secrets.token_hex(3)}"

    def tag(source: str) -> None:
        tagged = subprocess.run(
            ["ctr", "--address", socket, "-n", "k8s.io", "images", "tag", "--force", source, reference],
            capture_output=True,
            text=True,
            check=False,
        )
        assert tagged.returncode == 0, tagged.stderr

    tag(BUSYBOX)
    try:
        job = pytorch_job("drift", workers=1)
        for spec in job["spec"]["pytorchReplicaSpecs"].values():
            spec["template"]["spec"]["containers"][0].update(image=reference, command=["sleep", "900"])
        create(operator, namespace, job)
        wait_until("both pods Running", lambda: _running(operator, namespace, "drift") == 2, PATIENCE)
        # The reference now names another image; the worker's next pod runs that one.
        tag(TEST_IMAGE)
        operator.api.delete(f"/api/v1/namespaces/{namespace}/pods/drift-worker-0")

        event = warning(operator, namespace, "drift", "ImageDigestMismatch", timeout=PATIENCE)
    finally:
        subprocess.run(["ctr", "--address", socket, "-n", "k8s.io", "images", "rm", reference], check=False)

    assert event["message"].startswith(f"pods run different builds of image {reference}: "), event["message"]
    assert re.search(
        r"sha256:[0-9a-f]{12} on pod drift-master-0; sha256:[0-9a-f]{12} on pod drift-worker-0",
        event["message"],
    )


def _running(cluster: RealCluster, namespace: str, job: str) -> int:
    return sum(
        1
        for p in pods_of(cluster, namespace, job)
        if p.get("status", {}).get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    )
