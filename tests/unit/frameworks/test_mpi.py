"""MPIJob kubeflow.org/v1: defaulting (§1.3), launcher env and config files (§2.7), validation (§5.2),
status (§4.4)."""

from __future__ import annotations

from typing import Any

from builders import ObservedPhase, container, counted, defaulted, manifest, status_context
from kubetrain.api.common import CleanPodPolicy, RestartPolicy
from kubetrain.api.jobs import MPIJob
from kubetrain.api.manifest import parse_job
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.base import ConditionProposal, InitSettings, StatusEvent
from kubetrain.frameworks.mpi import MPIFramework

MPI = MPIFramework()
CLUSTER = ClusterAddressing()
LOCAL = LocalAddressing(ports={})


def mpijob(replicas: dict[str, int | None], **options: Any) -> MPIJob:
    built = defaulted("MPIJob", replicas, name="pi", namespace="hpc", **options)
    assert isinstance(built, MPIJob)
    return built


def gpu_launcher_job(workers: int = 2) -> MPIJob:
    raw = manifest("MPIJob", {"Launcher": 1, "Worker": workers}, name="pi", namespace="hpc")
    launcher = raw["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    launcher["resources"] = {"limits": {"nvidia.com/gpu": 1}}
    built = MPI.set_defaults(parse_job(raw))  # type: ignore[arg-type]
    return built


def launcher_env(job_: MPIJob, addressing: Any = CLUSTER) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in MPI.replica_env(job_, "Launcher", 0, addressing)]


# --- defaulting ---------------------------------------------------------------------------------


def test_launcher_replicas_default_to_one_and_worker_replicas_to_zero() -> None:
    built = mpijob({"Launcher": None, "Worker": None})
    assert (built.replica_specs["Launcher"].replicas, built.replica_specs["Worker"].replicas) == (1, 0)


def test_both_restart_policies_default_to_never() -> None:
    built = mpijob({"Launcher": 1, "Worker": 2})
    assert {s.restart_policy for s in built.replica_specs.values()} == {RestartPolicy.NEVER}


def test_no_port_is_injected() -> None:
    assert "ports" not in mpijob({"Launcher": 1}).replica_specs["Launcher"].template["spec"]["containers"][0]


def test_clean_pod_policy_defaults_to_none_when_neither_field_is_set() -> None:
    built = mpijob({"Launcher": 1})
    assert (built.run_policy.clean_pod_policy, built.spec.clean_pod_policy) == (CleanPodPolicy.NONE,) * 2


def test_the_deprecated_top_level_clean_pod_policy_applies_when_run_policy_has_none() -> None:
    assert (
        mpijob({"Launcher": 1}, spec={"cleanPodPolicy": "All"}).run_policy.clean_pod_policy
        == CleanPodPolicy.ALL
    )


def test_run_policy_clean_pod_policy_wins_over_the_top_level_one() -> None:
    built = mpijob(
        {"Launcher": 1}, spec={"cleanPodPolicy": "All", "runPolicy": {"cleanPodPolicy": "Running"}}
    )
    assert built.run_policy.clean_pod_policy == CleanPodPolicy.RUNNING


# --- roles, names, processes --------------------------------------------------------------------


def test_the_launcher_has_the_master_role() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1})
    assert MPI.is_master_role(built, "Launcher", 0)
    assert not MPI.is_master_role(built, "Worker", 0)


def test_the_launcher_pod_is_named_without_an_index() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1})
    assert (MPI.pod_name(built, "Launcher", 0), MPI.pod_name(built, "Worker", 0)) == (
        "pi-launcher",
        "pi-worker-0",
    )


def test_workers_are_created_before_the_launcher_on_kubernetes() -> None:
    assert MPI.materialised_replica_types(mpijob({"Launcher": 1, "Worker": 2}), colocated=False) == (
        "Worker",
        "Launcher",
    )


def test_locally_only_the_launcher_is_a_process() -> None:
    assert MPI.materialised_replica_types(mpijob({"Launcher": 1, "Worker": 2}), colocated=True) == (
        "Launcher",
    )


# --- env ----------------------------------------------------------------------------------------


def test_launcher_env_points_open_mpi_and_intel_mpi_at_kubexec_and_blanks_gpus() -> None:
    assert launcher_env(mpijob({"Launcher": 1, "Worker": 2})) == [
        ("OMPI_MCA_plm_rsh_agent", "/etc/mpi/kubexec.sh"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "/etc/mpi/kubexec.sh"),
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("NVIDIA_DRIVER_CAPABILITIES", ""),
    ]


def test_intel_mpi_bootstrap_settings_of_the_user_are_not_overridden() -> None:
    user = container("mpi", env=[{"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "ssh"}])
    names = [name for name, _ in launcher_env(mpijob({"Launcher": 1, "Worker": 1}, containers=[user]))]
    assert "I_MPI_HYDRA_BOOTSTRAP" not in names
    assert "I_MPI_HYDRA_BOOTSTRAP_EXEC" in names


def test_a_gpu_launcher_keeps_its_gpus() -> None:
    names = [name for name, _ in launcher_env(gpu_launcher_job())]
    assert "NVIDIA_VISIBLE_DEVICES" not in names


def test_workers_get_no_env() -> None:
    assert MPI.replica_env(mpijob({"Launcher": 1, "Worker": 1}), "Worker", 0, CLUSTER) == []


def test_locally_the_launcher_only_gets_the_hostfile() -> None:
    assert launcher_env(mpijob({"Launcher": 1, "Worker": 2}), LOCAL) == [
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile")
    ]


# --- init container -----------------------------------------------------------------------------


def test_the_launcher_gets_the_kubectl_delivery_init_container() -> None:
    [init] = MPI.init_containers(mpijob({"Launcher": 1, "Worker": 1}), "Launcher", 0, CLUSTER, InitSettings())
    assert init["name"] == "kubectl-delivery"
    assert init["image"] == "kubeflow/kubectl-delivery:latest"
    assert init["env"] == [
        {"name": "TARGET_DIR", "value": "/opt/kube"},
        {"name": "NAMESPACE", "value": "hpc"},
    ]
    assert init["resources"]["limits"] == {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    assert init["resources"]["requests"] == init["resources"]["limits"]


def test_workers_and_local_launchers_get_no_init_container() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1})
    assert MPI.init_containers(built, "Worker", 0, CLUSTER, InitSettings()) == []
    assert MPI.init_containers(built, "Launcher", 0, LOCAL, InitSettings()) == []


# --- config files -------------------------------------------------------------------------------


def test_kubexec_runs_kubectl_exec_in_the_named_pod() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 1}), CLUSTER, [])
    assert files["kubexec.sh"] == (
        '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"'
    )


def test_kubexec_targets_the_main_container_when_one_is_named() -> None:
    files = MPI.config_files(
        mpijob({"Launcher": 1, "Worker": 1}, spec={"mainContainer": "trainer"}), CLUSTER, []
    )
    assert '${POD_NAME} --container trainer -- /bin/sh -c "$*"' in files["kubexec.sh"]


def test_hostfile_lists_every_worker_with_its_slots() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 2}, spec={"slotsPerWorker": 4}), CLUSTER, [])
    assert files["hostfile"] == "pi-worker-0 slots=4\npi-worker-1 slots=4\n"


def test_a_gpu_launcher_is_listed_first_in_the_hostfile() -> None:
    files = MPI.config_files(gpu_launcher_job(workers=1), CLUSTER, [])
    assert files["hostfile"] == "pi-launcher slots=1\npi-worker-0 slots=1\n"


def test_discover_hosts_echoes_running_workers_sorted_by_name() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 3}), CLUSTER, ["pi-worker-2", "pi-worker-0"])
    assert files["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-2:1"


def test_discover_hosts_lists_a_gpu_launcher_first_as_upstream_writes_it() -> None:
    files = MPI.config_files(gpu_launcher_job(workers=1), CLUSTER, ["pi-worker-0"])
    assert files["discover_hosts.sh"] == "#!/bin/sh\necho pi-launcher:1\n\necho pi-worker-0:1"


def test_locally_the_hostfile_gives_localhost_every_workers_slots() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 3}, spec={"slotsPerWorker": 2}), LOCAL, [])
    assert files == {"hostfile": "localhost slots=6\n", "discover_hosts.sh": "#!/bin/sh\necho localhost:6"}


def test_config_files_are_mounted_under_etc_mpi_with_upstream_modes() -> None:
    assert MPI.config_mount_path == "/etc/mpi"
    assert MPI.config_file_modes == {"kubexec.sh": 0o555, "hostfile": 0o444, "discover_hosts.sh": 0o555}


# --- validation ---------------------------------------------------------------------------------


def errors_of(job_: MPIJob) -> list[str]:
    return [str(e) for e in MPI.validate(job_)]


def test_a_valid_job_has_no_errors() -> None:
    assert errors_of(mpijob({"Launcher": 1, "Worker": 2})) == []


def test_a_launcher_is_required() -> None:
    assert errors_of(mpijob({"Worker": 2})) == [
        "spec.mpiReplicaSpecs.Launcher: Required value: must be present"
    ]


def test_launcher_replicas_must_be_one() -> None:
    assert errors_of(mpijob({"Launcher": 2})) == [
        "spec.mpiReplicaSpecs.Launcher.replicas: Forbidden: must be 1"
    ]


def test_replica_types_other_than_launcher_and_worker_are_not_supported() -> None:
    assert errors_of(mpijob({"Launcher": 1, "launcher": 1})) == [
        'spec.mpiReplicaSpecs.launcher: Unsupported value: "launcher": supported values: "Launcher", "Worker"'
    ]


def test_every_container_needs_a_name_and_an_image() -> None:
    assert errors_of(mpijob({"Launcher": 1}, containers=[{"image": ""}])) == [
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].image: Required value: must be specified",
        "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].name: Required value: must be specified",
    ]


def test_slots_per_worker_must_not_be_negative() -> None:
    assert errors_of(mpijob({"Launcher": 1}, spec={"slotsPerWorker": -1})) == [
        "spec.slotsPerWorker: Invalid value: -1: must be greater than or equal to 0"
    ]


# --- status -------------------------------------------------------------------------------------


def rules(
    job_: MPIJob, replicas: tuple[ObservedPhase, ...] = (), **statuses: Any
) -> list[tuple[str, str, str]]:
    """The conditions the rules propose, in order."""
    found = MPI.status_rules(status_context(job_, statuses, replicas))
    return [(p.type.value, p.reason, p.message) for p in found if isinstance(p, ConditionProposal)]


def events(
    job_: MPIJob, replicas: tuple[ObservedPhase, ...] = (), **statuses: Any
) -> list[tuple[str, str, str]]:
    """The events the rules record, with their conditions' or on their own, in order."""
    found = MPI.status_rules(status_context(job_, statuses, replicas))
    recorded: list[tuple[str, str, str]] = []
    for p in found:
        if isinstance(p, StatusEvent):
            recorded.append((p.type, p.reason, p.message))
        elif p.event is not None:
            recorded.append((p.event.type, p.event.reason or p.reason, p.event.message or p.message))
    return recorded


def launcher(phase: str, reason: str | None = None) -> ObservedPhase:
    return ObservedPhase("Launcher", 0, phase, reason=reason)


def worker(index: int, phase: str, reason: str | None = None) -> ObservedPhase:
    return ObservedPhase("Worker", index, phase, reason=reason)


def test_running_while_the_launcher_runs_in_upstreams_words() -> None:
    observed_ = (launcher("Running"), worker(0, "Running"), worker(1, "Pending"))
    found = rules(
        mpijob({"Launcher": 1, "Worker": 2}), observed_, Launcher=counted(active=1), Worker=counted(active=1)
    )
    assert found == [("Running", "MPIJobRunning", "MPIJob pi is running.")]


def test_the_launcher_and_every_worker_running_is_recorded_as_an_event() -> None:
    observed_ = (launcher("Running"), worker(0, "Running"), worker(1, "Running"))
    statuses = {"Launcher": counted(active=1), "Worker": counted(active=2)}
    built = mpijob({"Launcher": 1, "Worker": 2})
    assert events(built, observed_, **statuses) == [("Normal", "MPIJobRunning", "MPIJob hpc/pi is running")]
    assert rules(built, observed_, **statuses) == [("Running", "MPIJobRunning", "MPIJob pi is running.")]


def test_no_running_event_while_a_worker_is_pending() -> None:
    observed_ = (launcher("Pending"), worker(0, "Running"), worker(1, "Pending"))
    assert events(mpijob({"Launcher": 1, "Worker": 2}), observed_, Worker=counted(active=1)) == []


def test_a_local_launcher_runs_the_job_alone() -> None:
    built = mpijob({"Launcher": 1, "Worker": 2})
    found = MPI.status_rules(
        status_context(built, {"Launcher": counted(active=1)}, (launcher("Running"),), colocated=True)
    )
    assert [p.message for p in found] == ["MPIJob hpc/pi is running", "MPIJob pi is running."]


def test_succeeded_in_the_generic_rules_words_when_the_launcher_pod_succeeded() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1})
    found = rules(built, (launcher("Succeeded"),), Launcher=counted(succeeded=1))
    assert found == [("Succeeded", "MPIJobSucceeded", "MPIJob pi is successfully completed.")]


def test_the_launcher_pods_success_is_recorded_under_upstreams_plural_reason() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1})
    found = events(built, (launcher("Succeeded"),), Launcher=counted(succeeded=1))
    assert found[0] == ("Normal", "mpijobsSucceeded", "MPIJob hpc/pi successfully completed.")


def test_a_failed_launcher_is_recorded_with_the_pod_reason() -> None:
    found = events(mpijob({"Launcher": 1}), (launcher("Failed", "OOMKilled"),), Launcher=counted(failed=1))
    assert found[0] == ("Warning", "OOMKilled", "MPIJob hpc/pi has failed")


def test_a_failed_launcher_without_a_reason_is_recorded_as_mpijobfailed() -> None:
    assert events(mpijob({"Launcher": 1}), (launcher("Failed"),))[0][1] == "MPIJobFailed"


def test_a_failed_launcher_fails_the_job_by_the_generic_rules() -> None:
    found = rules(mpijob({"Launcher": 1}), (launcher("Failed", "OOMKilled"),), Launcher=counted(failed=1))
    assert found == [
        ("Failed", "MPIJobMPIJobFailed", "MPIJob pi is failed because 1 Launcher replica(s) failed.")
    ]


def test_an_evicted_launcher_fails_the_job_as_evicted() -> None:
    assert rules(mpijob({"Launcher": 1}), (launcher("Failed", "Evicted"),))[0][1] == "MPIJobEvicted"


def test_evicted_workers_fail_the_job() -> None:
    observed_ = (launcher("Running"), worker(0, "Failed", "Evicted"), worker(1, "Running"))
    assert ("Failed", "MPIJobEvicted", "1/2 workers are evicted") in rules(
        mpijob({"Launcher": 1, "Worker": 2}), observed_
    )


def test_failed_replicas_fail_the_job_with_upstreams_doubled_reason() -> None:
    found = rules(mpijob({"Launcher": 1, "Worker": 2}), Launcher=counted(active=1), Worker=counted(failed=1))
    assert found[-1] == (
        "Failed",
        "MPIJobMPIJobFailed",
        "MPIJob pi is failed because 1 Worker replica(s) failed.",
    )


def test_failed_replicas_with_exit_code_policy_restart_the_job() -> None:
    built = mpijob({"Launcher": 1, "Worker": 2}, restart_policy="ExitCode")
    assert rules(built, Launcher=counted(active=1), Worker=counted(failed=1))[-1][:2] == (
        "Restarting",
        "MPIJobRestarting",
    )
