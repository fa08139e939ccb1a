"""The engine with the real frameworks: realistic jobs from manifests, end to end through reconcile."""

from __future__ import annotations

from datetime import timedelta

from builders import container, job
from kubetrain.api.common import ConditionType
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.types import CreateReplica, CreateService, Decision, DeleteReplica, Observation, Phase
from kubetrain.frameworks.addressing import ClusterAddressing

from .fakes import NOW, observe, replica
from .support import KUBE, LOCAL, actions_of

NO_SERVICES: frozenset[tuple[str, int]] = frozenset()


def _reconcile(job_: TrainingJob, observation: Observation, at: timedelta = timedelta()) -> Decision:
    return reconcile(job_, observation, NOW + at, KUBE)


def _pytorch(**options: object) -> TrainingJob:
    return job("PyTorchJob", {"Master": 1, "Worker": 2}, name="mnist", **options)


def test_a_new_pytorchjob_creates_master_then_workers_with_their_services() -> None:
    decision = _reconcile(_pytorch(), observe(services=NO_SERVICES))
    assert actions_of(decision, CreateReplica) == [
        CreateReplica("Master", 0),
        CreateReplica("Worker", 0),
        CreateReplica("Worker", 1),
    ]
    assert len(actions_of(decision, CreateService)) == 3


def test_a_new_pytorchjob_is_created_with_the_kind_in_reason_and_message() -> None:
    created = _reconcile(_pytorch(), observe(services=NO_SERVICES)).status.condition(ConditionType.CREATED)
    assert created is not None
    assert (created.reason, created.message) == ("PyTorchJobCreated", "PyTorchJob mnist is created.")


def test_a_pytorchjob_whose_master_runs_is_running() -> None:
    observation = observe(replica("Master", 0), replica("Worker", 0), replica("Worker", 1, Phase.PENDING))
    running = _reconcile(_pytorch(), observation).status.condition(ConditionType.RUNNING)
    assert running is not None
    assert running.reason == "PyTorchJobRunning"


def test_a_pytorchjob_whose_master_succeeded_is_succeeded_with_completion_time() -> None:
    observation = observe(replica("Master", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0))
    decision = _reconcile(_pytorch(), observation, timedelta(minutes=3))
    assert decision.status.is_true(ConditionType.SUCCEEDED)
    assert decision.status.completion_time == NOW + timedelta(minutes=3)


def test_pytorch_failed_worker_is_restarted_under_the_default_on_failure_policy() -> None:
    observation = observe(
        replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)
    )
    decision = _reconcile(_pytorch(), observation)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_pytorch_replica_statuses_carry_the_scale_selector() -> None:
    decision = _reconcile(_pytorch(), observe(replica("Master", 0)))
    assert decision.status.replica_statuses["Worker"].selector == (
        "training.kubeflow.org/job-name=mnist,"
        "training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker"
    )


def test_tfjob_replica_statuses_have_no_selector() -> None:
    tfjob = job("TFJob", {"Worker": 2}, name="dist")
    decision = reconcile(tfjob, observe(replica("Worker", 0)), NOW, KUBE)
    assert decision.status.replica_statuses["Worker"].selector is None


def test_tfjob_failed_worker_under_the_default_never_policy_fails_the_job() -> None:
    tfjob = job("TFJob", {"Chief": 1, "Worker": 2}, name="dist")
    observation = observe(
        replica("Chief", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)
    )
    decision = reconcile(tfjob, observation, NOW, KUBE)
    assert decision.status.is_true(ConditionType.FAILED)
    assert not actions_of(decision, DeleteReplica)


def test_xgboost_exit_code_137_is_restarted_under_exit_code_policy() -> None:
    xgb = job("XGBoostJob", {"Master": 1, "Worker": 1}, restart_policy="ExitCode")
    observation = observe(replica("Master", 0), replica("Worker", 0, Phase.FAILED, exit_code=137))
    decision = reconcile(xgb, observation, NOW, KUBE)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Worker", 0, "restart")]


def test_a_local_run_creates_processes_and_no_services() -> None:
    decision = reconcile(_pytorch(), Observation(services=None), NOW, LOCAL)
    assert len(actions_of(decision, CreateReplica)) == 3
    assert not actions_of(decision, CreateService)


def test_an_invalid_pytorchjob_fails_with_invalid_spec() -> None:
    broken = job("PyTorchJob", {"Master": 2}, name="mnist")
    decision = reconcile(broken, observe(services=NO_SERVICES), NOW, KUBE)
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert failed.reason == "InvalidSpec"
    assert failed.message is not None
    assert "spec.pytorchReplicaSpecs.Master" in failed.message
    assert not actions_of(decision, CreateReplica)


def test_pytorch_plan_appends_the_rendezvous_env_to_every_container() -> None:
    two = [container("pytorch", env=[{"name": "USER", "value": "me"}]), container("sidecar")]
    admitted = admit(job("PyTorchJob", {"Master": 1, "Worker": 1}, name="mnist", containers=two))
    plan = plan_replica(admitted, "Worker", 0, ClusterAddressing())
    first, sidecar = plan.template["spec"]["containers"]
    assert [e["name"] for e in first["env"]][:2] == ["USER", "PYTHONUNBUFFERED"]
    assert {e["name"]: e.get("value") for e in sidecar["env"]}["MASTER_ADDR"] == "mnist-master-0"
    assert plan.labels["training.kubeflow.org/replica-type"] == "worker"


def test_tfjob_plan_puts_tf_config_only_on_the_tensorflow_container() -> None:
    two = [container("tensorflow"), container("sidecar")]
    admitted = admit(job("TFJob", {"Worker": 2}, name="dist", containers=two))
    plan = plan_replica(admitted, "Worker", 1, ClusterAddressing())
    tensorflow, sidecar = plan.template["spec"]["containers"]
    assert [e["name"] for e in tensorflow["env"]] == ["TF_CONFIG"]
    assert "env" not in sidecar


def test_jax_worker_zero_carries_the_master_role_label() -> None:
    admitted = admit(job("JAXJob", {"Worker": 2}, name="jx"))
    first, second = (plan_replica(admitted, "Worker", i, ClusterAddressing()) for i in (0, 1))
    assert first.labels.get("training.kubeflow.org/job-role") == "master"
    assert "training.kubeflow.org/job-role" not in second.labels


def test_a_tfjob_worker_failing_under_on_failure_restarts_instead_of_failing_the_job() -> None:
    tfjob = job("TFJob", {"Chief": 1, "Worker": 2}, name="dist", restart_policy="OnFailure")
    failed = replica("Worker", 1, Phase.FAILED, exit_code=1)
    observation = observe(replica("Chief", 0), replica("Worker", 0), failed)
    decision = _reconcile(tfjob, observation)
    assert decision.status.is_true(ConditionType.RESTARTING)
    assert not decision.status.is_true(ConditionType.FAILED)
    assert DeleteReplica("Worker", 1, "restart") in actions_of(decision, DeleteReplica)


def test_the_mpi_launcher_plan_is_named_without_an_index() -> None:
    mpijob = admit(job("MPIJob", {"Launcher": 1, "Worker": 2}, name="horovod"))
    assert plan_replica(mpijob, "Launcher", 0, ClusterAddressing()).name == "horovod-launcher"


def test_an_mpijob_v1_worker_failed_under_on_failure_is_left_failed_and_fails_the_job() -> None:
    """Upstream's MPIJob v1 controller never deletes a failed pod; its generic rules fail the job."""
    mpijob = job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", restart_policy="OnFailure")
    observation = observe(
        replica("Launcher", 0), replica("Worker", 0, Phase.FAILED, exit_code=1), replica("Worker", 1)
    )
    decision = reconcile(mpijob, observation, NOW, KUBE)
    assert not actions_of(decision, DeleteReplica)
    failed = decision.status.condition(ConditionType.FAILED)
    assert failed is not None
    assert (failed.reason, failed.message) == (
        "MPIJobMPIJobFailed",
        "MPIJob pi is failed because 1 Worker replica(s) failed.",
    )


def test_an_mpijob_v1_launcher_killed_under_exit_code_is_replaced_and_the_job_restarts() -> None:
    mpijob = job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi", restart_policy="ExitCode")
    observation = observe(
        replica("Launcher", 0, Phase.FAILED, exit_code=137), replica("Worker", 0), replica("Worker", 1)
    )
    decision = reconcile(mpijob, observation, NOW, KUBE)
    assert actions_of(decision, DeleteReplica) == [DeleteReplica("Launcher", 0, "restart")]
    assert decision.status.is_true(ConditionType.RESTARTING)
    assert not decision.status.is_finished


def test_an_mpijob_v1_stops_counting_workers_once_its_launcher_ended() -> None:
    mpijob = job("MPIJob", {"Launcher": 1, "Worker": 2}, name="pi")
    observation = observe(
        replica("Launcher", 0, Phase.SUCCEEDED, exit_code=0), replica("Worker", 0), replica("Worker", 1)
    )
    decision = reconcile(mpijob, observation, NOW, KUBE)
    assert decision.status.replica_statuses["Launcher"].succeeded == 1
    workers = decision.status.replica_statuses["Worker"]
    assert (workers.active, workers.succeeded, workers.failed) == (0, 0, 0)
