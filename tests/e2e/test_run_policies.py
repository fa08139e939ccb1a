"""Run policies on real pods, the "Try this" list of the course kubetrain was born from: backoffLimit,
cleanPodPolicy, the ExitCode restart policy, suspend and resume, and TTL, with a real kubelet restarting and
reporting containers.

Each job is a PyTorchJob whose replicas run a one-line Python command in the small test image, through the
in-cluster operator (the ``operator`` fixture): what is checked is the operator's reaction to what a kubelet
really reports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from builders import container, manifest
from e2e.realpods import TEST_IMAGE, RealCluster, wait_until
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

JOB_TIMEOUT_SECONDS = 240.0


def _replica(command: str) -> dict[str, Any]:
    return container("pytorch", TEST_IMAGE, imagePullPolicy="Never", command=["python", "-u", "-c", command])


def _job(
    name: str,
    replicas: dict[str, str],
    restart_policy: str,
    run_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A PyTorchJob of one replica per entry of ``replicas`` (type → the command it runs)."""
    body = manifest("PyTorchJob", {}, name=name, namespace=None, spec={"runPolicy": run_policy or {}})
    body["spec"]["pytorchReplicaSpecs"] = {
        replica_type: {
            "replicas": 1,
            "restartPolicy": restart_policy,
            "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [_replica(command)]}},
        }
        for replica_type, command in replicas.items()
    }
    return body


class Jobs:
    """PyTorchJobs of one namespace on the real cluster."""

    def __init__(self, cluster: RealCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"

    def create(self, body: dict[str, Any]) -> None:
        self.cluster.api.create(self.path, body)

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.cluster.api.get(f"{self.path}/{name}"))

    def condition(self, name: str, kind: str) -> dict[str, Any] | None:
        conditions = self.get(name).get("status", {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == kind and c["status"] == "True"), None)

    def wait_for(self, name: str, kind: str, timeout: float = JOB_TIMEOUT_SECONDS) -> dict[str, Any]:
        return dict(wait_until(f"{name} {kind}", lambda: self.condition(name, kind), timeout))

    def pods(self, name: str) -> list[dict[str, Any]]:
        selector = {"labelSelector": f"training.kubeflow.org/job-name={name}"}
        return list(self.cluster.api.get(f"/api/v1/namespaces/{self.namespace}/pods", selector)["items"])

    def pod(self, name: str) -> dict[str, Any] | None:
        # One GET, not exists() then get(): the operator may delete the pod in between.
        pod = self.cluster.api.get_or_none(f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        return None if pod is None else dict(pod)


@pytest.fixture
def jobs(operator: RealCluster, namespace: str) -> Iterator[Jobs]:
    yield Jobs(operator, namespace)


def _restart_count(pod: dict[str, Any] | None) -> int:
    statuses = (pod or {}).get("status", {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


def test_backoff_limit_stops_in_place_restarts_after_three_and_fails_the_job(jobs: Jobs) -> None:
    # The course's spec: backoffLimit 3 and cleanPodPolicy Running, a command that exits 1, PyTorch's default
    # restartPolicy (OnFailure: the kubelet restarts the container in place).
    run_policy = {"backoffLimit": 3, "cleanPodPolicy": "Running"}
    jobs.create(_job("backoff", {"Master": "print('attempt'); raise SystemExit(1)"}, "OnFailure", run_policy))
    most_restarts = 0

    def failed() -> dict[str, Any] | None:
        nonlocal most_restarts
        most_restarts = max(most_restarts, _restart_count(jobs.pod("backoff-master-0")))
        return jobs.condition("backoff", "Failed")

    # The kubelet's crash-loop back-off (10 s, 20 s, 40 s) paces the three restarts.
    condition = wait_until("backoff Failed", failed, JOB_TIMEOUT_SECONDS)

    assert most_restarts == 3
    assert condition["message"] == "Job backoff has failed because it has reached the specified backoff limit"
    # Not "the failed pods left behind", as the course says: as upstream (§4.5, and a batch Job with
    # OnFailure), a job failed by its backoffLimit deletes every pod whatever its cleanPodPolicy, or the
    # kubelet would go on restarting the crash-looping one. cleanPodPolicy applies to a job that failed by
    # itself (with restartPolicy Never, next test).
    wait_until("the failed job's pods deleted", lambda: jobs.pods("backoff") == [], PATIENCE)


def _kubetrain_get_column(jobs: Jobs, name: str, column: str) -> str:
    """One cell of ``kubetrain get pytorchjob NAME`` against the real cluster (columns start where their
    header does: kubectl's plain layout, whose REPLICAS cells hold spaces)."""
    done = jobs.cluster.kubetrain("get", "pytorchjob", name, "-n", jobs.namespace)
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()
    start = header.index(column)
    return row[start:].split()[0]


def test_kubetrain_get_counts_the_kubelets_in_place_restarts(jobs: Jobs) -> None:
    # The RESTARTS column on a cluster is the job's pods' restartCount, as a kubelet reports it: the master
    # fails once (a file on its emptyDir says it ran), the kubelet restarts it in place, then it runs on.
    command = (
        "import os, sys, time\n"
        "if not os.path.exists('/scratch/ran'):\n"
        "    open('/scratch/ran', 'w').close()\n"
        "    sys.exit(1)\n"
        "time.sleep(600)\n"
    )
    body = _job("restarted", {"Master": command}, "OnFailure")
    template = body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    template["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    template["containers"][0]["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    jobs.create(body)

    def restarted_and_running() -> bool:
        pod = jobs.pod("restarted-master-0")
        return pod is not None and _restart_count(pod) == 1 and pod["status"]["phase"] == "Running"

    # The kubelet's first crash-loop back-off is 10 s.
    wait_until("the master restarted and running", restarted_and_running, JOB_TIMEOUT_SECONDS)

    assert _kubetrain_get_column(jobs, "restarted", "RESTARTS") == "1"
    assert _kubetrain_get_column(jobs, "restarted", "STATE") == "Running"


def test_clean_pod_policy_running_keeps_the_failed_pod_for_kubectl_logs_and_deletes_the_running_one(
    jobs: Jobs,
) -> None:
    jobs.create(
        _job(
            "keep-failed",
            {
                "Master": "print('loss went nan at step 7'); raise SystemExit(1)",
                "Worker": "import time; time.sleep(600)",
            },
            "Never",
            {"cleanPodPolicy": "Running"},
        )
    )

    jobs.wait_for("keep-failed", "Failed")
    wait_until("the running worker deleted", lambda: jobs.pod("keep-failed-worker-0") is None, PATIENCE)
    master = jobs.pod("keep-failed-master-0")
    logs = jobs.cluster.kubectl("logs", "-n", jobs.namespace, "keep-failed-master-0")

    assert master is not None and master["status"]["phase"] == "Failed"
    assert logs.returncode == 0, logs.stderr
    assert "loss went nan at step 7" in logs.stdout


def test_exit_code_137_recreates_the_pod_and_counts_against_the_backoff_limit(jobs: Jobs) -> None:
    # Exit codes >= 128 are retryable: the pod is deleted and recreated, with a Restarting condition, as
    # upstream. Upstream never counts those recreations (its backoff sums the restartCount of Running pods,
    # which a new pod resets: trainer#2045, recreated forever); kubetrain counts them (engine/limits.py,
    # docs/migration.md), so the job fails on the backoffLimit-th failure that needs a restart, as with
    # OnFailure: with backoffLimit 2 the pod is recreated once, and its second exit 137 fails the job.
    jobs.create(_job("oom", {"Master": "raise SystemExit(137)"}, "ExitCode", {"backoffLimit": 2}))
    uids: set[str] = set()
    restarting_seen = False

    def failed() -> dict[str, Any] | None:
        nonlocal restarting_seen
        pod = jobs.pod("oom-master-0")
        if pod is not None:
            uids.add(pod["metadata"]["uid"])
        restarting_seen = restarting_seen or jobs.condition("oom", "Restarting") is not None
        return jobs.condition("oom", "Failed")

    condition = wait_until("oom Failed", failed, JOB_TIMEOUT_SECONDS)

    assert len(uids) == 2  # the first pod, and the one recreated after its retryable exit
    assert restarting_seen
    assert condition["message"] == "Job oom has failed because it has reached the specified backoff limit"


def test_exit_code_1_fails_the_job_without_recreating_the_pod(jobs: Jobs) -> None:
    jobs.create(_job("bug", {"Master": "raise SystemExit(1)"}, "ExitCode", {"backoffLimit": 3}))

    condition = jobs.wait_for("bug", "Failed")
    master = jobs.pod("bug-master-0")

    assert condition["message"] == 'job "bug" is failing because "Master" replica(s) failed.'
    assert master is not None and master["status"]["phase"] == "Failed"
    assert _restart_count(master) == 0


def test_a_suspended_job_creates_no_pod_until_resumed_then_runs_to_succeeded(jobs: Jobs) -> None:
    jobs.create(_job("later", {"Master": "print('ran')"}, "OnFailure", {"suspend": True}))

    jobs.wait_for("later", "Suspended")
    assert jobs.pods("later") == []
    assert "startTime" not in jobs.get("later").get("status", {})

    jobs.cluster.api.patch(f"{jobs.path}/later", {"spec": {"runPolicy": {"suspend": False}}})

    jobs.wait_for("later", "Succeeded")
    logs = jobs.cluster.kubectl("logs", "-n", jobs.namespace, "later-master-0")
    assert logs.stdout.strip() == "ran"
    conditions = jobs.get("later")["status"]["conditions"]
    [suspended] = [c for c in conditions if c["type"] == "Suspended"]
    assert (suspended["status"], suspended["reason"]) == ("False", "PyTorchJobResumed")


def test_ttl_after_finished_deletes_the_job_and_its_pods(jobs: Jobs) -> None:
    jobs.create(_job("brief", {"Master": "print('done')"}, "OnFailure", {"ttlSecondsAfterFinished": 3}))

    jobs.wait_for("brief", "Succeeded")
    wait_until(
        "the finished job deleted", lambda: not jobs.cluster.api.exists(f"{jobs.path}/brief"), PATIENCE
    )
    # The pods go with their owner, through the controller-manager's garbage collector.
    wait_until("its pods deleted", lambda: jobs.pods("brief") == [], PATIENCE)
