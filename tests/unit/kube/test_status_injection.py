"""What replica pods get for the status endpoint: Trainer v2.3's three variables and its projected volume,
with a token for this job's audience alone; nothing at all with the endpoint off."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from builders import container, job
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import load_jobs, parse_job
from kubetrain.api.progress import StatusTarget
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.render import RenderSettings, render_pod
from kubetrain.kube.status.injection import (
    MOUNT_PATH,
    VARIABLES,
    VOLUME_NAME,
    StatusInjection,
    inject_status_reporting,
    legacy_token_audience,
    token_audience,
)

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).parent / "golden" / "plans-status-endpoint-off.json"
"""Every example's plan (and an MPIJob v1's), with each gang setting, as the renderer wrote them before the
status endpoint existed (commit 80758ee), with the MPIJob v1's pods and RoleBinding since made as upstream's
(the conformance tier): what "identical to upstream's pods" is held to."""
ENDPOINT = StatusInjection(base_url="https://training-operator-status.kubeflow.svc:8443")
ADDRESSING = ClusterAddressing()
MPI_V1: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "MPIJob",
    "metadata": {"name": "hvd", "namespace": "default"},
    "spec": {
        "slotsPerWorker": 1,
        "mpiReplicaSpecs": {
            "Launcher": {
                "replicas": 1,
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "mpi",
                                "image": "example.com/hvd:1",
                                "command": ["mpirun", "python", "train.py"],
                            }
                        ]
                    }
                },
            },
            "Worker": {
                "replicas": 2,
                "template": {"spec": {"containers": [{"name": "mpi", "image": "example.com/hvd:1"}]}},
            },
        },
    },
}


def every_plan(status: StatusInjection | None) -> dict[str, list[dict[str, Any]]]:
    jobs = [(p.parent.name, j) for p in sorted((ROOT / "examples").glob("*/job.yaml")) for j in load_jobs(p)]
    jobs.append(("mpi-v1", parse_job(MPI_V1, strict=True)))
    return {
        f"{name}/{each.KIND}/{gang or 'no-gang'}": kubernetes_plan(each, gang, status)
        for name, each in jobs
        for gang in (None, "volcano", "scheduler-plugins-scheduler")
    }


def pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod specs of a plan: each Pod's, and each batch Job's template (MPI v2beta1's launcher)."""
    specs = []
    for obj in objects:
        if obj["kind"] == "Pod":
            specs.append(obj["spec"])
        elif obj["kind"] == "Job":
            specs.append(obj["spec"]["template"]["spec"])
    return specs


def without_injection(spec: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the injected variables, mount and volume taken out (an absent list reads as empty), and
    the service account it was given when ``before`` named none."""
    spec = copy.deepcopy(spec)
    if "serviceAccountName" not in before and spec.pop("serviceAccountName") != "default":
        raise AssertionError("a pod that named no service account is given default")
    for each in spec["containers"]:
        each["env"] = [v for v in each.get("env") or [] if v["name"] not in VARIABLES]
        each["volumeMounts"] = [m for m in each.get("volumeMounts") or [] if m["name"] != VOLUME_NAME]
    spec["volumes"] = [v for v in spec.get("volumes") or [] if v["name"] != VOLUME_NAME]
    return spec


def absent_as_empty(spec: dict[str, Any]) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    for each in spec["containers"]:
        each.setdefault("env", [])
        each.setdefault("volumeMounts", [])
    spec.setdefault("volumes", [])
    return spec


def _pytorch(**options: Any) -> TrainingJob:
    return admit(job("PyTorchJob", {"Master": 1, "Worker": 2}, **options))


def _pod(pytorch: TrainingJob, replica_type: str = "Master") -> dict[str, Any]:
    plan = plan_replica(pytorch, replica_type, 0, ADDRESSING)
    settings = RenderSettings(status=ENDPOINT)
    return render_pod(pytorch, plan, framework_for(pytorch), ADDRESSING, settings).manifest


def _env(spec_container: dict[str, Any]) -> dict[str, str]:
    """The container's status variables."""
    return {v["name"]: v.get("value") for v in spec_container.get("env") or [] if v["name"] in VARIABLES}


def test_with_the_endpoint_off_every_pod_is_byte_identical_to_before_the_endpoint() -> None:
    assert json.dumps(every_plan(None), indent=1) + "\n" == GOLDEN.read_text()


def test_with_the_endpoint_on_only_the_variables_the_mount_and_the_volume_are_added() -> None:
    golden = json.loads(GOLDEN.read_text())
    for key, objects in every_plan(ENDPOINT).items():
        expected = pod_specs(golden[key])
        found = [
            without_injection(spec, before) for spec, before in zip(pod_specs(objects), expected, strict=True)
        ]
        assert found == [absent_as_empty(spec) for spec in expected], key
        non_pods = [o for o in objects if o["kind"] not in ("Pod", "Job")]
        assert non_pods == [o for o in golden[key] if o["kind"] not in ("Pod", "Job")], key


def test_every_container_of_every_kinds_replicas_gets_the_three_variables_and_the_mount() -> None:
    for key, objects in every_plan(ENDPOINT).items():
        for spec in pod_specs(objects):
            for each in spec["containers"]:
                assert set(VARIABLES) <= set(_env(each)), (key, each["name"])
                assert {"name": VOLUME_NAME, "mountPath": MOUNT_PATH, "readOnly": True} in each[
                    "volumeMounts"
                ]


def test_init_containers_get_nothing_they_do_not_train() -> None:
    pod = _pod(_pytorch(), "Worker")
    [init] = pod["spec"]["initContainers"]
    assert not set(VARIABLES) & set(_env(init))
    assert VOLUME_NAME not in [m["name"] for m in init.get("volumeMounts") or []]


def test_the_url_is_the_jobs_status_path_under_the_endpoints_base_url() -> None:
    [main] = _pod(_pytorch(namespace="team-a", name="bert"))["spec"]["containers"]
    assert _env(main) == {
        "KUBEFLOW_TRAINER_SERVER_URL": "https://training-operator-status.kubeflow.svc:8443"
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/bert/status",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }


def test_the_volume_holds_a_token_for_this_jobs_audience_and_the_namespaces_ca() -> None:
    pod = _pod(_pytorch(namespace="team-a", name="bert"))
    [volume] = pod["spec"]["volumes"]
    assert volume == {
        "name": "kubeflow-trainer-token",
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": "kubeflow.org/v1/namespaces/team-a/pytorchjobs/bert/status",
                        "expirationSeconds": 3600,
                        "path": "token",
                    }
                },
                {
                    "configMap": {
                        "name": "kubetrain-status-ca",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}],
                        "optional": True,
                    }
                },
            ]
        },
    }


def test_no_two_jobs_share_an_audience() -> None:
    targets = [
        StatusTarget("kubeflow.org/v1", "a", "pytorchjobs", "bert"),
        StatusTarget("kubeflow.org/v1", "b", "pytorchjobs", "bert"),
        StatusTarget("kubeflow.org/v1", "a", "tfjobs", "bert"),
        StatusTarget("kubeflow.org/v1", "a", "pytorchjobs", "gpt"),
        StatusTarget("kubeflow.org/v2beta1", "a", "mpijobs", "gpt"),
        StatusTarget("kubeflow.org/v1", "a", "mpijobs", "gpt"),
    ]
    audiences = {token_audience(t) for t in targets} | {legacy_token_audience(t) for t in targets[:4]}
    assert len(audiences) == 10


def test_a_trainjobs_pods_get_what_trainer_v2_3s_trainjobstatus_plugin_gives_them() -> None:
    """Trainer v2.3's ``trainjobstatus.go`` and ``statusserver/utils.go``: the names, the mount, the token's
    audience (``TokenAudience``) and lifetime and the URL's path (``StatusUrl``), for a TrainJob's kind."""
    spec: dict[str, Any] = {"containers": [{"name": "node", "image": "example.com/torch:1"}]}
    inject_status_reporting(
        spec,
        ENDPOINT,
        api_version="trainer.kubeflow.org/v1alpha1",
        namespace="team-a",
        plural="trainjobs",
        name="bert",
    )
    [node] = spec["containers"]
    assert _env(node) == {
        "KUBEFLOW_TRAINER_SERVER_URL": "https://training-operator-status.kubeflow.svc:8443"
        "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }
    assert node["volumeMounts"] == [
        {"name": "kubeflow-trainer-token", "mountPath": "/var/run/secrets/kubeflow/trainer", "readOnly": True}
    ]
    [volume] = spec["volumes"]
    token, ca = volume["projected"]["sources"]
    assert volume["name"] == "kubeflow-trainer-token"
    assert token["serviceAccountToken"] == {
        "audience": "trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/bert/status",
        "expirationSeconds": 3600,
        "path": "token",
    }
    assert ca["configMap"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]


def test_the_users_own_env_and_volumes_are_kept_and_come_first() -> None:
    main = container(
        "pytorch", env=[{"name": "LR", "value": "0.1"}], volumeMounts=[{"name": "data", "mountPath": "/d"}]
    )
    pytorch = _pytorch(containers=[main]).model_copy(deep=True)
    pytorch.replica_specs["Master"].template["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    spec = _pod(pytorch)["spec"]
    [first] = spec["containers"]
    assert first["env"][0] == {"name": "LR", "value": "0.1"}
    assert first["volumeMounts"][0] == {"name": "data", "mountPath": "/d"}
    assert [v["name"] for v in spec["volumes"]] == ["data", VOLUME_NAME]


@pytest.mark.parametrize("name", ["KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_STATUS_SERVER_TOKEN"])
def test_a_container_that_sets_one_of_the_variables_keeps_its_own_and_gets_none_of_ours(name: str) -> None:
    own = {"name": name, "value": "https://trainer.example.com/status"}
    mine = container("pytorch", env=[own])
    sidecar = container("logger")
    spec = _pod(_pytorch(containers=[mine, sidecar]))["spec"]
    first, second = spec["containers"]
    assert [v for v in first["env"] if v["name"].startswith("KUBEFLOW_")] == [own]
    assert "volumeMounts" not in first
    assert set(VARIABLES) <= set(_env(second))


def test_a_container_with_something_mounted_at_the_path_is_left_alone() -> None:
    mounted = container("pytorch", volumeMounts=[{"name": "mine", "mountPath": MOUNT_PATH + "/"}])
    pytorch = _pytorch(containers=[mounted]).model_copy(deep=True)
    pytorch.replica_specs["Master"].template["spec"]["volumes"] = [{"name": "mine", "emptyDir": {}}]
    spec = _pod(pytorch)["spec"]
    [only] = spec["containers"]
    assert not _env(only)
    assert [v["name"] for v in spec["volumes"]] == ["mine"], "no container took ours: no volume either"


def test_a_pod_with_a_volume_of_that_name_already_is_left_alone() -> None:
    pytorch = _pytorch().model_copy(deep=True)
    theirs = {"name": VOLUME_NAME, "secret": {"secretName": "their-token"}}
    pytorch.replica_specs["Master"].template["spec"]["volumes"] = [theirs]
    spec = _pod(pytorch)["spec"]
    assert spec["volumes"] == [theirs]
    assert not _env(spec["containers"][0])


def test_a_pod_that_names_no_service_account_gets_default_whose_token_is_projected() -> None:
    assert _pod(_pytorch())["spec"]["serviceAccountName"] == "default"


def test_a_pods_own_service_account_is_kept() -> None:
    pytorch = _pytorch().model_copy(deep=True)
    pytorch.replica_specs["Master"].template["spec"]["serviceAccountName"] = "trainer"
    assert _pod(pytorch)["spec"]["serviceAccountName"] == "trainer"
