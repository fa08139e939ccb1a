"""MPIJob pods and companions on Kubernetes (upstream-behaviour §2.7, §2.8)."""

from __future__ import annotations

from typing import Any

from builders import container, job
from kubetrain.api.jobs import V2BETA1, TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.kube.render import RenderSettings, render_pod

ADDRESSING = ClusterAddressing()


def _v1(**options: Any) -> TrainingJob:
    return admit(job("MPIJob", {"Launcher": 1, "Worker": 2}, name="hvd", **options))


def _v2(**spec: Any) -> TrainingJob:
    return admit(job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", api_version=V2BETA1, spec=spec))


def _pod(mpijob: TrainingJob, replica_type: str, index: int = 0) -> dict[str, Any]:
    plan = plan_replica(mpijob, replica_type, index, ADDRESSING)
    return render_pod(mpijob, plan, framework_for(mpijob), ADDRESSING, RenderSettings()).manifest


def test_v1_workers_without_a_command_sleep_so_the_launcher_can_exec_into_them() -> None:
    container = _pod(_v1(), "Worker")["spec"]["containers"][0]
    assert (container["command"], container["args"]) == (["sleep"], ["365d"])


def test_v1_workers_without_a_command_sleep_whatever_args_they_had_as_upstream_does() -> None:
    mpijob = _v1(containers=[container("mpi", args=["--verbose"])])
    main = _pod(mpijob, "Worker")["spec"]["containers"][0]
    assert (main["command"], main["args"]) == (["sleep"], ["365d"])


def test_v1_workers_mount_only_kubexec_from_the_config_map() -> None:
    volume = _pod(_v1(), "Worker")["spec"]["volumes"][0]
    assert volume["configMap"] == {
        "name": "hvd-config",
        "items": [{"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}],
    }


def test_v1_launcher_runs_as_its_own_service_account_with_kubectl_mounted() -> None:
    spec = _pod(_v1(), "Launcher")["spec"]
    assert spec["serviceAccountName"] == "hvd-launcher"
    assert [m["mountPath"] for m in spec["containers"][0]["volumeMounts"]] == ["/opt/kube", "/etc/mpi"]


def test_v1_launcher_role_may_exec_only_into_this_jobs_workers() -> None:
    role = next(o for o in kubernetes_plan(_v1()) if o["kind"] == "Role")
    assert role["rules"][1]["resourceNames"] == ["hvd-worker-0", "hvd-worker-1"]


def test_v2_worker_pods_have_a_hostname_under_the_job_subdomain() -> None:
    spec = _pod(_v2(), "Worker", 1)["spec"]
    assert (spec["hostname"], spec["subdomain"]) == ("pi-worker-1", "pi")
    assert spec["dnsConfig"]["searches"] == ["pi.default.svc.cluster.local"]


def test_v2_ssh_keys_are_mode_0600_only_under_root_ssh() -> None:
    default = _pod(_v2(), "Worker")["spec"]["volumes"][0]["secret"]
    custom = _pod(_v2(sshAuthMountPath="/home/mpi/.ssh"), "Worker")["spec"]["volumes"][0]["secret"]
    assert default["defaultMode"] == 0o600
    assert "defaultMode" not in custom


def test_v2_worker_index_is_its_own_when_the_launcher_is_also_a_worker() -> None:
    labels = _pod(_v2(runLauncherAsWorker=True), "Worker", 0)["metadata"]["labels"]
    assert labels["training.kubeflow.org/replica-index"] == "0"  # as mpi-operator v0.6.0 labels it
    assert "training.kubeflow.org/replica-type" not in labels


def test_v2_launcher_has_no_index_also_when_it_is_a_worker() -> None:
    labels = _pod(_v2(runLauncherAsWorker=True), "Launcher")["metadata"]["labels"]
    assert "training.kubeflow.org/replica-index" not in labels


def test_v2_launcher_is_a_batch_job_carrying_the_run_policy() -> None:
    mpijob = _v2(runPolicy={"backoffLimit": 3, "activeDeadlineSeconds": 600, "cleanPodPolicy": "Running"})
    launcher = next(o for o in kubernetes_plan(mpijob) if o["kind"] == "Job")
    assert launcher["metadata"]["name"] == "pi-launcher"
    assert launcher["spec"]["backoffLimit"] == 3
    assert launcher["spec"]["activeDeadlineSeconds"] == 600


def test_v2_launcher_job_is_labelled_and_owned_as_the_mpi_operator_makes_it() -> None:
    launcher = next(o for o in kubernetes_plan(_v2()) if o["kind"] == "Job")
    assert launcher["metadata"]["labels"] == {"app": "pi"}
    assert "podReplacementPolicy" not in launcher["spec"]  # the API's default, TerminatingOrFailed
    template = launcher["spec"]["template"]["metadata"]
    assert template["ownerReferences"] == launcher["metadata"]["ownerReferences"]
    assert template["labels"]["training.kubeflow.org/job-role"] == "launcher"


def test_v2_ssh_secret_is_requested_empty_for_the_substrate_to_fill() -> None:
    secret = next(o for o in kubernetes_plan(_v2()) if o["kind"] == "Secret")
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert "data" not in secret


def test_a_user_command_is_never_replaced_by_the_default() -> None:
    mpijob = admit(
        job(
            "MPIJob",
            {"Launcher": 1, "Worker": 1},
            name="hvd",
            containers=[container("mpi", command=["/bin/worker"])],
        )
    )
    assert _pod(mpijob, "Worker")["spec"]["containers"][0]["command"] == ["/bin/worker"]
