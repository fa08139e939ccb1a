"""RBAC minimality, from the API server's own record: the operator and the Jobs view, each running as the
ServiceAccount its ClusterRole (manifests/; the chart's operator rules are the same, tests/unit/chart, and so
is its dashboard's, tests/cluster/helm) is bound to, do everything they can do on a control plane that logs
every request of theirs, reads included. Then:

- nothing they did was refused (403): no broader permission is needed;
- every permission the ClusterRole grants, (API group, resource, verb), was used by a request of theirs,
  or is one the API server checks on the operator's behalf when it acts (``SERVER_CHECKS``, each shown
  needed by a test that takes it away): none is granted for nothing.

The control plane enables OwnerReferencesPermissionEnforcement (OpenShift's default), so the children's
blockOwnerDeletion references are checked against the operator's finalizers permission, as there.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from rbac_support import (
    ROOT,
    Permission,
    audit_policy,
    bind,
    granted,
    kubeconfig_of,
    load,
    permissions,
    without,
)

import waiting
from builders import manifest
from dashboard_process import running_dashboard
from kubetrain.api.manifest import parse_job
from kubetrain.envtest import audit, controlplane, coscheduler, jobset
from kubetrain.envtest.audit import AuditEvent
from kubetrain.envtest.controlplane import free_port
from kubetrain.envtest.crds import CRD_PATH, install_crd_files, install_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.frameworks.labels import JOB_NAME_LABEL, REPLICA_INDEX_LABEL, REPLICA_TYPE_LABEL
from kubetrain.frameworks.registry import framework_for_kind
from kubetrain.frameworks.trainer.builtin import builtin_runtime_documents
from kubetrain.kube.status.injection import CA_CONFIG_MAP

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

IDENTITIES = "kubetrain-identities"
"""Where the ServiceAccounts live: the audit policy logs every request of this namespace's accounts."""
JOBS = "rbac-jobs"
OPERATOR_ROLE = ROOT / "manifests" / "base" / "cluster-role.yaml"
DASHBOARD_ROLE = ROOT / "manifests" / "components" / "dashboard" / "cluster-role.yaml"
KUBETRAIN = Path(sys.executable).parent / "kubetrain"
PLURALS = ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mxjobs", "mpijobs")

SERVER_CHECKS: dict[Permission, str] = {
    **{
        ("kubeflow.org", f"{plural}/finalizers", "update"): "blockOwnerDeletion on the job's children"
        for plural in PLURALS
    },
    ("trainer.kubeflow.org", "trainjobs/finalizers", "update"): "blockOwnerDeletion on a TrainJob's children",
    (
        "jobset.x-k8s.io",
        "jobsets",
        "create",
    ): "a server-side apply that creates the JobSet (audited as a patch)",
    ("", "pods/exec", "create"): "RBAC's escalation check on the MPI v1 launcher's Role, which grants it",
    ("", "pods", "get"): "the same check; and the status endpoint reads a pod its cache has not seen yet",
}
"""Granted permissions the operator needs though it never sends a request that uses them: the API server
checks them when the operator creates something."""


@dataclass
class Cluster:
    run_dir: Path
    kubeconfig: Path
    api: KubeApi
    tmp: Path

    def identity(self, account: str) -> Path:
        return kubeconfig_of(
            self.api, self.kubeconfig, IDENTITIES, account, self.tmp / f"{account}.kubeconfig"
        )

    def requests_of(self, account: str) -> list[AuditEvent]:
        user = f"system:serviceaccount:{IDENTITIES}:{account}"
        return [event for event in audit.read_events(self.run_dir) if event.user == user]


def eventually(probe: Callable[[], Any], what: str) -> Any:
    """``waiting.eventually``, taking an API error as "not yet": the identity under test may be refused
    until its binding is seen, and that is what some of these waits wait for."""

    def answered() -> Any:
        with contextlib.suppress(ApiError):
            return probe()
        return None

    return waiting.eventually(answered, what)


def pod_group_crd(group: str, version: str) -> dict[str, Any]:
    """A PodGroup CRD with an open schema: the API, not the scheduler."""
    names = {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup", "listKind": "PodGroupList"}
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"podgroups.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": names,
            "versions": [{"name": version, "served": True, "storage": True, "schema": schema}],
        },
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    run_dir = tmp_path_factory.mktemp("envtest-rbac")
    options = controlplane.EnvtestOptions(
        audit_policy=audit_policy(IDENTITIES), admission_plugins=("OwnerReferencesPermissionEnforcement",)
    )
    state = controlplane.start(run_dir, options)
    api = KubeApi.from_kubeconfig(state.kubeconfig)
    try:
        install_crds(api, ROOT / "manifests" / "crds")
        install_crd_files(api, [jobset.crd_path()])
        api.create(CRD_PATH, pod_group_crd("scheduling.volcano.sh", "v1beta1"))
        coscheduler.install_crds(api)
        eventually(lambda: api.is_ok("/apis/scheduling.volcano.sh/v1beta1/podgroups"), "volcano's API")
        for namespace in (IDENTITIES, JOBS):
            api.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        eventually(lambda: api.exists(f"/api/v1/namespaces/{JOBS}/serviceaccounts/default"), "default SA")
        bind(api, load(OPERATOR_ROLE), IDENTITIES, "training-operator")
        bind(api, load(DASHBOARD_ROLE), IDENTITIES, "kubetrain-dashboard")
        yield Cluster(run_dir, state.kubeconfig, api, tmp_path_factory.mktemp("rbac"))
    finally:
        api.close()
        controlplane.stop(run_dir)


# --- the operator doing everything it does --------------------------------------------------------------


@contextlib.contextmanager
def operator(kubeconfig: Path, log: Path, *flags: str) -> Iterator[int]:
    """``kubetrain operator`` as its ServiceAccount, electing its leader and serving its status endpoint
    (whose port it yields); stopped with SIGTERM."""
    port = free_port()
    command = [
        str(KUBETRAIN),
        "operator",
        "--kubeconfig",
        str(kubeconfig),
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
        "--leader-elect",
        "--leader-election-namespace",
        IDENTITIES,
        "--status-server-bind-address",
        f"127.0.0.1:{port}",
        "--status-server-url",
        f"https://127.0.0.1:{port}",
        "--status-server-namespace",
        IDENTITIES,
        *flags,
    ]
    with log.open("ab") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=dict(os.environ))
    try:
        eventually(lambda: "became leader" in log.read_text(), "the operator leading")
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(waiting.PATIENCE)


def report(api: KubeApi, port: int, pod: KubeObject, plural: str, version: str = "v1") -> None:
    """One progress report from ``pod``'s replica, with the token its kubelet would mount."""
    metadata = pod["metadata"]
    job = metadata["labels"]["training.kubeflow.org/job-name"]
    audience = f"kubeflow.org/{version}/namespaces/{JOBS}/{plural}/{job}/status"  # Trainer v2.3's rule
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [audience],
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": metadata["name"],
                "uid": metadata["uid"],
            },
        },
    }
    account = pod["spec"].get("serviceAccountName") or "default"
    token = api.create(f"/api/v1/namespaces/{JOBS}/serviceaccounts/{account}/token", request)["status"][
        "token"
    ]
    ca = eventually(
        lambda: api.get_or_none(f"/api/v1/namespaces/{JOBS}/configmaps/{CA_CONFIG_MAP}"), "the CA"
    )["data"]["ca.crt"]
    url = f"https://127.0.0.1:{port}/apis/kubeflow.org/{version}/namespaces/{JOBS}/{plural}/{job}/status"
    with httpx.Client(verify=_context(ca), timeout=waiting.PATIENCE) as client:
        answer = client.post(
            url,
            json={"trainerStatus": {"progressPercentage": 10}},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert answer.status_code == 200, answer.text


def _context(ca: str) -> Any:
    import ssl

    return ssl.create_default_context(cadata=ca)


def pods_of(api: KubeApi, job: str, replica_type: str | None = None) -> list[KubeObject]:
    selector = f"training.kubeflow.org/job-name={job}"
    if replica_type:
        selector += f",training.kubeflow.org/replica-type={replica_type}"
    items = api.get(f"/api/v1/namespaces/{JOBS}/pods", {"labelSelector": selector})["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def launcher_pods(api: KubeApi, job: str) -> list[KubeObject]:
    """The MPIJob v2beta1 launcher's pods, which the Job controller makes from the batch Job."""
    selector = f"training.kubeflow.org/job-name={job},training.kubeflow.org/job-role=launcher"
    items = api.get(f"/api/v1/namespaces/{JOBS}/pods", {"labelSelector": selector})["items"]
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


def job_path(plural: str, name: str, version: str = "v1") -> str:
    return f"/apis/kubeflow.org/{version}/namespaces/{JOBS}/{plural}/{name}"


SHORT_JOBS = [
    ("PyTorchJob", "pytorchjobs", {"Master": 1}),
    ("TFJob", "tfjobs", {"Worker": 1}),
    ("XGBoostJob", "xgboostjobs", {"Master": 1}),
    ("PaddleJob", "paddlejobs", {"Master": 1}),
    ("JAXJob", "jaxjobs", {"Worker": 1}),
    ("MXJob", "mxjobs", {"Scheduler": 1, "Server": 1, "Worker": 1}),
    ("MPIJob", "mpijobs", {"Launcher": 1, "Worker": 1}),
]


def every_kind_reports_then_fails_its_deadline_and_goes(api: KubeApi, port: int) -> None:
    """Each kind: its pods and services, a report (TokenReview, trainerStatus, history), its deadline
    (status, every pod and service deleted), and its TTL (the job deleted). Not the v2beta1 MPIJob's: its
    launcher's batch Job carries both, and the MPIJob stays, as mpi-operator's (the v1 one goes below)."""
    run_policy = {"activeDeadlineSeconds": 10, "ttlSecondsAfterFinished": 0}
    for kind, plural, replicas in SHORT_JOBS:
        version = "v2beta1" if kind == "MPIJob" else "v1"
        body = manifest(
            kind,
            replicas,
            name=f"short-{plural}",
            namespace=JOBS,
            api_version=f"kubeflow.org/{version}",
            spec={"runPolicy": run_policy},
        )
        api.create(f"/apis/kubeflow.org/{version}/namespaces/{JOBS}/{plural}", body)
    for kind, plural, _ in SHORT_JOBS:
        version = "v2beta1" if kind == "MPIJob" else "v1"
        first = eventually(lambda: pods_of(api, f"short-{plural}"), f"a pod of short-{plural}")  # noqa: B023
        report(api, port, first[0], plural, version)
    for kind, plural, _ in SHORT_JOBS:
        if kind == "MPIJob":
            continue
        path = job_path(plural, f"short-{plural}")
        eventually(lambda: not api.exists(path), f"short-{plural} deleted after its deadline")  # noqa: B023


def a_crash_looping_reporter_gets_its_history_updated_and_its_warning_counted(
    api: KubeApi, driver: PodDriver, port: int
) -> None:
    """Two reports 12 s apart (the history written, then updated); a crash loop (its previous log read, its
    Event created, then its count patched)."""
    body = manifest(
        "PyTorchJob", {"Master": 1, "Worker": 1}, name="talker", namespace=JOBS, restart_policy="OnFailure"
    )
    api.create(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/pytorchjobs", body)
    master = eventually(lambda: pods_of(api, "talker", "master"), "talker's master")[0]
    eventually(lambda: pods_of(api, "talker", "worker"), "talker's worker")
    driver.run((JOBS, "talker-master-0"))
    driver.run((JOBS, "talker-worker-0"))
    report(api, port, master, "pytorchjobs")
    history = f"/api/v1/namespaces/{JOBS}/configmaps/talker-progress-history"
    eventually(lambda: api.exists(history), "the history ConfigMap")
    driver.crash_loop((JOBS, "talker-worker-0"))
    time.sleep(2)
    report(api, port, master, "pytorchjobs")
    # From its third restart on it is a crash loop, whose last lines the operator reads (pods/log).
    driver.crash_loop((JOBS, "talker-worker-0"))
    driver.crash_loop((JOBS, "talker-worker-0"))

    def warning_count() -> int:
        events = api.get(f"/api/v1/namespaces/{JOBS}/events", {"fieldSelector": "involvedObject.name=talker"})
        return max((e.get("count", 1) for e in events["items"] if e["type"] == "Warning"), default=0)

    eventually(lambda: warning_count() >= 2, "the crash loop's Event count bumped")
    eventually(lambda: len(api.get(history)["data"]) and _history_points(api.get(history)) >= 2, "history")


def _history_points(config_map: KubeObject) -> int:
    import json

    data = next(iter(config_map["data"].values()))
    return len(json.loads(data).get("points") or [])


def an_elastic_job_gets_its_hpa_made_changed_and_removed(api: KubeApi) -> None:
    cpu = {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
    }
    body = manifest("PyTorchJob", {"Worker": 2}, name="elastic", namespace=JOBS)
    body["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": [cpu]}
    api.create(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/pytorchjobs", body)
    hpa = f"/apis/autoscaling/v2/namespaces/{JOBS}/horizontalpodautoscalers/elastic"
    eventually(lambda: api.exists(hpa), "the HPA")
    cpu["resource"]["target"]["averageUtilization"] = 60  # type: ignore[index]
    api.patch(job_path("pytorchjobs", "elastic"), {"spec": {"elasticPolicy": {"metrics": [cpu]}}})
    eventually(
        lambda: api.get(hpa)["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60,
        "HPA updated",
    )
    api.patch(job_path("pytorchjobs", "elastic"), {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: not api.exists(hpa), "the HPA removed on suspend")


def an_mpi_launcher_is_keyed_suspended_resumed_and_restarted_when_silent(
    api: KubeApi, driver: PodDriver, port: int
) -> None:
    """MPIJob v2beta1: its SSH Secret given keys (it had the wrong set), its launcher Job suspended and
    resumed, then deleted to restart it when the job stops reporting (progress deadline, Fail)."""
    secret = {
        "metadata": {"name": "pi-ssh"},
        "type": "kubernetes.io/ssh-auth",
        "data": {"ssh-privatekey": base64.b64encode(b"not a key").decode()},
    }
    api.create(f"/api/v1/namespaces/{JOBS}/secrets", secret)
    body = manifest(
        "MPIJob",
        {"Launcher": 1, "Worker": 1},
        name="pi",
        namespace=JOBS,
        api_version="kubeflow.org/v2beta1",
        restart_policy="OnFailure",
    )
    body["metadata"]["annotations"] = {
        "kubetrain.dev/progress-deadline-seconds": "3",
        "kubetrain.dev/progress-deadline-action": "Fail",
    }
    api.create(f"/apis/kubeflow.org/v2beta1/namespaces/{JOBS}/mpijobs", body)
    launcher_job = f"/apis/batch/v1/namespaces/{JOBS}/jobs/pi-launcher"
    eventually(
        lambda: "ssh-publickey" in api.get(f"/api/v1/namespaces/{JOBS}/secrets/pi-ssh")["data"], "keys"
    )
    eventually(lambda: (api.get_or_none(launcher_job) or {}).get("status", {}).get("startTime"), "launcher")
    path = job_path("mpijobs", "pi", "v2beta1")
    api.patch(path, {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: api.get(launcher_job)["spec"].get("suspend"), "the launcher Job suspended")
    api.patch(path, {"spec": {"runPolicy": {"suspend": False}}})
    eventually(lambda: api.get(launcher_job)["spec"].get("suspend") is False, "the launcher Job resumed")
    uid = api.get(launcher_job)["metadata"]["uid"]
    launcher = eventually(lambda: launcher_pods(api, "pi"), "the launcher pod")[0]
    worker = eventually(lambda: api.get_or_none(f"/api/v1/namespaces/{JOBS}/pods/pi-worker-0"), "the worker")
    driver.run(launcher)
    driver.run(worker)
    eventually(lambda: _condition(api.get(path), "Running"), "pi Running")
    report(api, port, launcher, "mpijobs", "v2beta1")
    eventually(
        lambda: (api.get_or_none(launcher_job) or {"metadata": {"uid": uid}})["metadata"]["uid"] != uid,
        "the silent launcher's Job deleted and made again",
    )


def _condition(job: KubeObject, type_: str) -> bool:
    return any(
        c["type"] == type_ and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def a_gang_job_gets_its_pod_group_made_kept_and_removed(
    api: KubeApi, scheduler: str, group_path: str
) -> None:
    """The PodGroup (minResources from the PriorityClasses its template names), put back when changed by
    hand, deleted on suspend."""
    name = f"gang-{scheduler.split('-')[0]}"
    body = manifest("PyTorchJob", {"Master": 1, "Worker": 1}, name=name, namespace=JOBS)
    for replica in body["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["priorityClassName"] = "rbac-high"
    api.create(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/pytorchjobs", body)
    group = f"{group_path}/namespaces/{JOBS}/podgroups/{name}"
    made = eventually(lambda: api.get_or_none(group), "the PodGroup")
    api.patch(group, {"spec": {"minMember": 99}})
    eventually(
        lambda: api.get(group)["spec"]["minMember"] == made["spec"]["minMember"], "the PodGroup put back"
    )
    api.patch(job_path("pytorchjobs", name), {"spec": {"runPolicy": {"suspend": True}}})
    eventually(lambda: not api.exists(group), "the PodGroup deleted on suspend")


TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
APPLY_PATCH = "application/apply-patch+yaml"


def trainjob(name: str, runtime: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": JOBS},
        "spec": {"runtimeRef": {"name": runtime}, **spec},
    }


def trainjobs_get_their_jobsets_snapshots_keys_and_hostfiles_then_fail_their_deadline(api: KubeApi) -> None:
    """Trainer's built-in runtimes created by the operator; an MPI TrainJob's runtime snapshot, SSH Secret
    (read, then applied), hostfile and JobSet; its status patched; then one whose deadline passes has its
    JobSet deleted."""

    def installed() -> bool:
        names = {d["metadata"]["name"] for d in builtin_runtime_documents()}
        return all(api.exists(f"{TRAINER}/clustertrainingruntimes/{name}") for name in names)

    eventually(installed, "the built-in runtimes the operator creates")
    api.create(f"{TRAINER}/namespaces/{JOBS}/trainjobs", trainjob("tj-mpi", "deepspeed-distributed"))
    jobsets = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{JOBS}/jobsets"
    eventually(lambda: api.get_or_none(f"{jobsets}/tj-mpi"), "tj-mpi's JobSet")
    assert api.exists(f"/api/v1/namespaces/{JOBS}/secrets/tj-mpi-mpi-ssh-auth")
    api.create(
        f"{TRAINER}/namespaces/{JOBS}/trainjobs", trainjob("tj-late", "torch-distributed", suspend=True)
    )
    eventually(lambda: api.get_or_none(f"{jobsets}/tj-late"), "tj-late's JobSet")
    api.patch(f"{TRAINER}/namespaces/{JOBS}/trainjobs/tj-late", {"spec": {"suspend": False}})
    api.delete(f"{TRAINER}/namespaces/{JOBS}/trainjobs/tj-late")
    late = trainjob("tj-late2", "torch-distributed", activeDeadlineSeconds=2)
    api.create(f"{TRAINER}/namespaces/{JOBS}/trainjobs", late)
    eventually(
        lambda: any(
            c["type"] == "Failed"
            for c in api.get(f"{TRAINER}/namespaces/{JOBS}/trainjobs/tj-late2")
            .get("status", {})
            .get("conditions", [])
        ),
        "tj-late2 failed at its deadline",
    )
    eventually(lambda: not api.exists(f"{jobsets}/tj-late2"), "tj-late2's JobSet deleted")


def trainjobs_on_gang_runtimes_get_their_pod_groups(api: KubeApi) -> None:
    """A TrainJob on a runtime with a coscheduling, then a Volcano, policy: its PodGroup read, then made."""
    base = next(d for d in builtin_runtime_documents() if d["metadata"]["name"] == "torch-distributed")
    for policy, group_path in (
        ("coscheduling", "/apis/scheduling.x-k8s.io/v1alpha1"),
        ("volcano", "/apis/scheduling.volcano.sh/v1beta1"),
    ):
        runtime = copy.deepcopy(base)
        runtime["metadata"]["name"] = f"torch-{policy}"
        runtime["spec"]["podGroupPolicy"] = {policy: {}}
        api.create(f"{TRAINER}/clustertrainingruntimes", runtime)
        api.create(f"{TRAINER}/namespaces/{JOBS}/trainjobs", trainjob(f"tj-{policy}", f"torch-{policy}"))
        eventually(
            lambda group=group_path, name=f"tj-{policy}": api.get_or_none(  # type: ignore[misc]
                f"{group}/namespaces/{JOBS}/podgroups/{name}"
            ),
            f"tj-{policy}'s PodGroup",
        )


def an_mpi_v1_launcher_gets_its_account_role_and_config(api: KubeApi, driver: PodDriver) -> None:
    """Its ServiceAccount, Role and RoleBinding, its config kept current; and a short one TTL-deleted."""
    short = manifest("MPIJob", {"Launcher": 1, "Worker": 1}, name="v1-short", namespace=JOBS)
    short["spec"]["runPolicy"] = {"activeDeadlineSeconds": 5, "ttlSecondsAfterFinished": 0}
    body = manifest("MPIJob", {"Launcher": 1, "Worker": 2}, name="v1", namespace=JOBS)
    api.create(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/mpijobs", short)
    api.create(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/mpijobs", body)
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{JOBS}"
    for path in (f"/api/v1/namespaces/{JOBS}/serviceaccounts/v1-launcher", f"{rbac}/roles/v1-launcher"):
        eventually(lambda: api.exists(path), path)  # noqa: B023
    eventually(lambda: api.exists(f"{rbac}/rolebindings/v1-launcher"), "the launcher's RoleBinding")
    for index in (0, 1):
        eventually(lambda: pods_of(api, "v1", "worker"), "the workers")
        driver.run((JOBS, f"v1-worker-{index}"))
    config = f"/api/v1/namespaces/{JOBS}/configmaps/v1-config"
    eventually(
        lambda: "v1-worker-1" in api.get(config)["data"]["discover_hosts.sh"], "discover_hosts updated"
    )
    eventually(lambda: not api.exists(job_path("mpijobs", "v1-short")), "v1-short deleted after its deadline")


def swap_to_the_v1_mpijob_crd(cluster: Cluster) -> None:
    """MPIJob v1 shares the CRD name with v2beta1: one is served at a time."""
    api = cluster.api
    for name in ("pi", "short-mpijobs"):
        with contextlib.suppress(ApiError):
            api.delete(job_path("mpijobs", name, "v2beta1"))
    api.delete(f"{CRD_PATH}/mpijobs.kubeflow.org")
    eventually(lambda: not api.exists(f"{CRD_PATH}/mpijobs.kubeflow.org"), "the v2beta1 CRD gone")
    install_crds(api, ROOT / "manifests" / "crds-mpijob-v1")
    # OwnerReferencesPermissionEnforcement maps an owner's kind through discovery, refreshed now and then:
    # until it knows v1 it refuses a blockOwnerDeletion reference to a v1 MPIJob from anyone it checks
    # (not the admin, whom it does not). A ServiceAccount of the same role, not the operator's, asks first.
    owner = api.create(
        f"/apis/kubeflow.org/v1/namespaces/{JOBS}/mpijobs",
        manifest("MPIJob", {"Launcher": 1}, name="mapping-probe", namespace=JOBS),
    )
    reference = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "MPIJob",
        "name": "mapping-probe",
        "uid": owner["metadata"]["uid"],
        "blockOwnerDeletion": True,
    }
    bind(api, {**load(OPERATOR_ROLE), "metadata": {"name": "mapping-probe"}}, IDENTITIES, "mapping-probe")
    with KubeApi.from_kubeconfig(cluster.identity("mapping-probe")) as probe:

        def mapped() -> bool:
            body = {"metadata": {"name": "mapping-probe", "ownerReferences": [reference]}}
            return bool(probe.create(f"/api/v1/namespaces/{JOBS}/configmaps?dryRun=All", body))

        eventually(mapped, "the API server mapping v1 MPIJobs")
    api.delete(f"/apis/kubeflow.org/v1/namespaces/{JOBS}/mpijobs/mapping-probe")


@pytest.fixture(scope="module")
def operator_requests(cluster: Cluster) -> list[AuditEvent]:
    api, logs = cluster.api, cluster.tmp
    identity = cluster.identity("training-operator")
    api.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "rbac-high"}, "value": 1000}
    )
    try:
        with PodDriver(api) as driver:
            with operator(identity, logs / "operator.log") as port:
                every_kind_reports_then_fails_its_deadline_and_goes(api, port)
                a_crash_looping_reporter_gets_its_history_updated_and_its_warning_counted(api, driver, port)
                an_elastic_job_gets_its_hpa_made_changed_and_removed(api)
                an_mpi_launcher_is_keyed_suspended_resumed_and_restarted_when_silent(api, driver, port)
                trainjobs_get_their_jobsets_snapshots_keys_and_hostfiles_then_fail_their_deadline(api)
            for scheduler, group_path in (
                ("volcano", "/apis/scheduling.volcano.sh/v1beta1"),
                ("scheduler-plugins-scheduler", "/apis/scheduling.x-k8s.io/v1alpha1"),
            ):
                with operator(
                    identity, logs / f"operator-{scheduler}.log", "--gang-scheduler-name", scheduler
                ):
                    a_gang_job_gets_its_pod_group_made_kept_and_removed(api, scheduler, group_path)
            with operator(identity, logs / "operator-trainer-gangs.log"):
                trainjobs_on_gang_runtimes_get_their_pod_groups(api)
            swap_to_the_v1_mpijob_crd(cluster)
            with operator(identity, logs / "operator-mpi-v1.log", "--mpi-api", "v1"):
                an_mpi_v1_launcher_gets_its_account_role_and_config(api, driver)
    finally:
        for log in sorted(logs.glob("operator*.log")):
            print(f"--- {log.name}\n{log.read_text(errors='replace')[-4000:]}")
    return cluster.requests_of("training-operator")


def test_the_operator_is_refused_nothing_it_asks(operator_requests: list[AuditEvent]) -> None:
    refused = sorted(
        {f"{e.verb} {e.group}/{e.resource}/{e.subresource}" for e in operator_requests if e.code == 403}
    )
    assert operator_requests and refused == []


def test_every_permission_of_the_operators_cluster_role_is_used(operator_requests: list[AuditEvent]) -> None:
    role = granted(load(OPERATOR_ROLE))
    unused = role - permissions(operator_requests) - set(SERVER_CHECKS)
    assert sorted(unused) == []
    assert sorted(permissions(operator_requests) - role) == []


# --- what the API server checks when the operator acts: each taken away, refused ------------------------


def served_mpijob_version(api: KubeApi) -> str:
    """v2beta1, or v1 once ``swap_to_the_v1_mpijob_crd`` has run."""
    crd = api.get(f"{CRD_PATH}/mpijobs.kubeflow.org")
    return str(next(v["name"] for v in crd["spec"]["versions"] if v.get("served")))


def identity_without(cluster: Cluster, permission: Permission) -> KubeApi:
    """The operator's ClusterRole less ``permission``, bound to an account of its own, once the API server
    authorizes by it (it grants configmaps get: asked until allowed)."""
    group, resource, verb = permission
    account = f"without-{group or 'core'}-{resource}-{verb}".replace("/", "-").replace(".", "-")
    bind(cluster.api, without(load(OPERATOR_ROLE), account, group, resource, verb), IDENTITIES, account)
    api = KubeApi.from_kubeconfig(cluster.identity(account))
    eventually(
        lambda: api.get_or_none(f"/api/v1/namespaces/{JOBS}/configmaps/none") is None, "the role bound"
    )
    return api


def operator_identity(cluster: Cluster) -> KubeApi:
    return KubeApi.from_kubeconfig(cluster.identity("training-operator"))


def child_of(kind: str, version: str) -> KubeObject:
    """A replica's pod as the operator makes it: owned by its job, blocking the job's deletion."""
    owner = {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "name": "owner",
        "uid": "0b5e5b6e-0000-4000-8000-000000000001",
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"child-of-{kind.lower()}", "ownerReferences": [owner]},
        "spec": {"containers": [{"name": "trainer", "image": "example.com/trainer:1"}]},
    }


@pytest.mark.parametrize(("kind", "plural"), [(kind, plural) for kind, plural, _ in SHORT_JOBS])
def test_without_update_on_a_kinds_finalizers_the_operator_may_not_create_its_jobs_children(
    cluster: Cluster, kind: str, plural: str
) -> None:
    version = served_mpijob_version(cluster.api) if kind == "MPIJob" else "v1"
    pods = f"/api/v1/namespaces/{JOBS}/pods?dryRun=All"
    with operator_identity(cluster) as full:
        assert full.create(pods, child_of(kind, version))["metadata"]["ownerReferences"]
    finalizers = ("kubeflow.org", f"{plural}/finalizers", "update")
    with identity_without(cluster, finalizers) as reduced, pytest.raises(ApiError) as refused:
        reduced.create(pods, child_of(kind, version))
    assert refused.value.code == 403
    assert "blockOwnerDeletion" in str(refused.value)


def test_without_create_on_jobsets_the_operators_apply_of_a_new_jobset_is_refused(cluster: Cluster) -> None:
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{JOBS}/jobsets/applied?fieldManager=trainer&dryRun=All"
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "applied"},
        "spec": {"replicatedJobs": []},
    }
    with operator_identity(cluster) as full:
        assert full.patch(path, body, APPLY_PATCH)["metadata"]["name"] == "applied"
    without = ("jobset.x-k8s.io", "jobsets", "create")
    with identity_without(cluster, without) as reduced, pytest.raises(ApiError) as refused:
        reduced.patch(path, body, APPLY_PATCH)
    assert refused.value.code == 403


def mpi_v1_launcher_role() -> KubeObject:
    """The Role the operator gives an MPI v1 job's launcher (pods get, list, watch; exec into its workers)."""
    job = parse_job(manifest("MPIJob", {"Launcher": 1, "Worker": 2}, name="escalation", namespace=JOBS))
    objects = framework_for_kind("kubeflow.org/v1", "MPIJob").companion_objects(job)
    role: KubeObject = next(o for o in objects if o["kind"] == "Role")
    return role


@pytest.mark.parametrize("permission", [("", "pods/exec", "create"), ("", "pods", "get")])
def test_without_what_the_mpi_launchers_role_grants_the_operator_may_not_create_it(
    cluster: Cluster, permission: Permission
) -> None:
    roles = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{JOBS}/roles?dryRun=All"
    with operator_identity(cluster) as full:
        assert full.create(roles, mpi_v1_launcher_role())["rules"]
    with identity_without(cluster, permission) as reduced, pytest.raises(ApiError) as refused:
        reduced.create(roles, mpi_v1_launcher_role())
    assert refused.value.code == 403
    assert "escalat" in str(refused.value)


def test_every_permission_the_api_server_checks_for_the_operator_is_shown_needed_above() -> None:
    shown = {("kubeflow.org", f"{plural}/finalizers", "update") for _, plural, _ in SHORT_JOBS}
    shown |= {("", "pods/exec", "create"), ("", "pods", "get")}
    shown |= {
        ("trainer.kubeflow.org", "trainjobs/finalizers", "update"),
        ("jobset.x-k8s.io", "jobsets", "create"),
    }
    assert shown == set(SERVER_CHECKS)


# --- the Jobs view doing everything it does --------------------------------------------------------------

VIEWER = "rbac-viewer"
"""The person using the Jobs view: allowed everything, so that every request the view makes for them is one
the view's own account is asked to make."""


@pytest.fixture(scope="module")
def dashboard_requests(cluster: Cluster) -> list[AuditEvent]:
    """``kubetrain dashboard`` as its ServiceAccount behind a gateway's user header: the list and its
    stream, then for a job of every kind: created from a manifest, its page (pods, events, progress
    history, diagnosis, describe, a replica's log, its own stream), suspended, resumed and deleted."""
    api = cluster.api
    with contextlib.suppress(ApiError):
        api.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            {
                "metadata": {"name": VIEWER},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": VIEWER}],
            },
        )
    arguments = ["--no-local", "--user-header", "kubeflow-userid"]
    arguments += ["--kubeconfig", str(cluster.identity("kubetrain-dashboard"))]
    headers = {"kubeflow-userid": VIEWER}
    with (
        PodDriver(api) as driver,
        running_dashboard(*arguments, log=cluster.tmp / "dashboard.log") as dashboard,
        httpx.Client(base_url=dashboard.url, headers=headers, timeout=waiting.PATIENCE) as client,
    ):
        writes = {"X-CSRF-Token": client.get("api/session").headers["X-CSRF-Token"]}
        first_event(client, "api/stream")
        for kind, plural, replicas in SHORT_JOBS:
            version = served_mpijob_version(api) if kind == "MPIJob" else "v1"
            name = f"viewed-{plural}"
            body = manifest(kind, replicas, name=name, namespace=JOBS, api_version=f"kubeflow.org/{version}")
            created = client.post(
                "api/jobs", json={"source": "cluster", "yaml": yaml.safe_dump(body)}, headers=writes
            )
            assert created.status_code == 201, created.text
            job = f"api/jobs/cluster/{JOBS}/{plural}.{version}/{name}"
            eventually(lambda: client.get(job).status_code == 200, f"{name}'s page")  # noqa: B023
            for page in ("pods", "events", "history", "diagnosis", "describe"):
                assert client.get(f"{job}/{page}").status_code != 403, page
            replica = next(iter(replicas)).lower()
            a_running_replica(api, driver, name, replica)
            logs = client.get(f"{job}/logs", params={"replica": f"{replica}-0"})
            assert logs.status_code != 403, logs.text
            first_event(client, f"{job}/stream")
            for action in ("suspend", "resume"):
                done = client.post(f"{job}/{action}", headers=writes)
                assert done.status_code == 200, done.text
            assert client.delete(job, headers=writes).status_code == 200
        a_trainjob_viewed(api, driver, client, writes)
    return cluster.requests_of("kubetrain-dashboard")


def a_trainjob_viewed(api: KubeApi, driver: PodDriver, client: httpx.Client, writes: dict[str, str]) -> None:
    """A Kubeflow Trainer TrainJob through the view: planned on a cluster runtime and on a namespaced one
    (whether or not they exist, the view asks for them), created, its page (its JobSet read for the
    diagnosis), a node's log, its stream, suspended, resumed and deleted."""
    name = "viewed-trainjob"

    def body(runtime: dict[str, str]) -> str:
        trainjob = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": JOBS},
            "spec": {"runtimeRef": runtime, "trainer": {"numNodes": 1, "image": "example.com/trainer:1"}},
        }
        return yaml.safe_dump(trainjob)

    for runtime in ({"name": "torch-distributed"}, {"name": "team", "kind": "TrainingRuntime"}):
        planned = client.post("api/plan", json={"source": "cluster", "yaml": body(runtime)}, headers=writes)
        assert planned.status_code != 403, planned.text
    created = client.post(
        "api/jobs", json={"source": "cluster", "yaml": body({"name": "torch-distributed"})}, headers=writes
    )
    assert created.status_code == 201, created.text
    job = f"api/jobs/cluster/{JOBS}/trainjobs.v1alpha1/{name}"
    eventually(lambda: client.get(job).status_code == 200, f"{name}'s page")
    for page in ("pods", "events", "history", "diagnosis", "describe"):
        assert client.get(f"{job}/{page}").status_code != 403, page
    labels = {
        "jobset.sigs.k8s.io/jobset-name": name,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    pod_name = f"{name}-node-0-0-abcde"
    pod = {
        "metadata": {"name": pod_name, "labels": labels},
        "spec": {"containers": [{"name": "node", "image": "example.com/trainer:1"}]},
    }
    api.create(f"/api/v1/namespaces/{JOBS}/pods", pod)
    driver.run((JOBS, pod_name))
    logs = client.get(f"{job}/logs", params={"replica": "node-0"})
    assert logs.status_code != 403, logs.text
    first_event(client, f"{job}/stream")
    for action in ("suspend", "resume"):
        done = client.post(f"{job}/{action}", headers=writes)
        assert done.status_code == 200, done.text
    assert client.delete(job, headers=writes).status_code == 200


def a_running_replica(api: KubeApi, driver: PodDriver, job: str, replica_type: str) -> None:
    """A pod of ``job``'s replica ``<replica_type>-0`` (made here: no operator runs), Running, so that
    the view reads its log."""
    labels = {JOB_NAME_LABEL: job, REPLICA_TYPE_LABEL: replica_type, REPLICA_INDEX_LABEL: "0"}
    name = f"{job}-{replica_type}-0"
    containers = [{"name": "trainer", "image": "example.com/trainer:1"}]
    body = {"metadata": {"name": name, "labels": labels}, "spec": {"containers": containers}}
    api.create(f"/api/v1/namespaces/{JOBS}/pods", body)
    driver.run((JOBS, name))


def first_event(client: httpx.Client, path: str) -> None:
    with client.stream("GET", path) as response:
        assert response.status_code == 200, path
        next(line for line in response.iter_lines() if line.startswith("event: "))


def test_the_jobs_view_is_refused_nothing_it_asks(dashboard_requests: list[AuditEvent]) -> None:
    refused = sorted(
        {f"{e.verb} {e.group}/{e.resource}/{e.subresource}" for e in dashboard_requests if e.code == 403}
    )
    assert dashboard_requests and refused == []


def test_every_permission_of_the_jobs_views_cluster_role_is_used(
    dashboard_requests: list[AuditEvent],
) -> None:
    role = granted(load(DASHBOARD_ROLE))
    assert sorted(role - permissions(dashboard_requests)) == []
    assert sorted(permissions(dashboard_requests) - role) == []
