"""MPIJob kubeflow.org/v2beta1 (mpi-operator parity, §2.8, §4.12) against envtest: the operator makes the
Service, ConfigMap, SSH Secret, worker pods and the launcher batch Job; kube-controller-manager's Job
controller makes the launcher pod; the pod driver plays the kubelet."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from operator_support import StartOperator, eventually

from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

KIND = "MPIJob"
API = "/apis/kubeflow.org/v2beta1"


def mpijob(name: str, workers: int = 2, **spec: Any) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "mpi", "image": "example.com/horovod:1"}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {"mpiReplicaSpecs": {"Launcher": replica(1), "Worker": replica(workers)}, **spec},
    }


def create(api: KubeApi, namespace: str, manifest: dict[str, Any]) -> None:
    api.create(f"{API}/namespaces/{namespace}/mpijobs", manifest)


def get(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    return api.get(f"{API}/namespaces/{namespace}/mpijobs/{name}")


def condition(api: KubeApi, namespace: str, name: str, type_: str) -> dict[str, Any] | None:
    conditions = (get(api, namespace, name).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == type_ and c["status"] == "True"), None)


def batch_job(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        return api.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{name}")
    except Exception:
        return None


def launcher_pod(api: KubeApi, namespace: str, job: str) -> dict[str, Any] | None:
    selector = f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher"
    items = api.get(f"/api/v1/namespaces/{namespace}/pods", {"labelSelector": selector})["items"]
    live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
    pending = [p for p in live if (p.get("status") or {}).get("phase") in (None, "Pending")]
    return pending[0] if pending else None


def worker_pods(namespace: str, workers: int, job: str = "pi") -> list[tuple[str, str]]:
    return [(namespace, f"{job}-worker-{i}") for i in range(workers)]


@pytest.fixture
def operator(start_operator: StartOperator) -> None:
    start_operator()  # the default kinds: every kind, with the v2beta1 MPIJob (--mpi-api's default)


def test_mpijob_v2beta1_objects_have_upstreams_names_labels_volumes_and_env(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", slotsPerWorker=2, runPolicy={"backoffLimit": 3}))
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    service = kube_api.get(f"/api/v1/namespaces/{namespace}/services/pi")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == {
        "training.kubeflow.org/operator-name": "mpi-operator",
        "training.kubeflow.org/job-name": "pi",
    }
    config = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps/pi-config")["data"]
    assert config["hostfile"] == (
        f"pi-worker-0.pi.{namespace}.svc slots=2\npi-worker-1.pi.{namespace}.svc slots=2\n"
    )
    assert config["discover_hosts.sh"] == "#!/bin/sh\n"

    launcher_job = eventually(lambda: batch_job(kube_api, namespace, "pi-launcher"), what="launcher Job")
    assert launcher_job["spec"]["backoffLimit"] == 3
    assert launcher_job["metadata"]["ownerReferences"][0]["kind"] == KIND
    assert launcher_job["metadata"]["labels"] == {"app": "pi"}  # as the mpi-operator labels it
    launcher = eventually(lambda: launcher_pod(kube_api, namespace, "pi"), what="launcher pod")
    labels = launcher["metadata"]["labels"]
    assert labels["training.kubeflow.org/job-role"] == "launcher"
    assert "training.kubeflow.org/replica-type" not in labels
    assert (launcher["spec"]["hostname"], launcher["spec"]["subdomain"]) == ("pi-launcher", "pi")
    main = launcher["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "") for e in main["env"]}  # the API server drops empty values
    assert env["K_MPI_JOB_ROLE"] == "launcher"
    assert env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"
    assert env["OMPI_MCA_orte_set_default_slots"] == "2"
    assert env["NVIDIA_VISIBLE_DEVICES"] == ""
    mounts = {m["name"]: m["mountPath"] for m in main["volumeMounts"] if not m["name"].startswith("kube-api")}
    assert mounts == {"ssh-auth": "/root/.ssh", "mpi-job-config": "/etc/mpi"}
    volumes = {v["name"]: v for v in launcher["spec"]["volumes"]}
    assert volumes["ssh-auth"]["secret"]["defaultMode"] == 0o600
    modes = {i["key"]: i["mode"] for i in volumes["mpi-job-config"]["configMap"]["items"]}
    assert modes == {"hostfile": 0o444, "discover_hosts.sh": 0o555}

    worker = kube_api.get(f"/api/v1/namespaces/{namespace}/pods/pi-worker-1")
    assert worker["metadata"]["labels"]["training.kubeflow.org/replica-index"] == "1"
    assert worker["spec"]["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"]
    assert worker["spec"]["dnsConfig"]["searches"] == [f"pi.{namespace}.svc.cluster.local"]


@pytest.mark.parametrize(
    ("implementation", "line", "env"),
    [
        (
            "Intel",
            "pi-worker-0.pi.{ns}.svc:3\n",
            {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile", "I_MPI_PERHOST": "3"},
        ),
        ("MPICH", "pi-worker-0.pi.{ns}.svc:3\n", {"HYDRA_HOST_FILE": "/etc/mpi/hostfile"}),
    ],
)
def test_each_mpi_implementation_gets_its_hostfile_syntax_and_launcher_env(
    operator: None, kube_api: KubeApi, namespace: str, implementation: str, line: str, env: dict[str, str]
) -> None:
    create(kube_api, namespace, mpijob("pi", workers=1, slotsPerWorker=3, mpiImplementation=implementation))
    launcher = eventually(lambda: launcher_pod(kube_api, namespace, "pi"), what="launcher pod")
    config = kube_api.get(f"/api/v1/namespaces/{namespace}/configmaps/pi-config")["data"]
    assert config["hostfile"] == line.format(ns=namespace)
    found = {e["name"]: e.get("value", "") for e in launcher["spec"]["containers"][0]["env"]}
    assert {name: found.get(name) for name in env} == env
    assert found["K_MPI_JOB_ROLE"] == "launcher"
    assert not [name for name in found if name.startswith("OMPI_MCA")]


def test_clean_pod_policy_all_deletes_the_workers_but_keeps_the_launcher_job(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", workers=1, runPolicy={"cleanPodPolicy": "All"}))
    wait_workers(kube_api, namespace, ["pi-worker-0"])
    with PodDriver(kube_api) as driver:
        driver.run((namespace, "pi-worker-0"))
        launcher = eventually(lambda: launcher_pod(kube_api, namespace, "pi"), what="launcher pod")
        driver.succeed((namespace, launcher["metadata"]["name"]))
        eventually(lambda: condition(kube_api, namespace, "pi", "Succeeded"), "Succeeded")
        wait_workers(kube_api, namespace, [])
    assert batch_job(kube_api, namespace, "pi-launcher") is not None


def test_the_ssh_secrets_key_pair_parses_and_matches(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", workers=1))
    path = f"/api/v1/namespaces/{namespace}/secrets/pi-ssh"
    secret = eventually(lambda: kube_api.get(path) if _exists(kube_api, path) else None, what="pi-ssh")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    data = {k: base64.b64decode(v) for k, v in secret["data"].items()}
    private = serialization.load_pem_private_key(data["ssh-privatekey"], password=None)
    public = private.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    )
    assert data["ssh-publickey"] == public


def test_discover_hosts_follows_the_running_workers(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", runLauncherAsWorker=True))
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    path = f"/api/v1/namespaces/{namespace}/configmaps/pi-config"
    with PodDriver(kube_api) as driver:
        driver.run((namespace, "pi-worker-1"))
        expected = f"#!/bin/sh\necho pi-launcher.pi.{namespace}.svc\necho pi-worker-1.pi.{namespace}.svc\n"
        eventually(
            lambda: kube_api.get(path)["data"]["discover_hosts.sh"] == expected, what="worker-1 listed"
        )
        driver.fail((namespace, "pi-worker-1"))
        expected = f"#!/bin/sh\necho pi-launcher.pi.{namespace}.svc\n"
        eventually(lambda: kube_api.get(path)["data"]["discover_hosts.sh"] == expected, what="worker-1 gone")


def test_wait_for_workers_ready_holds_the_launcher_job_until_every_worker_is_ready(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", launcherCreationPolicy="WaitForWorkersReady"))
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    with PodDriver(kube_api) as driver:
        driver.run((namespace, "pi-worker-0"))
        eventually(lambda: condition(kube_api, namespace, "pi", "Created"), what="Created")
        assert batch_job(kube_api, namespace, "pi-launcher") is None
        driver.run((namespace, "pi-worker-1"))
        eventually(lambda: batch_job(kube_api, namespace, "pi-launcher"), what="launcher Job")


def test_launcher_success_makes_the_mpijob_succeeded(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi"))
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    with PodDriver(kube_api) as driver:
        for worker in worker_pods(namespace, 2):
            driver.run(worker)
        launcher = eventually(lambda: launcher_pod(kube_api, namespace, "pi"), what="launcher pod")
        driver.run((namespace, launcher["metadata"]["name"]))
        eventually(lambda: condition(kube_api, namespace, "pi", "Running"), what="Running")
        driver.succeed((namespace, launcher["metadata"]["name"]))
        succeeded = eventually(lambda: condition(kube_api, namespace, "pi", "Succeeded"), "Succeeded")
    assert succeeded["reason"] == "MPIJobSucceeded"


def test_launcher_failure_past_backoff_limit_fails_the_mpijob_with_the_jobs_reason(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", workers=1, runPolicy={"backoffLimit": 0}))
    wait_workers(kube_api, namespace, ["pi-worker-0"])
    with PodDriver(kube_api) as driver:
        launcher = eventually(lambda: launcher_pod(kube_api, namespace, "pi"), what="launcher pod")
        driver.fail((namespace, launcher["metadata"]["name"]), reason="Error")
        failed = eventually(lambda: condition(kube_api, namespace, "pi", "Failed"), "Failed")
    assert failed["reason"].startswith("BackoffLimitExceeded/")


def test_with_disruptions_counted_as_failures_an_evicted_worker_fails_the_mpijob(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    manifest = mpijob("pi")
    manifest["metadata"]["annotations"] = {"kubetrain.dev/disruption-limit": "0"}  # the mpi-operator's way
    create(kube_api, namespace, manifest)
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    with PodDriver(kube_api) as driver:
        driver.evict((namespace, "pi-worker-0"))
        failed = eventually(lambda: condition(kube_api, namespace, "pi", "Failed"), what="Failed")
    assert (failed["reason"], failed["message"]) == ("MPIJobEvicted", "1/2 workers are evicted")


def test_an_evicted_worker_is_replaced_and_the_mpijob_goes_on(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi"))
    wait_workers(kube_api, namespace, ["pi-worker-0", "pi-worker-1"])
    path = f"/api/v1/namespaces/{namespace}/pods/pi-worker-0"
    before = kube_api.get(path)["metadata"]["uid"]

    def replaced() -> bool:
        # One read: the pod can go between a check that it exists and a second read of it.
        current = kube_api.get_or_none(path)
        metadata = current["metadata"] if current is not None else {"uid": before}
        return bool(metadata["uid"] != before and not metadata.get("deletionTimestamp"))

    with PodDriver(kube_api) as driver:
        driver.evict((namespace, "pi-worker-0"))
        eventually(replaced, what="pi-worker-0 replaced")
    assert condition(kube_api, namespace, "pi", "Failed") is None


def test_suspend_deletes_workers_and_suspends_the_launcher_job_and_resume_undoes_both(
    operator: None, kube_api: KubeApi, namespace: str
) -> None:
    create(kube_api, namespace, mpijob("pi", workers=1))
    wait_workers(kube_api, namespace, ["pi-worker-0"])
    eventually(lambda: batch_job(kube_api, namespace, "pi-launcher"), what="launcher Job")
    with PodDriver(kube_api):  # it finishes the deletions a kubelet would
        path = f"{API}/namespaces/{namespace}/mpijobs/pi"
        kube_api.patch(path, {"spec": {"runPolicy": {"suspend": True}}})
        eventually(lambda: condition(kube_api, namespace, "pi", "Suspended"), what="Suspended")
        eventually(
            lambda: (batch_job(kube_api, namespace, "pi-launcher") or {}).get("spec", {}).get("suspend"),
            what="launcher Job suspended",
        )
        eventually(
            lambda: not [p for p in _pods(kube_api, namespace) if p.startswith("pi-worker")],
            what="workers gone",
        )
        kube_api.patch(path, {"spec": {"runPolicy": {"suspend": False}}})
        eventually(
            lambda: (
                (batch_job(kube_api, namespace, "pi-launcher") or {}).get("spec", {}).get("suspend") is False
            ),
            what="launcher Job resumed",
        )
        wait_workers(kube_api, namespace, ["pi-worker-0"])


def wait_workers(api: KubeApi, namespace: str, expected: list[str]) -> None:
    """Exactly the ``expected`` worker pods exist (the launcher pod is the Job controller's)."""

    def probe() -> bool:
        return sorted(p for p in _pods(api, namespace) if "-worker-" in p) == sorted(expected)

    eventually(probe, what=f"worker pods {expected}")


def _pods(api: KubeApi, namespace: str) -> list[str]:
    items = api.get(f"/api/v1/namespaces/{namespace}/pods")["items"]
    return [p["metadata"]["name"] for p in items if not p["metadata"].get("deletionTimestamp")]


def _exists(api: KubeApi, path: str) -> bool:
    try:
        api.get(path)
    except Exception:
        return False
    return True
