"""What get and describe print, from plain jobs: the CRD printer columns plus replicas and restarts."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from lightkube.models.core_v1 import ContainerStatus, PodStatus
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import Pod

from builders import job
from kubetrain.api.common import JobCondition, JobStatus, ReplicaStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.summary import JobSummary, NodeTally
from kubetrain.api.trainer import TrainJob
from kubetrain.engine.diagnosis import Finding
from kubetrain.sdk import tables
from kubetrain.sdk.backends.base import JobEvent

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def running_job() -> TrainingJob:
    status = JobStatus(
        conditions=[
            JobCondition(type="Created", status="True", reason="Created", message="created"),
            JobCondition(type="Running", status="True", reason="Running", message="it runs"),
        ],
        replica_statuses={"Master": ReplicaStatus(active=1), "Worker": ReplicaStatus(active=2, restarts=1)},
    )
    created = job("PyTorchJob", {"Master": 1, "Worker": 3}, name="mnist")
    meta = created.metadata.model_copy(update={"creation_timestamp": NOW - timedelta(minutes=5)})
    return created.model_copy(update={"metadata": meta}).with_status(status)


def running_summary() -> JobSummary:
    return JobSummary.from_wire(running_job().to_wire())


def pod(name: str, restarts: int) -> Pod:
    status = PodStatus(
        phase="Running",
        containerStatuses=[
            ContainerStatus(name="pytorch", image="", imageID="", ready=True, restartCount=restarts)
        ],
    )
    return Pod(metadata=ObjectMeta(name=name), status=status)


@pytest.mark.parametrize(
    ("seconds", "shown"), [(5, "5s"), (119, "119s"), (300, "5m"), (3 * 3600, "3h"), (3 * 86400, "3d")]
)
def test_ages_are_kubectls_short_durations(seconds: int, shown: str) -> None:
    assert tables.age(NOW - timedelta(seconds=seconds), NOW) == shown


def test_state_is_the_last_conditions_type() -> None:
    assert running_summary().state == "Running"


def test_replicas_are_active_of_desired_per_type_in_spec_order() -> None:
    assert tables.replicas(running_summary()) == "Master 1/1 Worker 2/3"


def test_restarts_add_live_pods_restarts_to_those_of_replaced_pods() -> None:
    assert tables.restarts(running_summary(), live_restarts=2) == 3


def reporting_summary(state: str = "Running") -> JobSummary:
    wire = running_job().to_wire()
    wire["status"]["conditions"][-1]["type"] = state
    wire["status"]["trainerStatus"] = {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 600,
        "metrics": [{"name": "loss", "value": "0.23"}, {"name": "acc", "value": "0.91"}],
        "lastUpdatedTime": "2026-01-01T11:58:00Z",
    }
    return JobSummary.from_wire(wire)


def test_a_row_has_the_printer_columns_values() -> None:
    row = tables.job_row(running_summary(), 0, NOW)
    header = tables.columns(all_namespaces=False, several_kinds=False, wide=False)
    assert header == ["NAME", "STATE", "PROGRESS", "ETA", "REPLICAS", "RESTARTS", "AGE"]
    assert tables.cells(row, header) == ["mnist", "Running", "-", "-", "Master 1/1 Worker 2/3", "1", "5m"]


def test_progress_is_the_reported_percentage_and_eta_counts_down_from_the_report() -> None:
    row = tables.job_row(reporting_summary(), 0, NOW)
    assert (row.progress, row.eta) == ("45%", "8m")


def test_eta_never_goes_below_zero_and_a_finished_job_has_none() -> None:
    late = NOW + timedelta(hours=1)
    assert tables.job_row(reporting_summary(), 0, late).eta == "0s"
    assert tables.job_row(reporting_summary("Succeeded"), 0, NOW).eta == "-"


def test_wide_rows_show_the_latest_metrics() -> None:
    header = tables.columns(all_namespaces=False, several_kinds=False, wide=True)
    cells = dict(zip(header, tables.cells(tables.job_row(reporting_summary(), 0, NOW), header), strict=True))
    assert cells["METRICS"] == "loss=0.23,acc=0.91"


def test_all_namespaces_and_several_kinds_add_their_columns_first() -> None:
    header = tables.columns(all_namespaces=True, several_kinds=True, wide=True)
    assert header[:3] == ["NAMESPACE", "NAME", "KIND"]
    assert header[-3:] == ["CREATED", "METRICS", "MESSAGE"]


def test_names_are_kind_dot_group_slash_name() -> None:
    assert tables.qualified_name(running_job()) == "pytorchjob.kubeflow.org/mnist"
    assert tables.qualified_name(running_summary()) == "pytorchjob.kubeflow.org/mnist"


def test_describe_has_every_section_with_the_jobs_facts() -> None:
    events = [JobEvent("Normal", "SuccessfulCreatePod", "Created pod: mnist-master-0", "PyTorchJob/mnist")]
    text = tables.describe(running_job(), [pod("mnist-master-0", 0)], events, NOW)
    sections = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert [s.split(":")[0] for s in sections] == [
        "Name",
        "Namespace",
        "Kind",
        "Created",
        "State",
        "Labels",
        "Run Policy",
        "Replicas",
        "Pods",
        "Conditions",
        "Events",
    ]
    assert "SuccessfulCreatePod" in text.split("Events:")[1]
    assert re.search(r"Running\s+True\s+Running\s+<unknown>\s+it runs", text)


def test_describe_starts_with_the_diagnosis_one_line_per_finding() -> None:
    findings = [
        Finding("GangDeadlock", "pod mnist-worker-2 cannot be scheduled (...)", ("mnist-worker-2",)),
        Finding("CrashLoop", "pod mnist-master-0 is in a crash loop: ...", ("mnist-master-0",)),
    ]

    text = tables.describe(running_job(), [], [], NOW, findings)

    assert text.splitlines()[:4] == [
        "Diagnosis:",
        "  GangDeadlock: pod mnist-worker-2 cannot be scheduled (...)",
        "  CrashLoop: pod mnist-master-0 is in a crash loop: ...",
        "Name:          mnist",
    ]


def test_describe_of_a_job_with_nothing_wrong_has_no_diagnosis_section() -> None:
    assert tables.describe(running_job(), [], [], NOW, []).startswith("Name:")


def test_describe_shows_the_disruptions_a_job_was_replaced_after_under_its_run_policy() -> None:
    disrupted = running_job()
    disrupted.status.replica_statuses["Worker"].disruptions = 2
    text = tables.describe(disrupted, [], [], NOW)
    run_policy = text.split("Run Policy:")[1].split("Replicas:")[0]
    assert (
        "Disruptions:              2 of 10 replaced without counting against backoffLimit "
        "(kubetrain.dev/disruption-limit)" in run_policy
    )


def test_describe_names_a_restart_scope_job_and_says_nothing_of_the_defaults() -> None:
    plain = tables.describe(running_job(), [], [], NOW)
    whole = running_job()
    whole.metadata.annotations = {"kubetrain.dev/restart-scope": "Job"}
    assert "Restart Scope" not in plain and "Disruptions" not in plain
    assert "  Restart Scope:            Job (every replica restarts together)" in tables.describe(
        whole, [], [], NOW
    )


# --- Kubeflow Trainer's TrainJob ------------------------------------------------------------------------


def a_trainjob() -> TrainJob:
    return TrainJob.model_validate(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": "llm", "namespace": "team", "creationTimestamp": "2026-01-01T11:55:00Z"},
            "spec": {
                "runtimeRef": {"name": "torch-distributed"},
                "trainer": {
                    "image": "trainer:1",
                    "command": ["torchrun", "train.py"],
                    "numNodes": 2,
                    "resourcesPerNode": {"limits": {"cpu": "4", "nvidia.com/gpu": "1"}},
                },
            },
            "status": {
                "conditions": [
                    {
                        "type": "Complete",
                        "status": "True",
                        "reason": "AllJobsCompleted",
                        "message": "jobset completed successfully",
                        "lastTransitionTime": "2026-01-01T11:59:00Z",
                    }
                ],
                "jobsStatus": [{"name": "node", "ready": 0, "active": 0, "succeeded": 1, "failed": 0}],
                "trainerStatus": {
                    "progressPercentage": 100,
                    "estimatedRemainingSeconds": 0,
                    "metrics": [{"name": "loss", "value": "0.12"}],
                    "lastUpdatedTime": "2026-01-01T11:59:00Z",
                },
            },
        }
    )


def jobset_pod(name: str, completion: int) -> Pod:
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "llm",
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": str(completion),
    }
    return Pod(metadata=ObjectMeta(name=name, labels=labels), status=PodStatus(phase="Succeeded"))


def test_trainjobs_alone_are_listed_with_nodes_for_replicas() -> None:
    assert tables.columns(all_namespaces=False, several_kinds=False, wide=False, nodes=True) == [
        "NAME",
        "STATE",
        "PROGRESS",
        "ETA",
        "NODES",
        "RESTARTS",
        "AGE",
    ]


def test_a_trainjobs_nodes_cell_is_its_active_nodes_of_its_num_nodes() -> None:
    summary = JobSummary.from_wire(a_trainjob().to_wire(), NodeTally(seen=2, active=1, running=1))
    row = tables.job_row(summary, 0, NOW)
    assert (row.state, row.nodes, row.replicas) == ("Complete", "1/2", "node 1/2")


def test_describe_of_a_trainjob_shows_its_runtime_trainer_progress_and_jobset_jobs() -> None:
    pods = [jobset_pod("llm-node-0-1-ab12c", 1), jobset_pod("llm-node-0-0-xy34z", 0)]
    text = tables.describe(a_trainjob(), pods, [], NOW, state="Complete")
    for line in (
        "Kind:          TrainJob (trainer.kubeflow.org/v1alpha1)",
        "State:         Complete",
        "Runtime:       ClusterTrainingRuntime torch-distributed",
        "  Image:                    trainer:1",
        "  Command:                  torchrun train.py",
        "  Nodes:                    2",
        "  Processes per Node:       <runtime's>",
        "  Resources per Node:       limits cpu=4,nvidia.com/gpu=1",
        "  Progress:                 100%",
        "  Metrics:                  loss=0.12",
    ):
        assert line in text.splitlines(), line
    assert re.search(
        r"Jobs:\n  NAME +READY +ACTIVE +SUCCEEDED +FAILED +SUSPENDED\n  node +0 +0 +1 +0 +0\n", text
    )
    assert re.search(r"llm-node-0-1-ab12c +node-1 +Succeeded", text)
    assert re.search(r"Complete +True +AllJobsCompleted +60s +jobset completed successfully", text)
    assert "Run Policy" not in text
