"""MPIJob kubeflow.org/v2beta1: defaulting (§1.4), env and config files (§2.8), validation (§5.3),
status (§4.12)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import ObservedPhase, counted, defaulted, status_context
from kubetrain.api.common import CleanPodPolicy, RestartPolicy
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import V2BETA1, LauncherCreationPolicy, MPIImplementation, MPIJobV2
from kubetrain.engine.admission import admit
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.mpi_v2 import MPIV2Framework

MPI = MPIV2Framework()
CLUSTER = ClusterAddressing()
LOCAL = LocalAddressing(ports={})


def mpijob(replicas: dict[str, int | None], **options: Any) -> MPIJobV2:
    options = {"name": "pi", "namespace": "hpc", **options}
    built = defaulted("MPIJob", replicas, api_version=V2BETA1, **options)
    assert isinstance(built, MPIJobV2)
    return built


def launcher_env(job_: MPIJobV2, addressing: Any = CLUSTER) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in MPI.replica_env(job_, "Launcher", 0, addressing)]


# --- defaulting ---------------------------------------------------------------------------------


def test_spec_defaults_match_the_mpi_operator() -> None:
    spec = mpijob({"Launcher": 1, "Worker": 2}).spec
    assert spec.slots_per_worker == 1
    assert spec.run_launcher_as_worker is False
    assert spec.ssh_auth_mount_path == "/root/.ssh"
    assert spec.mpi_implementation == MPIImplementation.OPEN_MPI
    assert spec.launcher_creation_policy == LauncherCreationPolicy.AT_STARTUP
    assert spec.run_policy.clean_pod_policy == CleanPodPolicy.NONE


def test_the_launcher_defaults_to_one_replica_restarted_on_failure() -> None:
    launcher = mpijob({"Launcher": None}).replica_specs["Launcher"]
    assert (launcher.replicas, launcher.restart_policy) == (1, RestartPolicy.ON_FAILURE)


def test_workers_default_to_zero_replicas_never_restarted() -> None:
    worker = mpijob({"Launcher": 1, "Worker": None}).replica_specs["Worker"]
    assert (worker.replicas, worker.restart_policy) == (0, RestartPolicy.NEVER)


def test_given_spec_fields_are_kept() -> None:
    spec = mpijob({"Launcher": 1}, spec={"slotsPerWorker": 8, "mpiImplementation": "Intel"}).spec
    assert (spec.slots_per_worker, spec.mpi_implementation) == (8, MPIImplementation.INTEL)


def test_only_the_mpi_operators_own_managed_by_value_is_reconciled() -> None:
    assert MPI.managed_by_self == "kubeflow.org/mpi-operator"


# --- env ----------------------------------------------------------------------------------------


def test_open_mpi_launcher_env_in_upstream_order() -> None:
    assert launcher_env(mpijob({"Launcher": 1, "Worker": 2}, spec={"slotsPerWorker": 4})) == [
        ("K_MPI_JOB_ROLE", "launcher"),
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_default_hostfile", "/etc/mpi/hostfile"),
        ("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=10"),
        ("OMPI_MCA_orte_set_default_slots", "4"),
        ("NVIDIA_VISIBLE_DEVICES", ""),
        ("NVIDIA_DRIVER_CAPABILITIES", ""),
    ]


def test_intel_mpi_launcher_env() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1}, spec={"mpiImplementation": "Intel", "slotsPerWorker": 2})
    assert launcher_env(built)[1:4] == [
        ("I_MPI_HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", "-o ConnectionAttempts=10"),
        ("I_MPI_PERHOST", "2"),
    ]


def test_mpich_launcher_env() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1}, spec={"mpiImplementation": "MPICH"})
    assert launcher_env(built)[1:3] == [
        ("HYDRA_HOST_FILE", "/etc/mpi/hostfile"),
        ("HYDRA_LAUNCH_EXTRA_ARGS", "-o ConnectionAttempts=10"),
    ]


def test_a_launcher_that_is_also_a_worker_keeps_its_gpus() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1}, spec={"runLauncherAsWorker": True})
    assert "NVIDIA_VISIBLE_DEVICES" not in dict(launcher_env(built))


def test_locally_the_launcher_does_not_hide_gpus_from_its_ranks() -> None:
    assert "NVIDIA_VISIBLE_DEVICES" not in dict(launcher_env(mpijob({"Launcher": 1, "Worker": 1}), LOCAL))


def test_workers_only_learn_their_role() -> None:
    found = MPI.replica_env(mpijob({"Launcher": 1, "Worker": 1}), "Worker", 0, CLUSTER)
    assert found == [{"name": "K_MPI_JOB_ROLE", "value": "worker"}]


# --- names and processes ------------------------------------------------------------------------


def test_the_launcher_hostname_has_no_index() -> None:
    assert MPI.pod_name(mpijob({"Launcher": 1}), "Launcher", 0) == "pi-launcher"


def test_locally_only_the_launcher_is_a_process() -> None:
    assert MPI.materialised_replica_types(mpijob({"Launcher": 1, "Worker": 2}), colocated=True) == (
        "Launcher",
    )


# --- config files -------------------------------------------------------------------------------


def test_open_mpi_hostfile_lists_every_worker_fqdn_with_slots() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 2}, spec={"slotsPerWorker": 2}), CLUSTER, [])
    assert files["hostfile"] == "pi-worker-0.pi.hpc.svc slots=2\npi-worker-1.pi.hpc.svc slots=2\n"


def test_intel_and_mpich_hostfiles_use_colon_slots() -> None:
    for implementation in ("Intel", "MPICH"):
        built = mpijob({"Launcher": 1, "Worker": 1}, spec={"mpiImplementation": implementation})
        assert MPI.config_files(built, CLUSTER, [])["hostfile"] == "pi-worker-0.pi.hpc.svc:1\n"


def test_a_launcher_that_is_also_a_worker_comes_first_in_the_hostfile() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1}, spec={"runLauncherAsWorker": True})
    assert MPI.config_files(built, CLUSTER, [])["hostfile"] == (
        "pi-launcher.pi.hpc.svc slots=1\npi-worker-0.pi.hpc.svc slots=1\n"
    )


def test_hostfile_fqdns_carry_the_cluster_domain() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 1}), ClusterAddressing("cluster.local"), [])
    assert files["hostfile"] == "pi-worker-0.pi.hpc.svc.cluster.local slots=1\n"


def test_discover_hosts_echoes_running_workers_sorted_without_slots() -> None:
    files = MPI.config_files(mpijob({"Launcher": 1, "Worker": 3}), CLUSTER, ["pi-worker-1", "pi-worker-0"])
    assert (
        files["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-0.pi.hpc.svc\necho pi-worker-1.pi.hpc.svc\n"
    )


def test_discover_hosts_lists_a_launcher_that_is_also_a_worker_first() -> None:
    built = mpijob({"Launcher": 1, "Worker": 1}, spec={"runLauncherAsWorker": True})
    assert (
        MPI.config_files(built, CLUSTER, [])["discover_hosts.sh"]
        == "#!/bin/sh\necho pi-launcher.pi.hpc.svc\n"
    )


def test_locally_the_hostfile_gives_localhost_every_workers_slots() -> None:
    built = mpijob({"Launcher": 1, "Worker": 3}, spec={"slotsPerWorker": 2})
    assert MPI.config_files(built, LOCAL, [])["hostfile"] == "localhost slots=6\n"


def test_locally_a_launcher_that_is_also_a_worker_adds_its_slots() -> None:
    built = mpijob(
        {"Launcher": 1, "Worker": 2}, spec={"runLauncherAsWorker": True, "mpiImplementation": "MPICH"}
    )
    assert MPI.config_files(built, LOCAL, [])["hostfile"] == "localhost:3\n"


# --- validation ---------------------------------------------------------------------------------


def errors_of(job_: MPIJobV2) -> list[str]:
    return [str(e) for e in MPI.validate(job_)]


def test_a_valid_job_has_no_errors() -> None:
    assert errors_of(mpijob({"Launcher": 1, "Worker": 2})) == []


def test_a_launcher_is_required() -> None:
    assert errors_of(mpijob({"Worker": 2})) == [
        "spec.mpiReplicaSpecs.Launcher: Required value: must have Launcher replica spec"
    ]


def test_launcher_replicas_must_be_one() -> None:
    assert errors_of(mpijob({"Launcher": 2})) == [
        "spec.mpiReplicaSpecs.Launcher.replicas: Invalid value: 2: must be 1"
    ]


def test_a_worker_spec_needs_at_least_one_replica_even_after_defaulting_to_zero() -> None:
    assert errors_of(mpijob({"Launcher": 1, "Worker": None})) == [
        "spec.mpiReplicaSpecs.Worker.replicas: Invalid value: 0: must be greater than or equal to 1"
    ]


def test_only_never_and_on_failure_restart_policies_are_supported() -> None:
    assert errors_of(mpijob({"Launcher": 1}, restart_policy="ExitCode")) == [
        'spec.mpiReplicaSpecs.Launcher.restartPolicy: Unsupported value: "ExitCode": '
        'supported values: "Never", "OnFailure"'
    ]


def test_run_policy_numbers_must_not_be_negative() -> None:
    built = mpijob({"Launcher": 1}, spec={"runPolicy": {"backoffLimit": -1}})
    with pytest.raises(InvalidJobError) as raised:
        admit(built)
    assert [str(e) for e in raised.value.errors] == [
        "spec.runPolicy.backoffLimit: Invalid value: -1: must be greater than or equal to 0"
    ]


def test_an_empty_ssh_auth_mount_path_is_rejected() -> None:
    assert errors_of(mpijob({"Launcher": 1}, spec={"sshAuthMountPath": ""})) == [
        "spec.sshAuthMountPath: Required value: must have a mount path for SSH credentials"
    ]


def test_managed_by_must_be_the_mpi_operator_or_multikueue() -> None:
    built = mpijob({"Launcher": 1}, spec={"runPolicy": {"managedBy": "kubeflow.org/training-operator"}})
    assert errors_of(built) == [
        'spec.runPolicy.managedBy: Unsupported value: "kubeflow.org/training-operator": supported values: '
        '"kubeflow.org/mpi-operator", "kueue.x-k8s.io/multikueue"'
    ]


def test_a_job_name_too_long_for_its_worker_hostnames_is_rejected() -> None:
    [error] = MPI.validate(mpijob({"Launcher": 1, "Worker": 10}, name="w" * 55))
    assert error.path == "metadata.name"
    assert error.message.endswith("shorten metadata.name to at most 54 characters")


# --- status -------------------------------------------------------------------------------------


def rules(
    job_: MPIJobV2, replicas: tuple[ObservedPhase, ...] = (), **statuses: Any
) -> list[tuple[str, str, str]]:
    found = MPI.status_rules(status_context(job_, statuses, replicas))
    return [(p.type.value, p.reason, p.message) for p in found]


RUNNING = ("Running", "MPIJobRunning", "MPIJob hpc/pi is running.")


def test_running_when_the_launcher_and_every_worker_run() -> None:
    observed_ = (ObservedPhase("Worker", 0, "Running"), ObservedPhase("Worker", 1, "Running"))
    assert rules(mpijob({"Launcher": 1, "Worker": 2}), observed_, Launcher=counted(active=1)) == [RUNNING]


def test_not_running_until_every_worker_runs() -> None:
    observed_ = (ObservedPhase("Worker", 0, "Running"),)
    assert rules(mpijob({"Launcher": 1, "Worker": 2}), observed_, Launcher=counted(active=1)) == []


def test_a_local_launcher_runs_the_job_alone() -> None:
    built = mpijob({"Launcher": 1, "Worker": 2})
    context = status_context(built, {"Launcher": counted(active=1)}, colocated=True)
    assert [p.reason for p in MPI.status_rules(context)] == ["MPIJobRunning"]


def test_succeeded_when_the_launcher_succeeded() -> None:
    assert rules(mpijob({"Launcher": 1, "Worker": 1}), Launcher=counted(succeeded=1)) == [
        ("Succeeded", "MPIJobSucceeded", "MPIJob hpc/pi successfully completed.")
    ]


def test_a_launcher_failed_under_restart_policy_never_fails_the_job() -> None:
    built = mpijob({"Launcher": 1}, restart_policy="Never")
    assert rules(built, Launcher=counted(failed=1)) == [
        ("Failed", "MPIJobFailed", "MPIJob hpc/pi has failed")
    ]


def test_a_failed_launcher_that_restarts_on_failure_does_not_fail_the_job() -> None:
    assert rules(mpijob({"Launcher": 1}), Launcher=counted(failed=1)) == []


def test_evicted_workers_fail_the_job() -> None:
    observed_ = (
        ObservedPhase("Worker", 0, "Failed", reason="Evicted"),
        ObservedPhase("Worker", 1, "Running"),
    )
    assert rules(mpijob({"Launcher": 1, "Worker": 2}), observed_, Launcher=counted(active=1)) == [
        ("Failed", "MPIJobEvicted", "1/2 workers are evicted")
    ]


def test_other_worker_failures_do_not_fail_the_job() -> None:
    observed_ = (ObservedPhase("Worker", 0, "Failed", exit_code=1), ObservedPhase("Worker", 1, "Running"))
    assert rules(mpijob({"Launcher": 1, "Worker": 2}), observed_, Worker=counted(active=1, failed=1)) == []
