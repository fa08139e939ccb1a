"""The TensorFlow, XGBoost, JAX, Paddle and MPI examples (examples/<framework>/job.yaml) as real pods on the
real node through the in-cluster operator, each applied as written except for its image (the one
``tools/images/build.py <framework>`` builds: no registry is reachable), to Succeeded, with what each
program prints to prove its distributed part worked read back by ``kubectl logs``.

Each example runs once for its module-scoped fixture; each test checks one rule of what it did. The job's
wall time (apply to Succeeded) and its image's load time are printed on stderr (``e2e: ...``).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.realpods import RealCluster, scratch_namespace
from image_recipes import reference
from kubetrain.envtest import realnode
from kubetrain.frameworks.labels import JOB_NAME_LABEL, JOB_ROLE_LABEL

# An image the node did not start with is imported in its module's first setup (TensorFlow's is 1.7 GB).
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
JOB_TIMEOUT_SECONDS = 420.0
LOG_POLL_SECONDS = 2.0


def _say(message: str) -> None:
    print(f"e2e: {message}", file=sys.__stderr__, flush=True)


@dataclass
class FinishedJob:
    """An example's job after it finished: its last status, its pods as they were last seen, and every
    container's log as last read (pods deleted at the end by cleanPodPolicy keep theirs here)."""

    cluster: RealCluster
    namespace: str
    body: dict[str, Any]
    status: dict[str, Any]
    seconds: float
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)

    @property
    def outcome(self) -> str | None:
        conditions = self.status.get("conditions") or []
        done = [
            c["type"] for c in conditions if c["type"] in ("Succeeded", "Failed") and c["status"] == "True"
        ]
        return done[0] if done else None

    def log(self, pod: str) -> str:
        return self.logs.get(pod, "")

    def all_logs(self) -> str:
        return "\n".join(f"--- {name}\n{text}" for name, text in sorted(self.logs.items()))

    def env(self, pod: str, name: str) -> str:
        (container, *_) = self.pods[pod]["spec"]["containers"]
        return str(next(e["value"] for e in container.get("env", []) if e["name"] == name))


def _with_local_image(body: dict[str, Any], image: str) -> dict[str, Any]:
    """The example's manifest with every container's image replaced, nothing else changed."""
    (specs_key,) = [key for key in body["spec"] if key.endswith("ReplicaSpecs")]
    for replica in body["spec"][specs_key].values():
        for container in replica["template"]["spec"]["containers"]:
            container["image"] = image
    return body


def _job_path(body: dict[str, Any], namespace: str) -> str:
    kind, api_version = body["kind"], body["apiVersion"]
    return f"/apis/{api_version}/namespaces/{namespace}/{kind.lower()}s/{body['metadata']['name']}"


def run_example(cluster: RealCluster, example: str, image_name: str, tmp_path: Path) -> Iterator[FinishedJob]:
    """Load the example's image into the node, apply its manifest in a fresh namespace, and follow it to
    Succeeded or Failed, reading its pods' logs as it goes; the namespace is deleted afterwards."""
    started = time.monotonic()
    realnode.load_images(realnode.node_paths(cluster.run_dir), [image_name])
    _say(f"{example}: image {image_name} in the node in {time.monotonic() - started:.1f} s")

    body = _with_local_image(
        yaml.safe_load((EXAMPLES / example / "job.yaml").read_text()), reference(image_name)
    )
    manifest = tmp_path / f"{example}.yaml"
    manifest.write_text(yaml.safe_dump(body))
    with scratch_namespace(cluster, example) as namespace:
        started = time.monotonic()
        applied = cluster.kubectl("apply", "-n", namespace, "-f", str(manifest))
        assert applied.returncode == 0, applied.stderr
        job = FinishedJob(cluster, namespace, body, {}, 0.0)
        path = _job_path(body, namespace)
        selector = {"labelSelector": f"{JOB_NAME_LABEL}={body['metadata']['name']}"}
        deadline = started + JOB_TIMEOUT_SECONDS
        while True:
            job.status = dict(cluster.api.get(path).get("status", {}))
            for pod in cluster.api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]:
                name = pod["metadata"]["name"]
                job.pods[name] = pod
                if pod.get("status", {}).get("phase") in ("Running", "Succeeded", "Failed"):
                    read = cluster.kubectl("logs", "-n", namespace, name, "--all-containers")
                    # A container removed between the pod read and this one answers 0 with the kubelet's
                    # "unable to retrieve container logs for ..." as its text: keep the last real read.
                    gone = read.stdout.startswith("unable to retrieve container logs")
                    if read.returncode == 0 and read.stdout and not gone:
                        job.logs[name] = read.stdout
            if job.outcome is not None or time.monotonic() > deadline:
                break
            time.sleep(LOG_POLL_SECONDS)
        job.seconds = time.monotonic() - started
        _say(f"{example}: {job.outcome or 'not finished'} {job.seconds:.1f} s after kubectl apply")
        yield job


def _replica_pods(job: FinishedJob, role: str) -> list[str]:
    return sorted(name for name, pod in job.pods.items() if f"-{role}-" in name)


def _assert_succeeded(job: FinishedJob, pods: int) -> None:
    assert job.outcome == "Succeeded", f"{job.status}\n{job.all_logs()}"
    assert len(job.pods) == pods, sorted(job.pods)
    for pod in job.pods.values():
        assert pod["spec"]["nodeName"] == realnode.NODE_NAME


# --- TensorFlow: MultiWorkerMirroredStrategy over TF_CONFIG -------------------------------------------


@pytest.fixture(scope="module")
def tf_job(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    yield from run_example(operator, "tensorflow", "tensorflow", tmp_path_factory.mktemp("tf"))


def test_tensorflow_example_succeeds_as_two_workers_on_the_real_node(tf_job: FinishedJob) -> None:
    _assert_succeeded(tf_job, pods=2)
    assert _replica_pods(tf_job, "worker") == ["tf-multiworker-worker-0", "tf-multiworker-worker-1"]


def test_tf_config_of_each_worker_lists_every_worker_and_names_its_own_task(tf_job: FinishedJob) -> None:
    # Each worker's own headless Service (<job>-worker-<i>) names it, as upstream's TF_CONFIG does.
    hosts = [f"tf-multiworker-worker-{i}.{tf_job.namespace}.svc:2222" for i in range(2)]
    for index in range(2):
        config = json.loads(tf_job.env(f"tf-multiworker-worker-{index}", "TF_CONFIG"))

        assert config["cluster"] == {"worker": hosts}
        assert config["task"] == {"type": "worker", "index": index}


def test_multi_worker_mirrored_strategy_syncs_both_workers_and_all_reduces_across_them(
    tf_job: FinishedJob,
) -> None:
    for index in range(2):
        log = tf_job.log(f"tf-multiworker-worker-{index}")

        assert f"task worker-{index}: 2 replicas in sync" in log, log
        assert "all-reduce of ones = 2" in log, log
        first, last = map(float, re.findall(r"loss first ([0-9.]+) last ([0-9.]+)", log)[0])
        assert last < first


# --- XGBoost: the rabit tracker on the master, every rank joining it ----------------------------------


@pytest.fixture(scope="module")
def xgboost_job(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    yield from run_example(operator, "xgboost", "xgboost", tmp_path_factory.mktemp("xgb"))


def test_xgboost_example_succeeds_as_a_master_and_two_workers_on_the_real_node(
    xgboost_job: FinishedJob,
) -> None:
    _assert_succeeded(xgboost_job, pods=3)


def test_every_rank_joins_the_masters_rabit_tracker_and_allreduces_the_ranks(
    xgboost_job: FinishedJob,
) -> None:
    ranks = {}
    for pod in xgboost_job.pods:
        found = re.search(r"rank (\d) of 3: allreduce of ranks = 3$", xgboost_job.log(pod), re.MULTILINE)
        assert found, xgboost_job.log(pod)
        ranks[pod] = int(found[1])
        assert xgboost_job.env(pod, "MASTER_ADDR") == "xgboost-collective-master-0"

    assert sorted(ranks.values()) == [0, 1, 2]
    assert ranks["xgboost-collective-master-0"] == 0


def test_every_xgboost_rank_trains_the_same_twenty_trees_with_falling_loss(xgboost_job: FinishedJob) -> None:
    for pod in xgboost_job.pods:
        found = re.search(r"logloss first ([0-9.]+) last ([0-9.]+) trees (\d+)", xgboost_job.log(pod))
        assert found, xgboost_job.log(pod)

        assert float(found[2]) < float(found[1])
        assert found[3] == "20"


# --- JAX: two processes through worker-0's coordinator, a psum over both -------------------------------


@pytest.fixture(scope="module")
def jax_job(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    yield from run_example(operator, "jax", "jax", tmp_path_factory.mktemp("jax"))


def test_jax_example_succeeds_as_two_workers_on_the_real_node(jax_job: FinishedJob) -> None:
    _assert_succeeded(jax_job, pods=2)


def test_both_jax_processes_join_the_coordinator_and_psum_over_both(jax_job: FinishedJob) -> None:
    for index in range(2):
        pod = f"jax-psum-worker-{index}"
        log = jax_job.log(pod)

        assert jax_job.env(pod, "COORDINATOR_ADDRESS") == "jax-psum-worker-0"
        assert f"process {index} of 2, 2 devices in all" in log, log
        assert f"process {index}: psum = 3 (expected 3)" in log, log


# --- Paddle: the collective-mode PADDLE_* environment ------------------------------------------------


@pytest.fixture(scope="module")
def paddle_job(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    yield from run_example(operator, "paddle", "paddle", tmp_path_factory.mktemp("paddle"))


def test_paddle_example_succeeds_as_two_workers_on_the_real_node(paddle_job: FinishedJob) -> None:
    _assert_succeeded(paddle_job, pods=2)


def test_worker_0_is_the_paddle_master_at_its_own_pod_ip_and_worker_1_joins_it_by_name(
    paddle_job: FinishedJob,
) -> None:
    worker_0_ip = paddle_job.pods["paddle-env-worker-0"]["status"]["podIP"]
    master_log, worker_log = paddle_job.log("paddle-env-worker-0"), paddle_job.log("paddle-env-worker-1")

    assert f"PADDLE_JOB_ID=paddle-env PADDLE_NNODES=2 PADDLE_MASTER={worker_0_ip}:37777" in master_log
    assert "PADDLE_JOB_ID=paddle-env PADDLE_NNODES=2 PADDLE_MASTER=paddle-env-worker-0:37777" in worker_log
    # The rendezvous: worker-1 reached worker-0 through the cluster DNS name and worker-0 counted it in.
    assert f"master {worker_0_ip}:37777: 2 of 2 nodes joined (paddle-env-worker-1)" in master_log, master_log
    assert "paddle-env-worker-1 joined the master at paddle-env-worker-0:37777: ok" in worker_log, worker_log
    assert "problem" not in paddle_job.all_logs()


# --- MPI v2beta1: the launcher's mpirun over SSH into the worker pods --------------------------------


@pytest.fixture(scope="module")
def mpi_job(operator: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FinishedJob]:
    yield from run_example(operator, "mpi", "mpi", tmp_path_factory.mktemp("mpi"))


def _launcher(job: FinishedJob) -> str:
    (name,) = [n for n, p in job.pods.items() if p["metadata"]["labels"].get(JOB_ROLE_LABEL) == "launcher"]
    return name


def test_mpi_example_succeeds_as_a_launcher_and_two_workers_on_the_real_node(mpi_job: FinishedJob) -> None:
    _assert_succeeded(mpi_job, pods=3)
    assert _replica_pods(mpi_job, "worker") == ["mpi-allreduce-worker-0", "mpi-allreduce-worker-1"]


def test_mpirun_starts_two_ranks_in_each_worker_pod_and_all_four_allreduce(mpi_job: FinishedJob) -> None:
    log = mpi_job.log(_launcher(mpi_job))
    ranks = re.findall(r"^rank (\d) of 4 on (\S+): allreduce of ranks = 6 \(expected 6\)$", log, re.MULTILINE)

    assert sorted(int(rank) for rank, _ in ranks) == [0, 1, 2, 3], log
    hosts = sorted(host for _, host in ranks)
    assert [h.split(".")[0] for h in hosts] == [
        "mpi-allreduce-worker-0",
        "mpi-allreduce-worker-0",
        "mpi-allreduce-worker-1",
        "mpi-allreduce-worker-1",
    ]


def test_mpi_workers_serve_ssh_as_root_with_the_jobs_generated_key(mpi_job: FinishedJob) -> None:
    secret = mpi_job.cluster.api.get(f"/api/v1/namespaces/{mpi_job.namespace}/secrets/mpi-allreduce-ssh")

    assert secret["type"] == "kubernetes.io/ssh-auth"
    for worker in _replica_pods(mpi_job, "worker"):
        (container,) = mpi_job.pods[worker]["spec"]["containers"]
        volume = next(v for v in mpi_job.pods[worker]["spec"]["volumes"] if v["name"] == "ssh-auth")
        log = mpi_job.log(worker)

        assert container["command"] == ["/usr/sbin/sshd", "-De"]
        assert volume["secret"]["secretName"] == "mpi-allreduce-ssh"
        assert "Server listening on 0.0.0.0 port 22" in log, log
        assert "Accepted publickey for root" in log, log


def test_the_mpi_launchers_hostfile_lists_each_worker_by_its_fqdn_with_two_slots(
    mpi_job: FinishedJob,
) -> None:
    config = mpi_job.cluster.api.get(
        f"/api/v1/namespaces/{mpi_job.namespace}/configmaps/mpi-allreduce-config"
    )
    fqdn = f"mpi-allreduce.{mpi_job.namespace}.svc"

    assert config["data"]["hostfile"] == (
        f"mpi-allreduce-worker-0.{fqdn} slots=2\nmpi-allreduce-worker-1.{fqdn} slots=2\n"
    )


def test_the_mpi_launcher_starts_at_once_and_waits_for_workers_by_ssh_retries_and_job_restarts(
    mpi_job: FinishedJob,
) -> None:
    # As mpi-operator v2beta1 at launcherCreationPolicy AtStartup: no init container waits for the workers;
    # mpirun's ssh retries the connection and the launcher's batch Job restarts it while they start.
    launcher = mpi_job.pods[_launcher(mpi_job)]
    (container,) = launcher["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    (owner,) = launcher["metadata"]["ownerReferences"]
    restarts = sum(s.get("restartCount", 0) for s in launcher["status"].get("containerStatuses", []))
    _say(f"mpi: the launcher container restarted {restarts} time(s) before mpirun reached every worker")

    assert "initContainers" not in launcher["spec"]
    assert env["OMPI_MCA_plm_rsh_args"] == "-o ConnectionAttempts=10"
    assert (owner["kind"], owner["name"]) == ("Job", "mpi-allreduce-launcher")
    assert launcher["spec"]["restartPolicy"] == "OnFailure"
