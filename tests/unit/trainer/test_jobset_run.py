"""A planned JobSet run by the engine on this machine: its replicas, order, success and failure rules."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainjobs import builtin, trainjob

from kubetrain.api.common import ConditionType
from kubetrain.api.jobset_run import JobSetRun
from kubetrain.engine.planning import desired_replicas, plan_replica
from kubetrain.engine.reconciler import reconcile
from kubetrain.engine.trainjob_plan import plan
from kubetrain.engine.types import CreateReplica, Observation, ObservedReplica, Phase, Traits
from kubetrain.frameworks.addressing import ClusterAddressing, LocalAddressing
from kubetrain.frameworks.jobset_run import JobSetRunFramework, from_jobset
from kubetrain.local.container_run import container_run
from kubetrain.local.trainjob import prepare

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
LOCAL = Traits(colocated=True)


def _run(name: str = "torch-distributed", **spec: Any) -> JobSetRun:
    jobset = plan(trainjob(name, **spec), builtin(name).spec).jobset
    assert jobset is not None
    return from_jobset(jobset)


def _pods(run: JobSetRun, phases: dict[tuple[str, int], Phase]) -> Observation:
    return Observation(replicas=tuple(ObservedReplica(t, i, phase) for (t, i), phase in phases.items()))


def _conditions(run: JobSetRun, phases: dict[tuple[str, int], Phase]) -> dict[str, str]:
    decision = reconcile(run, _pods(run, phases), NOW, LOCAL)
    return {str(c.type): str(c.reason) for c in decision.status.conditions if c.status == "True"}


def test_every_node_of_the_trainer_job_is_a_replica() -> None:
    run = _run(trainer={"numNodes": 3})
    assert desired_replicas(run, LOCAL) == [("node", 0), ("node", 1), ("node", 2)]


def test_a_replica_reads_its_completion_index_from_its_pod_annotations() -> None:
    run = _run(trainer={"numNodes": 2})
    replica = plan_replica(run, "node", 1, LocalAddressing({}))
    assert replica.template["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "1"
    assert replica.name == f"{run.name}-node-0-1"


def test_the_run_completes_when_every_job_of_the_targets_succeeded() -> None:
    run = _run(trainer={"numNodes": 2})
    assert ConditionType.SUCCEEDED not in _conditions(
        run, {("node", 0): Phase.SUCCEEDED, ("node", 1): Phase.RUNNING}
    )
    done = _conditions(run, {("node", 0): Phase.SUCCEEDED, ("node", 1): Phase.SUCCEEDED})
    assert done[ConditionType.SUCCEEDED] == "AllJobsCompleted"


def test_the_run_completes_with_its_success_policy_target_alone() -> None:
    run = _run("deepspeed-distributed", trainer={"numNodes": 2})
    done = _conditions(run, {("node", 0): Phase.RUNNING, ("launcher", 0): Phase.SUCCEEDED})
    assert done[ConditionType.SUCCEEDED] == "AllJobsCompleted"


def test_a_failed_pod_fails_the_run_with_failed_jobs() -> None:
    run = _run(trainer={"numNodes": 2})
    failed = _conditions(run, {("node", 0): Phase.FAILED, ("node", 1): Phase.RUNNING})
    assert failed[ConditionType.FAILED] == "FailedJobs"


def test_a_job_waits_for_the_jobs_it_depends_on_to_complete() -> None:
    run = _run("torchtune-llama3.2-1b", trainer={"numNodes": 1})
    first = reconcile(run, Observation(), NOW, LOCAL)
    created = {(a.replica_type, a.index) for a in first.actions if isinstance(a, CreateReplica)}
    assert created == {("dataset-initializer", 0), ("model-initializer", 0)}
    later = reconcile(
        run,
        _pods(run, {("dataset-initializer", 0): Phase.SUCCEEDED, ("model-initializer", 0): Phase.SUCCEEDED}),
        NOW,
        LOCAL,
    )
    assert [(a.replica_type, a.index) for a in later.actions if isinstance(a, CreateReplica)] == [("node", 0)]


def test_a_local_trainjob_gets_the_substrates_addresses_in_its_env() -> None:
    def address(job: JobSetRun, keys: list[tuple[str, int]]) -> LocalAddressing:
        return LocalAddressing({key: 40000 + key[1] for key in keys})

    prepared = prepare(trainjob(trainer={"numNodes": 2}), builtin("torch-distributed"), address, LOCAL)
    template = prepared.run.replica_specs["node"].template
    env = {e["name"]: e.get("value") for e in template["spec"]["containers"][0]["env"]}
    assert (env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == ("127.0.0.1", "40000")
    assert prepared.run.spec.trainjob is not None and prepared.run.spec.trainjob["kind"] == "TrainJob"


def test_a_jobset_run_carries_its_trainjobs_annotations_so_its_opt_ins_apply() -> None:
    jobset = {"metadata": {"name": "tj"}, "spec": {"replicatedJobs": [], "suspend": True}}
    trainjob = {"metadata": {"name": "tj", "annotations": {"kubetrain.dev/progress-deadline-seconds": "60"}}}
    run = from_jobset(jobset, trainjob)
    assert run.metadata.annotations == {"kubetrain.dev/progress-deadline-seconds": "60"}
    assert run.run_policy.suspend is True


def test_a_jobset_runs_replicas_carry_a_jobsets_pod_labels_and_are_read_back_from_them() -> None:
    jobset = {
        "metadata": {"name": "tj"},
        "spec": {
            "replicatedJobs": [
                {"name": "node", "replicas": 2, "template": {"spec": {"parallelism": 3, "template": {}}}}
            ]
        },
    }
    run = from_jobset(jobset)
    framework = JobSetRunFramework()
    labels = framework.replica_labels(run, "node", 4)
    assert {k: v for k, v in labels.items() if "jobset" in k or "batch" in k} == {
        "jobset.sigs.k8s.io/jobset-name": "tj",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "1",
        "batch.kubernetes.io/job-completion-index": "1",
    }
    cluster_pod = {k: v for k, v in labels.items() if k.startswith(("jobset.", "batch."))}
    assert (framework.replica_type_of(cluster_pod), framework.replica_index_of(run, cluster_pod)) == (
        "node",
        4,
    )


def test_a_node_in_a_container_is_reachable_by_its_jobset_host_name() -> None:
    """What Trainer's env names (``PET_MASTER_ADDR=<trainjob>-node-0-0.<trainjob>``) resolves on the job's
    container network, as the cluster's DNS resolves a JobSet pod's host name in its subdomain."""
    run = _run(trainer={"numNodes": 2})
    replica = plan_replica(run, "node", 0, ClusterAddressing())
    container = container_run(replica, run, labels={}, volumes_dir=Path("/state/volumes"))
    assert f"{run.name}-node-0-0.{run.name}" in container.aliases
