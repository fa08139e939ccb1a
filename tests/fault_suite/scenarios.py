"""The faults, each injected at random points of a burst, and the report of what followed.

Random points are shares of the burst's pods and services already created, drawn from a seeded generator
(the report gives the seed). Times are the API server's: when the operator's work next reached it after the
fault (``resumed``), and when every job was Running (``converged``).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from kubetrain.envtest.audit import AuditEvent
from waiting import PATIENCE

from . import audit_checks
from .audit_checks import UnfencedWrite
from .burst import Burst, FaultCluster, now, seconds_between
from .mirror import wait_for
from .replicas import LEASE_NAME, Replica, Replicas

KILLS = 5
API_SERVER_DOWN_SECONDS = 5.0
PAST_THE_LEASE_SECONDS = 5.0
"""How long a paused leader stays paused after its successor took over."""


@dataclass(frozen=True)
class Fault:
    """One injection: when, what, and whose writes count as the operator acting again."""

    at: datetime
    what: str
    successor_of: str = ""
    """A replica that lost the Lease: only another's writes show the operator back at work."""
    replaced: bool = False
    """The replica at work was killed: only a replica that had written nothing before the fault shows the
    operator back at work (a write the killed one had sent may still land just after it)."""
    resumed: datetime | None = None
    """When the paused replica ``successor_of`` was sent SIGCONT (``audit_checks.sent_at_resume``)."""


@dataclass
class Report:
    name: str
    jobs: int
    seed: int
    faults: list[Fault] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """What happened that the numbers do not say (exit codes, 410s seen)."""
    resumed: list[float] = field(default_factory=list)
    """Per fault: seconds from it to the operator's next successful write."""
    converged: float = 0.0
    """Seconds from the last fault to every job Running."""
    burst: float = 0.0
    """Seconds from applying the jobs to every job Running."""
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    created_twice: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    unfenced: list[UnfencedWrite] = field(default_factory=list)
    writes: int = 0
    replicas: int = 0
    holders: int = 0
    """Distinct Lease holders over the scenario (0 without leader election)."""
    pods: int = 0
    services: int = 0
    relists: int = 0
    """Watches answered 410 Gone (the replicas' logs)."""
    exits: list[str] = field(default_factory=list)
    """Replicas that exited during the burst (and were replaced), with their codes."""
    resumed_leader_exit: int | None = None
    """The exit code of a leader that was paused past its Lease, once resumed."""

    @property
    def problems(self) -> list[str]:
        return [
            *(f"missing: {item}" for item in self.missing),
            *(f"extra: {item}" for item in self.extra),
            *(f"created more than once: {item}" for item in self.created_twice),
            *(f"deleted: {item}" for item in self.deleted),
            *(f"unfenced: {item}" for item in self.unfenced),
        ]


Inject = Callable[[Burst, Replicas, random.Random, Report], None]


def run(
    cluster: FaultCluster,
    name: str,
    jobs: int,
    seed: int,
    log_dir: Path,
    *,
    leader_elect: bool,
    replicas: int,
    inject: Inject,
) -> Report:
    """Start ``replicas`` operators, apply the burst, ``inject`` faults while it runs, wait until every job
    is Running and read back what the API server recorded."""
    rng = random.Random(seed)
    report = Report(name, jobs, seed)
    with Burst(cluster, name, jobs) as burst:
        group = Replicas(cluster.kubeconfig, burst.namespace, log_dir, leader_elect, desired=replicas)
        try:
            group.start()
            _wait_ready(group, leader_elect)
            burst.apply()
            assert burst.applied_at is not None
            inject(burst, group, rng, report)
            burst.applied()
            converged_at = burst.wait_all_running(timeout=180 + jobs)
            report.relists = group.log_mentions(RELISTED)
        finally:
            group.stop_all()
        settled = burst.settled()
        events = cluster.audit(burst.namespace)
        _account(report, burst.applied_at, converged_at, events, group)
        report.missing, report.extra = settled.missing, settled.extra
        report.pods, report.services = settled.pods, settled.services
    return report


def _wait_ready(group: Replicas, leader_elect: bool) -> None:
    def ready() -> bool:
        logs = [replica.log for replica in group.started]
        synced = all("caches synced" in log for log in logs)
        return synced and (not leader_elect or any("became leader" in log for log in logs))

    wait_for(ready, "the operators' caches synced (and a leader elected)")


def _account(
    report: Report, applied_at: datetime, converged_at: datetime, events: list[AuditEvent], group: Replicas
) -> None:
    writes = audit_checks.operator_writes(events, LEASE_NAME)
    history = audit_checks.lease_history(events, LEASE_NAME)
    report.writes = len(writes)
    report.replicas = len(group.started)
    report.exits = [f"{exit.replica} exited {exit.code}" for exit in group.exits]
    report.burst = seconds_between(applied_at, converged_at)
    last = report.faults[-1].at if report.faults else applied_at
    report.converged = seconds_between(last, converged_at)
    for fault in report.faults:
        gone = {fault.successor_of} if fault.successor_of else set()
        if fault.replaced:
            gone |= {write.identity for write in writes if write.event.received <= fault.at}
        resumed = audit_checks.first_write_after(writes, fault.at, other_than=gone)
        report.resumed.append(seconds_between(fault.at, resumed) if resumed else float("nan"))
    for resource in ("pods", "services"):
        created = audit_checks.successful_creations(events, resource)
        report.created_twice += [f"{resource}/{name} x{n}" for name, n in created.items() if n > 1]
        report.deleted += [
            f"{resource}/{name}" for name in audit_checks.successful_deletions(events, resource)
        ]
    if history:
        report.unfenced = audit_checks.unfenced_writes(writes, history)
        for fault in report.faults:
            if fault.resumed is not None:
                report.unfenced, excused = audit_checks.sent_at_resume(
                    report.unfenced, fault.successor_of, fault.resumed
                )
                if excused is not None:
                    report.notes.append(
                        f"in its fence-to-socket step when paused, sent at its resume: {excused}"
                    )
        report.holders = len({holder for holder, _ in audit_checks.tenures(history) if holder})


def _leader(group: Replicas, cluster: FaultCluster, namespace: str) -> Replica:
    return group.holding(wait_for(lambda: _holder(cluster, namespace), "a Lease holder"))


def _holder(cluster: FaultCluster, namespace: str) -> str:
    lease = cluster.api.get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE_NAME}")
    return str(lease["spec"].get("holderIdentity") or "")


def _points(rng: random.Random, count: int, low: float, high: float) -> list[float]:
    return sorted(rng.uniform(low, high) for _ in range(count))


# --- the faults ---------------------------------------------------------------------------------------


def no_fault(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """The baseline: the same burst with nothing done to it."""


def kills(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """kill -9 the operator at ``KILLS`` random points and start it again at once, as a Deployment would."""
    for share in _points(rng, KILLS, 0.05, 0.95):
        burst.wait_created(share, timeout=300)
        (current,) = wait_for(group.running, "the operator restarted")
        # Each kill lands on an operator at work, not on the previous kill's replacement still starting.
        wait_for(lambda: "caches synced" in current.log, "the restarted operator synced")  # noqa: B023
        share = burst.created()
        current.kill()
        report.faults.append(Fault(now(), f"SIGKILL at {share:.0%} created", replaced=True))


def api_server_restart(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """The API server killed (SIGKILL) mid-burst and started again ``API_SERVER_DOWN_SECONDS`` later."""
    burst.wait_created(rng.uniform(0.3, 0.7), timeout=300)
    share = burst.created()
    burst.cluster.crash_apiserver()
    report.faults.append(Fault(now(), f"kube-apiserver SIGKILL at {share:.0%} created"))
    time.sleep(API_SERVER_DOWN_SECONDS)
    burst.cluster.start_apiserver()
    # Whether a watch resumed against the new API server is answered 410 depends on what was written while
    # it was down (its watch cache starts at etcd's head); the relists are counted, not required.


def compaction(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """etcd compacted to its head while the API server is down: the operator's watches resume at versions
    the new API server no longer serves, get 410 Gone, and re-list."""
    burst.wait_created(rng.uniform(0.3, 0.7), timeout=300)
    share = burst.created()
    burst.cluster.crash_apiserver()
    report.faults.append(Fault(now(), f"kube-apiserver SIGKILL at {share:.0%} created, etcd compacted"))
    revision = burst.cluster.compact_etcd()
    report.notes.append(f"etcd compacted at revision {revision}")
    burst.cluster.start_apiserver()
    _wait_for_a_relist(group)


RELISTED = "resourceVersion expired (410), re-listing"
"""What the operator's reflector logs when a watch is answered 410 Gone."""


def _wait_for_a_relist(group: Replicas) -> None:
    """Compaction guarantees a 410 to a watch resumed from before it: the proof that the fault happened."""
    # The watches resume once the API server is back, after their backoff (up to a few seconds).
    wait_for(lambda: group.log_mentions(RELISTED) > 0, "a watch answered 410 Gone")


def leader_loss(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """Two replicas: the leader killed (SIGKILL) at one point, the next leader's pod deleted (SIGTERM) at
    another; a replacement started each time, as the Deployment would."""
    first, second = rng.uniform(0.15, 0.45), rng.uniform(0.55, 0.85)
    for share, how in ((first, "SIGKILL"), (second, "SIGTERM")):
        burst.wait_created(share, timeout=300)
        leader = _leader(group, burst.cluster, burst.namespace)
        identity = leader.identity() or ""
        created, at = burst.created(), now()
        if how == "SIGKILL":
            leader.kill()
        else:
            code = leader.terminate()  # returns once it has exited, seconds after the signal
            report.notes.append(f"the SIGTERMed leader released the Lease and exited {code}")
        report.faults.append(Fault(at, f"leader {how} at {created:.0%} created", successor_of=identity))
        _wait_for_successor(burst, identity)


def _wait_for_successor(burst: Burst, identity: str) -> None:
    wait_for(
        lambda: _holder(burst.cluster, burst.namespace) not in ("", identity),
        "another replica taking the Lease",
    )


def paused_leader(burst: Burst, group: Replicas, rng: random.Random, report: Report) -> None:
    """Two replicas: the leader SIGSTOPped until the other has taken the Lease and
    ``PAST_THE_LEASE_SECONDS`` more, then SIGCONTed. It must write nothing of its own after resuming: its
    fence refuses what it had queued, and it stops (exit 1), as a replica that lost its Lease does. The one
    write that may have been between its fence and the socket at the pause is the exception
    (``audit_checks.sent_at_resume``)."""
    burst.wait_created(rng.uniform(0.2, 0.6), timeout=300)
    leader = _leader(group, burst.cluster, burst.namespace)
    identity = leader.identity() or ""
    created = burst.created()
    leader.pause()
    stopped = now()
    _wait_for_successor(burst, identity)
    time.sleep(PAST_THE_LEASE_SECONDS)
    resuming = now()  # before the signal: the replica may write before the line after it runs
    leader.resume()
    what = f"leader SIGSTOP at {created:.0%} created"
    report.faults.append(Fault(stopped, what, successor_of=identity, resumed=resuming))
    resumed = time.monotonic()
    code = report.resumed_leader_exit = leader.process.wait(PATIENCE)
    report.notes.append(
        f"paused {seconds_between(stopped, now()):.0f} s; once resumed it exited {code} "
        f"after {time.monotonic() - resumed:.1f} s"
    )


SCENARIOS: dict[str, tuple[str, bool, int, Inject]] = {
    # name: (what, leader election, replicas, fault)
    "baseline": ("no fault", True, 1, no_fault),
    "kills": (f"kill -9 the operator at {KILLS} random points, restarted at once", False, 1, kills),
    "apiserver": ("kube-apiserver SIGKILL, back 5 s later", True, 1, api_server_restart),
    "compaction": ("etcd compacted while kube-apiserver is down: 410 Gone", True, 1, compaction),
    "leader-loss": ("2 replicas: leader SIGKILL, then leader SIGTERM", True, 2, leader_loss),
    "paused-leader": ("2 replicas: leader SIGSTOP past its Lease, then SIGCONT", True, 2, paused_leader),
}


def run_scenario(cluster: FaultCluster, name: str, jobs: int, seed: int, log_dir: Path) -> Report:
    _, leader_elect, replicas, inject = SCENARIOS[name]
    return run(
        cluster, name, jobs, seed, log_dir, leader_elect=leader_elect, replicas=replicas, inject=inject
    )
