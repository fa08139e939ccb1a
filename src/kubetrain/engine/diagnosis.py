"""Diagnosis: the failure modes the seeds warn about, found in what the substrates already observe.

``diagnose`` is a pure function of the job, its observed replicas (phase, the scheduler's reason, container
states, exit codes, restarts, image digests) and the time. It returns findings, each the reason of a Warning
event, a message naming the pods, the cause and the fix, and the pods concerned; the substrates turn them into
events (the operator on every reconcile while they hold, folded into one Event with a count; the local runner
once when it appears) and ``kubetrain describe`` shows them at the top. A message says nothing that changes
while its cause holds (no "waited 3m12s", no count of restarts), so its repeats fold into one Event.

Reasons, one rule each:

- ``GangDeadlock``: some pods cannot be scheduled while others were placed, and the job is not
  gang-scheduled: the placed ones wait at the rendezvous for the missing ones forever;
- ``InsufficientResources``: pods cannot be scheduled for lack of a resource, and none of the job's is placed;
- ``CrashLoop``: a container exits and is restarted again and again (its exit code and last lines);
- ``ImagePullFailed``: a container cannot start because its image cannot be pulled (or is not there);
- ``OutOfMemory``: a container was killed for using more memory than it may (the container, its limit;
  the kubelet's reason is ``OOMKilled``, which upstream's per-pod warnings already carry);
- ``InitWaitingForMaster``: a worker's wait-for-master init container has waited past a grace period for a
  master that is not Ready, or that has been Ready all that while (its name does not resolve);
- ``ImageDigestMismatch``: replicas run different digests of one image reference;
- ``ProgressDeadlineExceeded``: the job's ``Stalled`` condition (``engine.progress``);
- ``NodeLost``: pods are on a node that stopped reporting (``Ready`` ``Unknown`` or ``False``) or that is
  tainted out of service: the node, the pods, and how they are replaced (``engine.node_loss``).

Each rule reads each replica once at most (a 5,000-replica job is diagnosed on every reconcile), and only
those not ``steady`` (``ObservedReplica.steady``: running as started, nothing any rule finds in it), but for
what it needs of all of them (their images' digests; the others only when a finding may be there: pods that
cannot be scheduled, a worker waiting for its master, a lost node, the job stalled); only the pods a message
names are formatted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import attrgetter
from typing import Any

from kubetrain.api.common import ConditionType, JobStatus
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.fault_policy import NODE_LOSS_TIMEOUT_ANNOTATION, fault_policy
from kubetrain.engine.node_loss import NODE_LOST, OUT_OF_SERVICE_TAINT, lost_nodes, node_state
from kubetrain.engine.progress import STALLED_REASON
from kubetrain.engine.types import ObservedContainer, ObservedNode, ObservedReplica, Phase
from kubetrain.frameworks.base import Framework

GANG_DEADLOCK = "GangDeadlock"
INSUFFICIENT_RESOURCES = "InsufficientResources"
CRASH_LOOP = "CrashLoop"
IMAGE_PULL_FAILED = "ImagePullFailed"
OUT_OF_MEMORY = "OutOfMemory"
INIT_WAITING_FOR_MASTER = "InitWaitingForMaster"
IMAGE_DIGEST_MISMATCH = "ImageDigestMismatch"
PROGRESS_DEADLINE_EXCEEDED = STALLED_REASON

REASONS = (
    GANG_DEADLOCK,
    INSUFFICIENT_RESOURCES,
    CRASH_LOOP,
    IMAGE_PULL_FAILED,
    OUT_OF_MEMORY,
    INIT_WAITING_FOR_MASTER,
    IMAGE_DIGEST_MISMATCH,
    PROGRESS_DEADLINE_EXCEEDED,
    NODE_LOST,
)
"""Every reason a finding can have, in the order ``diagnose`` lists them."""

NAMED_PODS = 8
"""Pods a message names before it says how many more there are."""
QUOTED_REASONS = 3
"""Distinct scheduler reasons a message quotes."""
LAST_LINES = 5
"""Lines of a crash-looping container's output a message quotes."""
LINE_CHARACTERS = 200
"""Longer lines are cut (an event's message should stay under 1 KiB)."""
QUOTED_CHARACTERS = 300
"""Longer kubelet messages are cut."""
CRASH_LOOP_RESTARTS = 3
"""Restarts from which a container that failed again is in a crash loop, waiting in its back-off or running
once more. One failure and its restart is an ordinary event (a rank killed once, its peers restarted with
it); so is a second. The kubelet says ``CrashLoopBackOff`` from the first back-off on, so the reason alone
is not enough."""
HEALTHY_AFTER_SECONDS = 600.0
"""A container that has run this long since its last failure is healthy again (the kubelet resets its
crash back-off after ten minutes of running): its crash loop or OOM kill no longer shows."""
MASTER_WAIT_GRACE_SECONDS = 60.0
"""How long a worker may wait for its master before it is a finding: the master's pod starting, its
Service's DNS record appearing (CoreDNS caches answers up to 30 s) and the init container's next try."""

CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
OOM_REASON = "OOMKilled"
IMAGE_PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"})
"""A container's waiting reasons when its image cannot be had (the kubelet's; the local runner's too)."""

_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
_RESOURCE_GAP = re.compile(r"resource gap: map\[(.*?)\]\s*(?:\.|$)")
"""scheduler-plugins' coscheduling, when a PodGroup's minResources exceed what the nodes have free:
``resource gap: map[nvidia.com/gpu:{{1 0} {<nil>} 1 DecimalSI}]`` (a Go ResourceList printed with %v)."""
_GAP_RESOURCE = re.compile(r"(?:^|\s)([A-Za-z0-9./_-]+):\{")
_started_images = attrgetter("started_images")


@dataclass(frozen=True)
class Finding:
    """One failure mode found: a Warning event on the job, and the top of ``kubetrain describe``."""

    reason: str
    """The event's reason, e.g. ``GangDeadlock`` (one of ``REASONS``)."""
    message: str
    """Names the pods, the cause (the scheduler's or kubelet's words quoted) and the fix."""
    replicas: tuple[str, ...] = ()
    """Every pod concerned, by the name ``kubetrain logs`` and ``kubectl`` know it (``<job>-<type>-<i>``)."""


@dataclass(frozen=True)
class Diagnosis:
    findings: tuple[Finding, ...] = ()
    recheck_in: float | None = None
    """Seconds until a time-based finding may appear or go (a crash loop healing, a wait outlasting its
    grace) although nothing else changes: when the engine must look again."""


def diagnose(
    job: TrainingJob,
    framework: Framework[Any],
    replicas: Iterable[ObservedReplica],
    now: datetime,
    status: JobStatus | None = None,
    nodes: Sequence[ObservedNode] = (),
) -> Diagnosis:
    """The failure modes ``job`` shows at ``now``; ``status`` is its status as this reconcile leaves it
    (``job.status`` by default); ``nodes`` the nodes its replicas are on, where the substrate has nodes."""
    scene = _Scene.of(job, framework, replicas, now, job.status if status is None else status, nodes)
    findings = [
        *_scheduling(scene),
        *_crash_loops(scene),
        *_image_pulls(scene),
        *_oom_kills(scene),
        *_init_waiting_for_master(scene),
        *_digest_mismatches(scene),
        *_stalled(scene),
        *_lost_nodes(scene),
    ]
    recheck = None if scene.recheck_at is None else max((scene.recheck_at - now).total_seconds(), 0.0)
    return Diagnosis(tuple(findings), recheck)


def quoted_crash_loops(
    job: TrainingJob, framework: Framework[Any], replicas: Iterable[ObservedReplica], now: datetime
) -> list[tuple[ObservedReplica, ObservedContainer]]:
    """The containers whose last lines a ``CrashLoop`` finding would quote but that have none yet (no
    termination message, no lines read): what a substrate should read the previous run's log of. At most
    one per replica type, so a 5,000-worker crash loop costs one log read per restart, not 5,000. Asked on
    every reconcile: only replicas restarted often enough to loop are looked at."""
    restarted = [
        r
        for r in replicas
        if not r.steady and any(c.restart_count >= CRASH_LOOP_RESTARTS for c in r.containers)
    ]
    if not restarted:
        return []
    scene = _Scene.of(job, framework, restarted, now, job.status)
    return [
        (replica, container)
        for replica, container in (group[0] for group in _crash_loop_groups(scene).values())
        if not (container.last_message or container.last_lines)
    ]


# --- the scene: what every rule reads ---------------------------------------------------------------------


@dataclass
class _Scene:
    job: TrainingJob
    framework: Framework[Any]
    now: datetime
    status: JobStatus
    live: list[ObservedReplica]
    """Neither finished nor terminating nor ``steady``, in the spec's order of types, then by index."""
    failed: list[ObservedReplica]
    """Failed and not terminating (an OOM kill explains them)."""
    steady: list[ObservedReplica]
    """The ``steady`` replicas (live), in the order observed: read only for what every replica counts in."""
    observed: tuple[ObservedReplica, ...]
    lost: dict[str, ObservedNode] = field(default_factory=dict)
    """The lost nodes replicas that have not ended are on."""
    on_lost: dict[str, list[ObservedReplica]] = field(default_factory=dict)
    """By lost node, those replicas (live or terminating) in order."""
    recheck_at: datetime | None = None
    _names: dict[tuple[str, int], str] = field(default_factory=dict)
    _all_live: list[ObservedReplica] | None = None

    @classmethod
    def of(
        cls,
        job: TrainingJob,
        framework: Framework[Any],
        replicas: Iterable[ObservedReplica],
        now: datetime,
        status: JobStatus,
        nodes: Sequence[ObservedNode] = (),
    ) -> _Scene:
        replicas = tuple(replicas)
        live: list[ObservedReplica] = []
        failed: list[ObservedReplica] = []
        steady: list[ObservedReplica] = []
        lost = lost_nodes(tuple(nodes))
        on_lost: dict[str, list[ObservedReplica]] = {}
        for replica in replicas:
            if (
                lost
                and replica.node in lost
                and (replica.terminating or replica.phase not in (Phase.SUCCEEDED, Phase.FAILED))
            ):
                on_lost.setdefault(replica.node or "", []).append(replica)
            if replica.steady:
                steady.append(replica)
            elif replica.terminating:
                continue
            elif replica.phase is Phase.FAILED:
                failed.append(replica)
            elif replica.phase is not Phase.SUCCEEDED:
                live.append(replica)

        position = _position(job)
        on_lost = {node: sorted(group, key=position) for node, group in on_lost.items()}
        return cls(
            job,
            framework,
            now,
            status,
            sorted(live, key=position),
            sorted(failed, key=position),
            steady,
            replicas,
            {name: lost[name] for name in on_lost},
            on_lost,
        )

    @property
    def all_live(self) -> list[ObservedReplica]:
        """Every live replica, steady or not, in the spec's order of types, then by index (sorted when a rule
        needs them all: a finding is likely there)."""
        if self._all_live is None:
            live = (
                r
                for r in self.observed
                if not r.terminating and r.phase not in (Phase.SUCCEEDED, Phase.FAILED)
            )
            self._all_live = sorted(live, key=_position(self.job))
        return self._all_live

    def pod(self, replica: ObservedReplica) -> str:
        key = (replica.replica_type, replica.index)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = self.framework.pod_name(self.job, replica.replica_type, replica.index)
        return name

    def pods(self, replicas: Iterable[ObservedReplica]) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self.pod(r) for r in replicas))

    def look_again_at(self, at: datetime) -> None:
        if self.recheck_at is None or at < self.recheck_at:
            self.recheck_at = at

    def recently(self, since: datetime | None, seconds: float) -> bool:
        """``since`` is less than ``seconds`` ago (and then look again when it no longer is)."""
        if since is None:
            return False
        until = since + timedelta(seconds=seconds)
        if self.now < until:
            self.look_again_at(until)
            return True
        return False

    def field_of(self, replica_type: str, container: ObservedContainer) -> str | None:
        """The path of ``container`` in the replica's template (None for one the operator added)."""
        spec = self.job.replica_specs.get(replica_type)
        pod_spec = (spec.template.get("spec") if spec is not None else None) or {}
        key = "initContainers" if container.init else "containers"
        for position, declared in enumerate(pod_spec.get(key) or []):
            if isinstance(declared, dict) and declared.get("name") == container.name:
                return f"{self.job.replica_specs_path}.{replica_type}.template.spec.{key}[{position}]"
        return None


def _position(job: TrainingJob) -> Callable[[ObservedReplica], tuple[int, str, int]]:
    """The sort key of the spec's order of types, then the index."""
    order = {replica_type: position for position, replica_type in enumerate(job.replica_specs)}

    def position(replica: ObservedReplica) -> tuple[int, str, int]:
        return (order.get(replica.replica_type, len(order)), replica.replica_type, replica.index)

    return position


# --- the rules ------------------------------------------------------------------------------------------


def _lost_nodes(scene: _Scene) -> list[Finding]:
    """Pods on a node that stopped reporting, or that its administrator declared down: the node, its state,
    and when (or how) they are replaced."""
    timeout = fault_policy(scene.job).node_loss_timeout
    findings = []
    for name, group in scene.on_lost.items():
        node = scene.lost[name]
        pods = scene.pods(group)
        gone = "stopped reporting" if node.ready == "Unknown" else "is not ready"
        state = node_state(node)
        if node.out_of_service:
            outcome = (
                f"{_they(pods)} force-deleted and replaced: its administrator declared it down "
                f"({OUT_OF_SERVICE_TAINT})"
            )
            cause = f"on node {name}, which is {state}"
        else:
            cause = f"on node {name}, which {gone} ({state})"
            if timeout is not None and node.since is not None:
                due = node.since + timedelta(seconds=timeout)
                outcome = (
                    f"{_they(pods)} force-deleted and replaced on another node at "
                    f"{due.strftime('%Y-%m-%dT%H:%M:%SZ')} ({NODE_LOSS_TIMEOUT_ANNOTATION}: {timeout}) "
                    "unless it comes back first"
                )
            else:
                outcome = (
                    f"what runs there is lost until it comes back. Fix: bring node {name} back (its kubelet "
                    "and container runtime); if it is gone for good, delete it (kubectl delete node "
                    f"{name}) or taint it {OUT_OF_SERVICE_TAINT}=nodeshutdown:NoExecute, and its pods are "
                    f"replaced on another node; {NODE_LOSS_TIMEOUT_ANNOTATION} on the job does that after so "
                    "many seconds"
                )
        findings.append(Finding(NODE_LOST, f"{_names(pods)} {_be(pods)} {cause}: {outcome}", pods))
    return findings


def _scheduling(scene: _Scene) -> list[Finding]:
    """Pods the scheduler cannot place: a half-scheduled gang while others are placed (running, or bound and
    starting: workers waiting in their init container for an unplaced master), or none is placed for lack of
    resources."""
    unschedulable = [r for r in scene.live if r.phase is Phase.PENDING and r.unschedulable]
    if not unschedulable:
        return []
    cannot = _cannot_be_scheduled(scene, unschedulable)
    pods = scene.pods(unschedulable)
    if scene.steady or any(
        r.phase is Phase.RUNNING or (r.placed and not r.unschedulable) for r in scene.live
    ):
        if all(r.gang_scheduled for r in scene.all_live):
            return []  # a gang scheduler placed what minAvailable asks for: the rest is meant to wait
        return [
            Finding(
                GANG_DEADLOCK,
                f"{cannot} while the job's other pods were placed: without gang scheduling those wait at the "
                "rendezvous for the missing ones forever. Fix: gang scheduling (the operator's "
                "--gang-scheduler-name, with Volcano or scheduler-plugins' coscheduling) starts no pod until "
                "all of them fit; or ask for fewer replicas, or less for each, than the cluster has free",
                pods,
            )
        ]
    resources = list(dict.fromkeys(name for r in unschedulable for name in _lacking(r.unschedulable or "")))
    if not resources:
        return []  # not for lack of resources (a selector, a taint): upstream's per-pod warnings say so
    return [
        Finding(
            INSUFFICIENT_RESOURCES,
            f"{cannot} and none of the job's pods is placed yet. Fix: free or add {_and(resources)} on "
            "the nodes (kubectl describe nodes shows what is allocated), or ask for fewer replicas, or less "
            "for each",
            pods,
        )
    ]


def _lacking(message: str) -> list[str]:
    """The resources a scheduler's message says the nodes lack: kube-scheduler's ``Insufficient <name>``, a
    gang scheduler's ``resource gap`` (the pod count it adds to the gang's minResources is not one)."""
    names = [name.rstrip(".") for name in _INSUFFICIENT.findall(message)]
    for gap in _RESOURCE_GAP.findall(message):
        names += [name for name in _GAP_RESOURCE.findall(gap) if name != "pods"]
    return names


def _cannot_be_scheduled(scene: _Scene, replicas: Sequence[ObservedReplica]) -> str:
    """``pod a cannot be scheduled (<the scheduler's reason>)``, one clause per distinct reason."""
    by_reason: dict[str, list[ObservedReplica]] = {}
    for replica in replicas:
        by_reason.setdefault(_scheduler_reason(replica.unschedulable or ""), []).append(replica)
    clauses = [
        f"{_names(scene.pods(group))} cannot be scheduled ({reason})"
        for reason, group in list(by_reason.items())[:QUOTED_REASONS]
    ]
    others = sum(len(group) for group in list(by_reason.values())[QUOTED_REASONS:])
    if others:
        clauses.append(f"{others} more cannot be scheduled for other reasons")
    return "; ".join(clauses)


def _scheduler_reason(message: str) -> str:
    """The first sentence of kube-scheduler's message, its reasons per node: ``0/4 nodes are available: 4
    Insufficient nvidia.com/gpu`` of ``... nvidia.com/gpu. no new claims to deallocate, preemption: ...``."""
    reason = message.split(". ", 1)[0].strip()
    return _cut(reason.removesuffix("."), QUOTED_CHARACTERS)


def _crash_loops(scene: _Scene) -> list[Finding]:
    findings = []
    for group in _crash_loop_groups(scene).values():
        replica, container = group[0]
        pods = scene.pods(r for r, _ in group)
        of_pod = f" of {scene.pod(replica)}" if len(pods) > 1 else ""
        exit_code = container.last_exit_code
        ended = "" if exit_code is None else f" exited with code {exit_code}"
        if container.last_reason:
            ended += f" ({container.last_reason})"
        lines = _last_lines(container.last_message or container.last_lines or "")
        quoted = f'; its last lines: "{lines}"' if lines else ""
        findings.append(
            Finding(
                CRASH_LOOP,
                f"{_names(pods)} {_be(pods)} in a crash loop: container {container.name}{of_pod}{ended} "
                f"and is restarted again and again{quoted}. Fix: correct what its output shows (its log "
                "holds the whole run); runPolicy.backoffLimit bounds the restarts",
                pods,
            )
        )
    return findings


def _crash_loop_groups(scene: _Scene) -> dict[str, list[tuple[ObservedReplica, ObservedContainer]]]:
    """Per replica type, its crash-looping replicas with their looping container, in order."""
    groups: dict[str, list[tuple[ObservedReplica, ObservedContainer]]] = {}
    for replica in scene.live:
        for container in replica.containers:
            if _in_crash_loop(scene, container):
                groups.setdefault(replica.replica_type, []).append((replica, container))
                break
    return groups


def _in_crash_loop(scene: _Scene, container: ObservedContainer) -> bool:
    if container.last_reason == OOM_REASON:
        return False  # the OOM kill is the cause to name
    if container.restart_count < CRASH_LOOP_RESTARTS:
        return False
    if container.waiting_reason == CRASH_LOOP_BACK_OFF:
        return True
    # Between two back-offs it runs again for a while: still the same loop until it stays up.
    return container.last_exit_code not in (None, 0) and scene.recently(
        container.running_since, HEALTHY_AFTER_SECONDS
    )


def _image_pulls(scene: _Scene) -> list[Finding]:
    by_image: dict[str, list[tuple[ObservedReplica, ObservedContainer]]] = {}
    for replica in scene.live:
        for container in replica.containers:
            if container.waiting_reason in IMAGE_PULL_REASONS:
                by_image.setdefault(container.image, []).append((replica, container))
    findings = []
    for image, group in by_image.items():
        _, container = group[0]
        pods = scene.pods(r for r, _ in group)
        cause = container.waiting_reason or ""
        if container.waiting_message:
            cause += f": {_cut(container.waiting_message, QUOTED_CHARACTERS)}"
        findings.append(
            Finding(
                IMAGE_PULL_FAILED,
                f"{_names(pods)} cannot start: image {image} of container {container.name} cannot be "
                f"pulled ({cause}). Fix: correct the image's name or tag, make its registry reachable from "
                "the nodes (imagePullSecrets for a private one), or, with imagePullPolicy Never, load it "
                "onto the nodes",
                pods,
            )
        )
    return findings


def _oom_kills(scene: _Scene) -> list[Finding]:
    by_container: dict[tuple[str, str, str | None], list[tuple[ObservedReplica, ObservedContainer]]] = {}
    for replica in (*scene.live, *scene.failed):
        for container in replica.containers:
            if container.last_reason != OOM_REASON:
                continue
            running_again = container.running_since is not None
            if running_again and not scene.recently(container.running_since, HEALTHY_AFTER_SECONDS):
                continue
            key = (replica.replica_type, container.name, container.memory_limit)
            by_container.setdefault(key, []).append((replica, container))
    findings = []
    for (replica_type, name, limit), group in by_container.items():
        _, container = group[0]
        pods = scene.pods(r for r, _ in group)
        code = f", exit code {container.last_exit_code}" if container.last_exit_code is not None else ""
        path = scene.field_of(replica_type, container)
        where = f" ({path}.resources.limits.memory)" if path else ""
        if limit:
            cause = f"under its memory limit of {limit}"
            fix = f"raise container {name}'s memory limit{where} or make it use less (a smaller batch)"
        else:
            cause = "with no memory limit: the node ran out of memory"
            fix = (
                f"give container {name} a memory request and limit{where} that it fits in, so that it is "
                "placed where that much is free, or make it use less"
            )
        findings.append(
            Finding(
                OUT_OF_MEMORY,
                f"{_names(pods)}: container {name} was killed for running out of memory (OOMKilled{code}) "
                f"{cause}. Fix: {fix}",
                pods,
            )
        )
    return findings


def _init_waiting_for_master(scene: _Scene) -> list[Finding]:
    """Workers held by the operator's wait-for-master init container past the grace period."""
    job, framework = scene.job, scene.framework
    waiting_types = {t for t in job.replica_specs if framework.waits_for_master(job, t)}
    if not waiting_types:
        return []
    grace = MASTER_WAIT_GRACE_SECONDS
    master_key = next(
        ((t, 0) for t in job.replica_specs if framework.is_master_role(job, t, 0)),
        None,
    )
    if master_key is None:
        return []
    held: list[tuple[ObservedReplica, ObservedContainer, datetime]] = []
    user_init = {t: _declared_init_containers(job, t) for t in waiting_types}
    for replica in scene.live:  # a steady replica runs no init container
        if replica.replica_type not in waiting_types:
            continue
        container = next(
            (
                c
                for c in replica.containers
                if c.init and c.running_since is not None and c.name not in user_init[replica.replica_type]
            ),
            None,
        )
        if container is not None and container.running_since is not None:
            held.append((replica, container, container.running_since))
    if not held:
        return []
    master = next(
        (r for r in (*scene.all_live, *scene.failed) if (r.replica_type, r.index) == master_key),
        None,
    )
    master_ready_since = master.ready_since if master is not None and master.ready else None
    waiting: list[tuple[ObservedReplica, ObservedContainer]] = []
    for replica, container, since in held:
        if master_ready_since is not None:
            since = max(since, master_ready_since)
        if not scene.recently(since, grace):
            waiting.append((replica, container))
    if not waiting:
        return []
    pods = scene.pods(r for r, _ in waiting)
    container_name = waiting[0][1].name
    master_pod = framework.pod_name(job, *master_key)
    wait, them = ("wait", "them") if len(pods) > 1 else ("waits", "it")
    if master_ready_since is not None:
        message = (
            f"{_names(pods)} still {wait} in init container {container_name} for master {master_pod}, "
            f"which has been Ready for over {grace:.0f}s: its name does not resolve from {them}. Fix: check "
            "the cluster's DNS (CoreDNS) and the namespace's NetworkPolicies; nslookup "
            f"{master_pod} from a pod in the job's namespace must answer"
        )
    else:
        message = (
            f"{_names(pods)} {wait} in init container {container_name} for master {master_pod}, which "
            f"{_master_state(scene, master)}: workers start only once the master's name resolves. Fix: what "
            "keeps the master from being Ready (its pod's events and log); the workers follow it"
        )
    return [Finding(INIT_WAITING_FOR_MASTER, message, pods)]


def _declared_init_containers(job: TrainingJob, replica_type: str) -> frozenset[str]:
    """The template's own init containers: any other one was added by the operator."""
    pod_spec = job.replica_specs[replica_type].template.get("spec") or {}
    return frozenset(str(c.get("name")) for c in pod_spec.get("initContainers") or [] if isinstance(c, dict))


def _master_state(scene: _Scene, master: ObservedReplica | None) -> str:
    if master is None:
        return "does not exist"
    if master.phase is Phase.FAILED:
        return "has failed"
    if master.unschedulable:
        return f"cannot be scheduled ({_scheduler_reason(master.unschedulable)})"
    if master.phase is Phase.PENDING:
        return "is Pending"
    return "is not Ready"


def _digest_mismatches(scene: _Scene) -> list[Finding]:
    started: set[frozenset[tuple[str, str]]] = set(map(_started_images, scene.steady))  # a few, however many
    started.update(replica.started_images for replica in scene.live)
    digests: dict[str, set[str]] = {}
    for image, image_id in frozenset[tuple[str, str]]().union(*started):
        digests.setdefault(image, set()).add(_digest(image_id))
    if all(len(found) < 2 for found in digests.values()):
        return []  # one build of each image: the common case, found without naming anyone
    by_image: dict[str, dict[str, list[ObservedReplica]]] = {}
    for replica in scene.all_live:
        for container in replica.containers:
            if container.init or not container.image_id:
                continue
            runs = by_image.setdefault(container.image, {}).setdefault(_digest(container.image_id), [])
            if not runs or runs[-1] is not replica:
                runs.append(replica)
    findings = []
    for image, by_digest in by_image.items():
        if len(by_digest) < 2:
            continue
        builds = [f"{_short(digest)} on {_names(scene.pods(group))}" for digest, group in by_digest.items()]
        pods = scene.pods(r for group in by_digest.values() for r in group)
        findings.append(
            Finding(
                IMAGE_DIGEST_MISMATCH,
                f"pods run different builds of image {image}: {'; '.join(builds)}. Fix: pin the image by "
                f"digest ({_repository(image)}@sha256:...) or set imagePullPolicy Always, then restart the "
                "job so that every replica runs one build",
                pods,
            )
        )
    return findings


def _stalled(scene: _Scene) -> list[Finding]:
    stalled = scene.status.condition(ConditionType.STALLED)
    if stalled is None or not scene.status.is_true(ConditionType.STALLED):
        return []
    running = [r for r in scene.all_live if r.phase is Phase.RUNNING]
    return [Finding(PROGRESS_DEADLINE_EXCEEDED, stalled.message or "", scene.pods(running))]


# --- words ----------------------------------------------------------------------------------------------


def _names(pods: Sequence[str]) -> str:
    """``pod a``, ``pods a and b``, ``pods a, b, ... h and 12 more``."""
    if len(pods) == 1:
        return f"pod {pods[0]}"
    if len(pods) > NAMED_PODS:
        return f"pods {', '.join(pods[:NAMED_PODS])} and {len(pods) - NAMED_PODS} more"
    return f"pods {_and(pods)}"


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _be(pods: Sequence[str]) -> str:
    return "is" if len(pods) == 1 else "are"


def _they(pods: Sequence[str]) -> str:
    return "it is" if len(pods) == 1 else "they are"


def _cut(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _last_lines(output: str) -> str:
    """The last non-blank lines of ``output``, each cut to a readable length, joined by `` | ``."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return " | ".join(_cut(line, LINE_CHARACTERS) for line in lines[-LAST_LINES:])


def _digest(image_id: str) -> str:
    """``sha256:…`` from an ``imageID`` (``docker.io/library/x@sha256:…``, ``sha256:…``)."""
    return image_id.rpartition("@")[2]


def _short(digest: str) -> str:
    algorithm, _, value = digest.rpartition(":")
    return f"{algorithm}:{value[:12]}" if algorithm else value[:12]


def _repository(image: str) -> str:
    """``registry/name`` of ``registry/name:tag`` (a port's colon is not a tag's)."""
    name = image.split("@", 1)[0]
    last_slash = name.rfind("/")
    colon = name.rfind(":")
    return name[:colon] if colon > last_slash else name
