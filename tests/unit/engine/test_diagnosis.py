"""Diagnosis of the seeds' failure modes: one rule per mode, from observed replicas and the clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from builders import container, defaulted
from kubetrain.api.common import ConditionStatus, ConditionType, JobCondition, JobStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.diagnosis import (
    CRASH_LOOP,
    GANG_DEADLOCK,
    HEALTHY_AFTER_SECONDS,
    IMAGE_DIGEST_MISMATCH,
    IMAGE_PULL_FAILED,
    INIT_WAITING_FOR_MASTER,
    INSUFFICIENT_RESOURCES,
    MASTER_WAIT_GRACE_SECONDS,
    OUT_OF_MEMORY,
    PROGRESS_DEADLINE_EXCEEDED,
    Diagnosis,
    Finding,
    diagnose,
    quoted_crash_loops,
)
from kubetrain.engine.types import ObservedContainer, ObservedReplica, Phase
from kubetrain.frameworks.registry import framework_for

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
GPU_GAP = (
    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. no new claims to deallocate, preemption: 0/1 "
    "nodes are available: 1 No preemption victims found for incoming pod."
)
SELECTOR_GAP = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector."
INIT = "init-pytorch"


def pytorch(workers: int = 4, **options: Any) -> TrainingJob:
    replicas = {"Master": 1, "Worker": workers} if workers else {"Master": 1}
    return defaulted("PyTorchJob", replicas, name="gpu", **options)


def main(**fields: Any) -> ObservedContainer:
    return ObservedContainer("pytorch", **{"image": "trainer:1", **fields})


def running(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    return ObservedReplica(
        replica_type, index, Phase.RUNNING, ready=True, containers=containers or (main(),), **fields
    )


def pending(replica_type: str, index: int, *containers: ObservedContainer, **fields: Any) -> ObservedReplica:
    return ObservedReplica(replica_type, index, Phase.PENDING, containers=containers, **fields)


def unschedulable(replica_type: str, index: int, gap: str = GPU_GAP, **fields: Any) -> ObservedReplica:
    return pending(replica_type, index, unschedulable=gap, **fields)


def findings(job: TrainingJob, *replicas: ObservedReplica, now: datetime = NOW) -> list[Finding]:
    return list(diagnosis(job, *replicas, now=now).findings)


def diagnosis(job: TrainingJob, *replicas: ObservedReplica, now: datetime = NOW) -> Diagnosis:
    return diagnose(job, framework_for(job), replicas, now)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


# --- scheduling --------------------------------------------------------------------------------------------


def test_pods_unschedulable_while_others_run_without_gang_scheduling_is_a_gang_deadlock() -> None:
    job = pytorch()
    replicas = [running("Master", 0), *(running("Worker", i) for i in range(3)), unschedulable("Worker", 3)]

    assert findings(job, *replicas) == [
        Finding(
            GANG_DEADLOCK,
            "pod gpu-worker-3 cannot be scheduled (0/1 nodes are available: 1 Insufficient nvidia.com/gpu) "
            "while the job's other pods were placed: without gang scheduling those wait at the rendezvous "
            "for the missing ones forever. Fix: gang scheduling (the operator's "
            "--gang-scheduler-name, with Volcano or scheduler-plugins' coscheduling) starts no pod until all "
            "of them fit; or ask for fewer replicas, or less for each, than the cluster has free",
            ("gpu-worker-3",),
        )
    ]


def test_workers_placed_and_waiting_for_an_unschedulable_master_are_a_gang_deadlock_too() -> None:
    workers = [waiting_worker(i, ago(5), placed=True) for i in range(4)]

    [finding] = findings(pytorch(), unschedulable("Master", 0), *workers)

    assert (finding.reason, finding.replicas) == (GANG_DEADLOCK, ("gpu-master-0",))


def test_a_gang_scheduled_job_running_what_its_gang_scheduler_placed_is_no_deadlock() -> None:
    job = pytorch(workers=1)
    replicas = [running("Master", 0, gang_scheduled=True), unschedulable("Worker", 0, gang_scheduled=True)]

    assert findings(job, *replicas) == []


def test_a_deadlock_names_eight_pods_and_counts_the_rest() -> None:
    job = pytorch(workers=12)
    replicas = [running("Master", 0), *(unschedulable("Worker", i) for i in range(12))]

    [finding] = findings(job, *replicas)

    assert finding.message.startswith(
        "pods gpu-worker-0, gpu-worker-1, gpu-worker-2, gpu-worker-3, gpu-worker-4, gpu-worker-5, "
        "gpu-worker-6, gpu-worker-7 and 4 more cannot be scheduled (0/1 nodes are available: 1 Insufficient "
        "nvidia.com/gpu)"
    )
    assert finding.replicas == tuple(f"gpu-worker-{i}" for i in range(12))


def test_each_distinct_scheduler_reason_is_quoted_with_its_pods() -> None:
    job = pytorch(workers=3)
    replicas = [
        running("Master", 0),
        unschedulable("Worker", 0),
        unschedulable("Worker", 1, SELECTOR_GAP),
        unschedulable("Worker", 2),
    ]

    [finding] = findings(job, *replicas)

    assert finding.message.startswith(
        "pods gpu-worker-0 and gpu-worker-2 cannot be scheduled (0/1 nodes are available: 1 Insufficient "
        "nvidia.com/gpu); pod gpu-worker-1 cannot be scheduled (0/1 nodes are available: 1 node(s) didn't "
        "match Pod's node affinity/selector) while"
    )


def test_pods_pending_for_resources_with_nothing_running_is_insufficient_resources() -> None:
    job = pytorch(workers=1)
    replicas = [unschedulable("Master", 0), unschedulable("Worker", 0)]

    assert findings(job, *replicas) == [
        Finding(
            INSUFFICIENT_RESOURCES,
            "pods gpu-master-0 and gpu-worker-0 cannot be scheduled (0/1 nodes are available: 1 Insufficient "
            "nvidia.com/gpu) and none of the job's pods is placed yet. Fix: free or add nvidia.com/gpu on "
            "the nodes (kubectl describe nodes shows what is allocated), or ask for fewer replicas, or less "
            "for each",
            ("gpu-master-0", "gpu-worker-0"),
        )
    ]


def test_insufficient_resources_names_every_resource_the_scheduler_lacks() -> None:
    gap = "0/2 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, 2 Insufficient nvidia.com/gpu."
    [finding] = findings(pytorch(workers=1), unschedulable("Master", 0, gap), pending("Worker", 0))

    assert "Fix: free or add cpu, memory and nvidia.com/gpu on the nodes" in finding.message


def test_a_gang_schedulers_resource_gap_is_insufficient_resources_naming_the_resources() -> None:
    gap = "0/1 nodes are available: resource gap: map[nvidia.com/gpu:{{1 0} {<nil>} 1 DecimalSI}]."
    replicas = [unschedulable("Master", 0, gap, gang_scheduled=True), unschedulable("Worker", 0, gap)]

    [finding] = findings(pytorch(workers=1), *replicas)

    assert finding.reason == INSUFFICIENT_RESOURCES
    assert (
        "cannot be scheduled (0/1 nodes are available: resource gap: map[nvidia.com/gpu:" in finding.message
    )
    assert "Fix: free or add nvidia.com/gpu on the nodes" in finding.message


def test_pods_pending_for_a_selector_with_nothing_running_are_left_to_the_per_pod_warnings() -> None:
    assert findings(pytorch(workers=1), unschedulable("Master", 0, SELECTOR_GAP), pending("Worker", 0)) == []


def test_pending_pods_the_scheduler_has_not_refused_are_no_finding() -> None:
    assert findings(pytorch(workers=1), running("Master", 0), pending("Worker", 0)) == []


# --- crash loops -------------------------------------------------------------------------------------------


def crashed(**fields: Any) -> ObservedContainer:
    defaults: dict[str, Any] = {
        "waiting_reason": "CrashLoopBackOff",
        "waiting_message": "back-off 40s restarting failed container=pytorch pod=gpu-worker-1",
        "last_exit_code": 1,
        "last_reason": "Error",
        "restart_count": 3,
    }
    return main(**{**defaults, **fields})


def test_a_container_in_crash_loop_back_off_is_a_crash_loop_with_its_exit_code_and_last_lines() -> None:
    lines = 'epoch 1\nTraceback (most recent call last):\n  File "train.py", line 9\nValueError: bad shape\n'
    worker = running("Worker", 1, crashed(last_lines=lines))

    assert findings(pytorch(workers=2), running("Master", 0), running("Worker", 0), worker) == [
        Finding(
            CRASH_LOOP,
            "pod gpu-worker-1 is in a crash loop: container pytorch exited with code 1 (Error) and is "
            'restarted again and again; its last lines: "epoch 1 | Traceback (most recent call last): | '
            'File "train.py", line 9 | ValueError: bad shape". Fix: correct what its output shows (its log '
            "holds the whole run); runPolicy.backoffLimit bounds the restarts",
            ("gpu-worker-1",),
        )
    ]


def test_a_termination_message_is_quoted_rather_than_the_log() -> None:
    worker = running("Worker", 0, crashed(last_message="CUDA out of memory\n", last_lines="log line"))

    [finding] = findings(pytorch(workers=1), running("Master", 0), worker)

    assert 'its last lines: "CUDA out of memory".' in finding.message


def test_only_the_last_five_lines_are_quoted_each_cut_to_two_hundred_characters() -> None:
    output = "\n".join(["early"] * 10 + ["x" * 500])
    worker = running("Worker", 0, crashed(last_lines=output))

    [finding] = findings(pytorch(workers=1), running("Master", 0), worker)

    quoted = finding.message.split('its last lines: "')[1].split('". Fix')[0]
    assert quoted == " | ".join(["early"] * 4 + ["x" * 197 + "..."])


def test_a_container_running_again_after_failing_again_and_again_is_in_its_loop_for_ten_minutes() -> None:
    started = ago(60)
    again = running("Worker", 0, crashed(waiting_reason=None, waiting_message=None, running_since=started))
    job = pytorch(workers=1)

    looping = diagnosis(job, running("Master", 0), again)
    healed = diagnosis(
        job, running("Master", 0), again, now=started + timedelta(seconds=HEALTHY_AFTER_SECONDS)
    )

    assert [f.reason for f in looping.findings] == [CRASH_LOOP]
    assert looping.recheck_in == HEALTHY_AFTER_SECONDS - 60
    assert healed.findings == ()


def test_a_container_in_its_first_back_offs_is_no_loop() -> None:
    for restarts in (0, 1, 2):
        backing_off = running("Worker", 0, crashed(restart_count=restarts))
        assert findings(pytorch(workers=1), running("Master", 0), backing_off) == [], restarts


def test_one_failure_and_a_restart_is_no_loop() -> None:
    once = running(
        "Worker", 0, main(last_exit_code=1, last_reason="Error", restart_count=1, running_since=ago(5))
    )

    assert findings(pytorch(workers=1), running("Master", 0), once) == []


def test_crash_looping_replicas_of_one_type_are_one_finding_quoting_the_first() -> None:
    workers = [running("Worker", i, crashed(last_exit_code=i + 1, last_lines=f"rank {i}")) for i in range(3)]

    [finding] = findings(pytorch(workers=3), running("Master", 0), *workers)

    assert finding.message.startswith(
        "pods gpu-worker-0, gpu-worker-1 and gpu-worker-2 are in a crash loop: container pytorch of "
        'gpu-worker-0 exited with code 1 (Error) and is restarted again and again; its last lines: "rank 0"'
    )
    assert finding.replicas == ("gpu-worker-0", "gpu-worker-1", "gpu-worker-2")


def test_each_replica_type_in_a_crash_loop_is_its_own_finding() -> None:
    replicas = [running("Master", 0, crashed(last_lines="master")), running("Worker", 0, crashed())]

    assert [f.replicas for f in findings(pytorch(workers=1), *replicas)] == [
        ("gpu-master-0",),
        ("gpu-worker-0",),
    ]


def test_the_logs_to_read_are_the_first_crash_loop_of_each_type_without_lines() -> None:
    job = pytorch(workers=2)
    master = running("Master", 0, crashed(last_message="written"))
    first, second = running("Worker", 0, crashed()), running("Worker", 1, crashed())

    wanted = quoted_crash_loops(job, framework_for(job), [second, master, first], NOW)

    assert wanted == [(first, first.containers[0])]


# --- images ------------------------------------------------------------------------------------------------


def test_a_container_whose_image_cannot_be_pulled_names_the_image_pods_and_the_kubelets_words() -> None:
    missing = main(
        image="localhost/trainer:typo",
        waiting_reason="ErrImageNeverPull",
        waiting_message='Container image "localhost/trainer:typo" is not present with pull policy of Never',
    )
    job = pytorch(workers=2)
    replicas = [running("Master", 0), pending("Worker", 0, missing), pending("Worker", 1, missing)]

    assert findings(job, *replicas) == [
        Finding(
            IMAGE_PULL_FAILED,
            "pods gpu-worker-0 and gpu-worker-1 cannot start: image localhost/trainer:typo of container "
            'pytorch cannot be pulled (ErrImageNeverPull: Container image "localhost/trainer:typo" is not '
            "present with pull policy of Never). Fix: correct the image's name or tag, make its registry "
            "reachable from the nodes (imagePullSecrets for a private one), or, with imagePullPolicy Never, "
            "load it onto the nodes",
            ("gpu-worker-0", "gpu-worker-1"),
        )
    ]


def test_each_image_that_cannot_be_pulled_is_its_own_finding() -> None:
    first = main(
        image="a:1", waiting_reason="ImagePullBackOff", waiting_message='Back-off pulling image "a:1"'
    )
    second = main(image="b:1", waiting_reason="ErrImagePull", waiting_message="not found")

    found = findings(pytorch(workers=1), pending("Master", 0, first), pending("Worker", 0, second))

    assert [(f.reason, f.replicas) for f in found] == [
        (IMAGE_PULL_FAILED, ("gpu-master-0",)),
        (IMAGE_PULL_FAILED, ("gpu-worker-0",)),
    ]


def test_replicas_running_different_digests_of_one_image_reference() -> None:
    old, new = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    replicas = [
        running(
            "Master", 0, main(image="registry:5000/trainer:latest", image_id=f"registry:5000/trainer@{old}")
        ),
        running(
            "Worker", 0, main(image="registry:5000/trainer:latest", image_id=f"registry:5000/trainer@{old}")
        ),
        running(
            "Worker", 1, main(image="registry:5000/trainer:latest", image_id=f"registry:5000/trainer@{new}")
        ),
    ]

    assert findings(pytorch(workers=2), *replicas) == [
        Finding(
            IMAGE_DIGEST_MISMATCH,
            "pods run different builds of image registry:5000/trainer:latest: sha256:aaaaaaaaaaaa on pods "
            "gpu-master-0 and gpu-worker-0; sha256:bbbbbbbbbbbb on pod gpu-worker-1. Fix: pin the image by "
            "digest (registry:5000/trainer@sha256:...) or set imagePullPolicy Always, then restart the job "
            "so that every replica runs one build",
            ("gpu-master-0", "gpu-worker-0", "gpu-worker-1"),
        )
    ]


def test_one_digest_of_an_image_everywhere_is_no_mismatch() -> None:
    same = main(image="trainer:1", image_id="sha256:" + "c" * 64)

    assert findings(pytorch(workers=1), running("Master", 0, same), running("Worker", 0, same)) == []


# --- OOM kills ----------------------------------------------------------------------------------------------


def oom(**fields: Any) -> ObservedContainer:
    return main(**{"last_reason": "OOMKilled", "last_exit_code": 137, "restart_count": 1, **fields})


def test_an_oom_killed_container_names_its_memory_limit_and_where_to_raise_it() -> None:
    job = pytorch(workers=1)
    worker = running("Worker", 0, oom(memory_limit="64Mi", waiting_reason="CrashLoopBackOff"))

    assert findings(job, running("Master", 0), worker) == [
        Finding(
            OUT_OF_MEMORY,
            "pod gpu-worker-0: container pytorch was killed for running out of memory (OOMKilled, exit code "
            "137) under its memory limit of 64Mi. Fix: raise container pytorch's memory limit "
            "(spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.memory) or make "
            "it use less (a smaller batch)",
            ("gpu-worker-0",),
        )
    ]


def test_an_oom_kill_without_a_memory_limit_says_the_node_ran_out() -> None:
    [finding] = findings(pytorch(workers=1), running("Master", 0), running("Worker", 0, oom()))

    assert "(OOMKilled, exit code 137) with no memory limit: the node ran out of memory." in finding.message
    assert (
        "Fix: give container pytorch a memory request and limit (spec.pytorchReplicaSpecs" in finding.message
    )


def test_an_oom_kill_explains_the_failed_pod_it_ended() -> None:
    failed = ObservedReplica("Master", 0, Phase.FAILED, exit_code=137, containers=(oom(memory_limit="1Gi"),))

    assert [f.replicas for f in findings(pytorch(workers=0), failed)] == [("gpu-master-0",)]


def test_an_oom_killed_container_running_ten_minutes_since_is_healthy_again() -> None:
    job = pytorch(workers=1)
    worker = running("Worker", 0, oom(running_since=ago(HEALTHY_AFTER_SECONDS)))

    assert findings(job, running("Master", 0), worker) == []


def test_an_oom_killed_container_in_its_back_off_is_not_also_a_crash_loop() -> None:
    worker = running("Worker", 0, oom(waiting_reason="CrashLoopBackOff", restart_count=4))

    assert [f.reason for f in findings(pytorch(workers=1), running("Master", 0), worker)] == [OUT_OF_MEMORY]


# --- workers waiting for their master ----------------------------------------------------------------------


def waiting_worker(index: int, since: datetime, **fields: Any) -> ObservedReplica:
    return pending("Worker", index, ObservedContainer(INIT, init=True, running_since=since), main(), **fields)


def test_workers_waiting_past_the_grace_for_a_master_that_is_not_ready() -> None:
    master = ObservedReplica("Master", 0, Phase.RUNNING, containers=(main(running_since=ago(300)),))
    replicas = [master, waiting_worker(0, ago(120)), waiting_worker(1, ago(90))]

    assert findings(pytorch(workers=2), *replicas) == [
        Finding(
            INIT_WAITING_FOR_MASTER,
            "pods gpu-worker-0 and gpu-worker-1 wait in init container init-pytorch for master gpu-master-0, "
            "which is not Ready: workers start only once the master's name resolves. Fix: what keeps the "
            "master from being Ready (its pod's events and log); the workers follow it",
            ("gpu-worker-0", "gpu-worker-1"),
        )
    ]


def test_workers_waiting_for_a_master_that_does_not_exist() -> None:
    [finding] = findings(pytorch(workers=1), waiting_worker(0, ago(120)))

    assert (
        "waits in init container init-pytorch for master gpu-master-0, which does not exist:"
        in finding.message
    )


def test_workers_waiting_for_a_master_that_cannot_be_scheduled_quote_the_scheduler() -> None:
    [*_, finding] = findings(pytorch(workers=1), unschedulable("Master", 0), waiting_worker(0, ago(120)))

    assert finding.reason == INIT_WAITING_FOR_MASTER
    assert (
        "which cannot be scheduled (0/1 nodes are available: 1 Insufficient nvidia.com/gpu): workers start"
        in finding.message
    )


def test_workers_still_waiting_for_a_master_ready_past_the_grace_cannot_resolve_its_name() -> None:
    master = running("Master", 0, ready_since=ago(MASTER_WAIT_GRACE_SECONDS + 1))

    assert findings(pytorch(workers=1), master, waiting_worker(0, ago(600))) == [
        Finding(
            INIT_WAITING_FOR_MASTER,
            "pod gpu-worker-0 still waits in init container init-pytorch for master gpu-master-0, which has "
            "been Ready for over 60s: its name does not resolve from it. Fix: check the cluster's DNS "
            "(CoreDNS) and the namespace's NetworkPolicies; nslookup gpu-master-0 from a pod in the job's "
            "namespace must answer",
            ("gpu-worker-0",),
        )
    ]


def test_a_wait_within_the_grace_is_no_finding_and_the_engine_looks_again_when_the_grace_ends() -> None:
    master = running("Master", 0, ready_since=ago(10))

    seen = diagnosis(pytorch(workers=1), master, waiting_worker(0, ago(600)))

    assert seen.findings == ()
    assert seen.recheck_in == MASTER_WAIT_GRACE_SECONDS - 10


def test_a_users_own_init_container_is_not_the_wait_for_master() -> None:
    own = {"initContainers": [container("fetch-data", "busybox")], "containers": [container("pytorch")]}
    template = {"template": {"spec": own}}
    job = pytorch(workers=1, spec={"pytorchReplicaSpecs": {"Master": template, "Worker": template}})
    worker = pending("Worker", 0, ObservedContainer("fetch-data", init=True, running_since=ago(900)), main())

    assert findings(job, pending("Master", 0), worker) == []


# --- progress ----------------------------------------------------------------------------------------------


def test_a_stalled_job_is_a_finding_with_its_conditions_message_naming_the_running_pods() -> None:
    stalled = JobCondition(
        type=ConditionType.STALLED,
        status=ConditionStatus.TRUE,
        reason=PROGRESS_DEADLINE_EXCEEDED,
        message="PyTorchJob gpu has had no progress report since ...",
    )
    job = pytorch(workers=1).with_status(JobStatus(conditions=[stalled]))

    assert findings(job, running("Master", 0), running("Worker", 0)) == [
        Finding(PROGRESS_DEADLINE_EXCEEDED, stalled.message or "", ("gpu-master-0", "gpu-worker-0"))
    ]


# --- what every rule shares --------------------------------------------------------------------------------


def test_a_finding_says_the_same_from_one_reconcile_to_the_next() -> None:
    job = pytorch()
    replicas = [
        running("Master", 0, crashed(last_lines="boom")),
        *(running("Worker", i, oom(memory_limit="1Gi")) for i in range(3)),
        unschedulable("Worker", 3),
        waiting_worker(4, ago(200)),
    ]

    assert findings(job, *replicas) == findings(job, *replicas, now=NOW + timedelta(seconds=45))


def test_terminating_and_succeeded_replicas_show_nothing() -> None:
    going = running("Worker", 0, crashed(), terminating=True)
    done = ObservedReplica("Master", 0, Phase.SUCCEEDED, exit_code=0, containers=(crashed(),))

    assert findings(pytorch(workers=1), done, going) == []
