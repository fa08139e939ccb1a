"""The conformance tier's machinery: phases of cases under one operator, their comparison, the totals.

A module's cases run in two phases on the session's envtest: under the peer (with the peer's CRDs), then under
kubetrain (with kubetrain's CRDs, as a user who switches applies them). In each phase one operator watches a
fresh namespace and the selected cases run ``KUBETRAIN_PEERS_CONCURRENCY`` at once (default 4: most of a case
is waiting for the operator to settle), never two jobs of one name at once. A side's outcomes are kept for
the session, so the status endpoint's pass reuses kubetrain's. Then each case's two snapshots are compared
and the allow-list of docs/migration.md applied; each test asserts on its own case.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.conformance import AllowList, Comparison, Difference, parse_allow_list
from kubetrain.envtest.crds import CRD_PATH, install_crd_files, read_crds
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.nodes import NodeShape, fake_node
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster

from .peer_runner import (
    Case,
    KubetrainOperator,
    Outcome,
    Side,
    compare_outcomes,
    create_namespace,
    metrics_all_zero,
    run_on,
)

ROOT = Path(__file__).resolve().parents[2]
MIGRATION = ROOT / "docs" / "migration.md"
ALLOW_LIST_HEADING = "### The allow-list"
KUBETRAIN_CRDS = ROOT / "manifests" / "crds"
KUBETRAIN_MPIJOB_V1_CRD = ROOT / "manifests" / "crds-mpijob-v1" / "kubeflow.org_mpijobs.yaml"
CONCURRENCY = int(os.environ.get("KUBETRAIN_PEERS_CONCURRENCY", "4"))
RUN_TIMEOUT = 1800
"""pytest-timeout for a module's first test, whose setup runs all of the module's cases."""
PEERS_NODE = "envtest-peers-node"
"""A fake node with room for every case's pods at once, so no pod waits for another case's to go."""


class Running(Protocol):
    def idle(self) -> bool: ...

    def activity(self, namespace: str, name: str) -> int: ...

    def events_recorded(self, uid: str) -> int | None: ...

    def stop(self) -> None: ...


TRAINING_OPERATOR_THREADS = 8
"""Workers per kind for upstream (``--controller-threads``; 1 by default): cases run several at once, and one
job's reconciles are one at a time whatever the number, so what each does is the same, sooner."""
MPI_OPERATOR_THREADS = 8
"""The mpi-operator's ``--threadiness`` (2 by default), for the same reason."""


@dataclass
class LogTally:
    """Counts of the keys ``pattern`` captures in a growing log, read as it grows."""

    path: Path
    pattern: re.Pattern[str]
    _read: int = 0
    _counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def count(self, key: str) -> int:
        with self._lock:
            with self.path.open("rb") as log:
                log.seek(self._read)
                new = log.read()
            complete = new.rfind(b"\n") + 1
            self._read += complete
            for found in self.pattern.findall(new[:complete].decode(errors="replace")):
                self._counts[found] += 1
            return self._counts[key]


@dataclass
class TrainingOperator:
    """Upstream's training-operator: idle when its work queues are empty and no worker is busy; its log
    has every event it records (client-go's recorder logs each before its spam filter may drop it)."""

    process: peers.PeerProcess
    metrics_port: int
    recorded: LogTally = field(init=False)

    def __post_init__(self) -> None:
        self.recorded = LogTally(self.process.log_path, re.compile(r'\tevents\t.*"uid":"([0-9a-f-]+)"'))

    def idle(self) -> bool:
        return metrics_all_zero(self.metrics_port, ("workqueue_depth{", "controller_runtime_active_workers{"))

    def activity(self, namespace: str, name: str) -> int:
        return 0

    def events_recorded(self, uid: str) -> int | None:
        return self.recorded.count(uid)

    def stop(self) -> None:
        self.process.stop()


@dataclass
class MpiOperator:
    """The mpi-operator, which publishes no work-queue metrics: its log counts each job's finished syncs, and
    every event it records."""

    process: peers.PeerProcess
    syncs: LogTally = field(init=False)
    recorded: LogTally = field(init=False)

    def __post_init__(self) -> None:
        self.syncs = LogTally(self.process.log_path, re.compile(r'Finished syncing job "([^"]+)"'))
        self.recorded = LogTally(
            self.process.log_path, re.compile(r'Event\(v1\.ObjectReference\{.*UID:"([0-9a-f-]+)"')
        )

    def idle(self) -> bool:
        return True

    def activity(self, namespace: str, name: str) -> int:
        return self.syncs.count(f"{namespace}/{name}")

    def events_recorded(self, uid: str) -> int | None:
        return self.recorded.count(uid)

    def stop(self) -> None:
        self.process.stop()


TRAINER_STOP_SECONDS = 5.0


@dataclass
class Trainer:
    """Kubeflow Trainer's controller manager: idle when its work queues are empty and no worker is busy. It
    reconciles the TrainJobs of every namespace, so no other TrainJob controller may run while it does."""

    process: peers.PeerProcess
    metrics_port: int

    def idle(self) -> bool:
        return metrics_all_zero(self.metrics_port, ("workqueue_depth{", "controller_runtime_active_workers{"))

    def activity(self, namespace: str, name: str) -> int:
        return 0

    def events_recorded(self, uid: str) -> int | None:
        return None  # its event recorder logs nothing per event

    def stop(self) -> None:
        # With TrainJobStatus on, v2.3.0 never finishes a graceful shutdown by itself: its status server's
        # Start waits on a channel nothing closes (pkg/statusserver/server.go), so the manager waits out its
        # 30-s graceful-shutdown timeout. Nothing is lost by ending it sooner.
        self.process.stop(timeout=TRAINER_STOP_SECONDS)


StartOperator = Callable[[str, Path], Running]
"""``start(namespace, log)``: an operator watching ``namespace``, ready."""


@dataclass(frozen=True)
class Phase:
    """One operator and the CRDs it ships."""

    side: str
    """Its name in snapshots and the allow-list: a peer's, ``kubetrain``, ``kubetrain+endpoint``,
    ``kubetrain-trainjobs``. Outcomes are kept per side and case name for the session (a module reuses
    another's run of the same case): a side runs one configuration of its operator."""
    crds: tuple[Path, ...]
    start: StartOperator

    @property
    def is_peer(self) -> bool:
        return not self.side.startswith("kubetrain")


@dataclass
class Totals:
    """What the whole tier compared."""

    cases: int = 0
    objects: int = 0
    fields: int = 0
    allowed: int = 0
    remaining: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, comparison: Comparison, remaining: int) -> None:
        with self.lock:
            self.cases += 1
            self.objects += comparison.objects
            self.fields += comparison.fields
            self.allowed += len(comparison.differences) - remaining
            self.remaining += remaining


TOTALS = Totals()
"""Over the session, for the closing summary."""
OUTCOMES: dict[tuple[str, str], Outcome] = {}
"""(side, case) → what that side made of the case, this session."""
RUN_SECONDS: dict[tuple[str, str], float] = {}
"""(side, case) → how long that side took to run the case: the summary names the slowest."""
SLOWEST_SHOWN = 8
RUN_AGAIN: list[str] = []
"""Each case run a second time after waiting out an await, with its side and what it waited for."""
OPERATOR_LOGS: dict[tuple[str, str], Path] = {}
"""(side, case) → the log of the operator that ran it: a failing case quotes what it said about the job."""
LOG_LINES_QUOTED = 25


def load_allow_list() -> AllowList:
    return AllowList(parse_allow_list(MIGRATION.read_text(), ALLOW_LIST_HEADING))


def summary(allow_list: AllowList) -> list[str]:
    """The allow-list as applied, and what the session compared."""
    slowest = sorted(RUN_SECONDS.items(), key=lambda item: item[1], reverse=True)[:SLOWEST_SHOWN]
    return [
        "differences allowed | peer | case | object | field: why",
        *allow_list.report(),
        f"compared {TOTALS.cases} cases: {TOTALS.objects} objects, {TOTALS.fields} fields; "
        f"{TOTALS.allowed} differences allowed, {TOTALS.remaining} not",
        "slowest runs: "
        + ", ".join(f"{case} under {side} {seconds:.0f} s" for (side, case), seconds in slowest),
        "run again after waiting out an await: " + (", ".join(RUN_AGAIN) or "none"),
    ]


# --- the envtest -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    envtest: EnvtestCluster
    api: KubeApi
    driver: PodDriver
    logs: Path


def ensure_roomy_node(api: KubeApi) -> None:
    """Room for every case's pods (GPUs and ephemeral storage too: some ask for them), once per envtest."""
    shape = NodeShape(cpu="1000", memory="4Ti", pods=5000, gpus=256, ephemeral_storage="10Ti")
    if api.get_or_none(f"/api/v1/nodes/{PEERS_NODE}") is None:
        api.create("/api/v1/nodes", fake_node(PEERS_NODE, 200, shape, peers.kubernetes_version(api)))
    else:
        room = shape.capacity()
        api.patch(f"/api/v1/nodes/{PEERS_NODE}/status", {"status": {"capacity": room, "allocatable": room}})


def _versions(crd: dict[str, object]) -> set[str]:
    spec = crd["spec"]
    assert isinstance(spec, dict)
    return {str(v["name"]) for v in spec["versions"]}


def replace_crds(api: KubeApi, files: Sequence[Path], timeout: float = 60) -> None:
    """Serve exactly these CRDs' versions: one that serves other versions under the same name (the v1 and
    v2beta1 MPIJob) is deleted first, with its objects, as a CRD cannot drop a version it has stored."""
    for crd in read_crds(files):
        name = crd["metadata"]["name"]
        current = api.get_or_none(f"{CRD_PATH}/{name}")
        if current is None or _versions(current) == _versions(crd):
            continue
        api.delete(f"{CRD_PATH}/{name}")
        deadline = time.monotonic() + timeout
        while api.get_or_none(f"{CRD_PATH}/{name}") is not None:
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {name} not deleted within {timeout:.0f} s")
            time.sleep(0.2)
    install_crd_files(api, files)


# --- phases ------------------------------------------------------------------------------------------------


@contextmanager
def running(cluster: Cluster, phase: Phase) -> Iterator[tuple[str, Running, Path]]:
    """The phase's CRDs installed and its operator watching a fresh namespace; stopped and the namespace
    deleted afterwards."""
    replace_crds(cluster.api, phase.crds)
    namespace = create_namespace(cluster.api, f"{phase.side.replace('+', '-')}-{secrets.token_hex(3)}")
    cluster.logs.mkdir(parents=True, exist_ok=True)
    log = cluster.logs / f"{phase.side}-{namespace}.log"
    operator = phase.start(namespace, log)
    try:
        yield namespace, operator, log
    finally:
        operator.stop()
        try:
            cluster.api.delete(f"/api/v1/namespaces/{namespace}")
        except ApiError as error:
            if error.code != 404:
                raise


def run_phase(cluster: Cluster, phase: Phase, cases: Sequence[Case]) -> dict[str, Outcome]:
    """Every case not yet run on this side, run under the phase's operator; all of them returned.

    A case that waited out an await on either side (its job never got the condition, or its TTL never
    deleted it) is run once more under a fresh operator and namespace, and the summary names it: the
    mpi-operator's side of ``mpi-ttl`` once saw its launcher Job never complete, in two CI runs in a row, and
    a warm CI run saw kubetrain's launcher Job of the same case wait out its await, where both had
    finished in seconds in every run before. The second run's outcome is the one compared, so a case that
    wedges twice still fails.
    """
    todo = [case for case in cases if (phase.side, case.name) not in OUTCOMES]
    if todo:
        _run_cases(cluster, phase, todo)
    again = [case for case in todo if OUTCOMES[(phase.side, case.name)].waited_out]
    for case in again:
        RUN_AGAIN.append(
            f"{case.name} under {phase.side} ({'; '.join(OUTCOMES[(phase.side, case.name)].waited_out)})"
        )
    if again:
        _run_cases(cluster, phase, again)
    return {case.name: OUTCOMES[(phase.side, case.name)] for case in cases}


def _run_cases(cluster: Cluster, phase: Phase, todo: Sequence[Case]) -> None:
    names = Counter(case.manifest["metadata"]["name"] for case in todo)
    if todo:
        with running(cluster, phase) as (namespace, operator, log):
            busy: set[str] = set()
            condition = threading.Condition()

            def one(case: Case) -> None:
                job = case.manifest["metadata"]["name"]
                with condition:
                    condition.wait_for(lambda: job not in busy)
                    busy.add(job)
                try:
                    side = Side(
                        phase.side,
                        cluster.api,
                        cluster.driver,
                        namespace,
                        idle=operator.idle,
                        activity=operator.activity,
                        events_recorded=operator.events_recorded,
                    )
                    started = time.monotonic()
                    OUTCOMES[(phase.side, case.name)] = run_on(case, side, clean_up_after=names[job] > 1)
                    RUN_SECONDS[(phase.side, case.name)] = time.monotonic() - started
                    OPERATOR_LOGS[(phase.side, case.name)] = log
                finally:
                    with condition:
                        busy.discard(job)
                        condition.notify_all()

            with ThreadPoolExecutor(CONCURRENCY) as pool:
                for future in [pool.submit(one, case) for case in todo]:
                    future.result()


@dataclass
class Conformance:
    comparison: Comparison
    remaining: list[Difference]
    logs: dict[str, Path] = field(default_factory=dict)
    """Side → its operator's log."""


def compare_phases(
    cluster: Cluster, allow_list: AllowList, reference: Phase, candidate: Phase, cases: Sequence[Case]
) -> dict[str, Conformance]:
    """Each case under ``reference`` (a peer) and under ``candidate`` (kubetrain), compared; the allow-list's
    rows for ``reference.side`` applied."""
    before = run_phase(cluster, reference, cases)
    after = run_phase(cluster, candidate, cases)
    results = {}
    for case in cases:
        comparison = compare_outcomes(
            case.name, before[case.name], after[case.name], peer_drops_events=reference.is_peer
        )
        remaining = allow_list.apply(reference.side, comparison.differences)
        TOTALS.add(comparison, len(remaining))
        logs = {
            phase.side: OPERATOR_LOGS[(phase.side, case.name)]
            for phase in (reference, candidate)
            if (phase.side, case.name) in OPERATOR_LOGS
        }
        if cluster.envtest.run_dir is not None:
            # The Job, garbage and TTL controllers act for both sides (a launcher Job's completion).
            logs["kube-controller-manager"] = cluster.envtest.run_dir / "logs" / "kube-controller-manager.log"
        results[case.name] = Conformance(comparison, remaining, logs)
    return results


def module_results(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    allow_list: AllowList,
    peer: Phase,
    candidate: Phase,
    cases: Sequence[Case],
) -> dict[str, Conformance]:
    """The requesting module's selected cases under ``peer`` and under ``candidate``, compared."""
    return compare_phases(cluster, allow_list, peer, candidate, selected_cases(request, cases))


def selected_cases(request: pytest.FixtureRequest, cases: Sequence[Case]) -> list[Case]:
    """The cases of the requesting module whose tests this session runs (all of them, or a ``-k`` choice)."""
    module = request.module
    chosen = {
        item.callspec.params["case"].name
        for item in request.session.items
        if getattr(item, "module", None) is module
        and hasattr(item, "callspec")
        and "case" in item.callspec.params
    }
    return [case for case in cases if case.name in chosen]


def assert_conforms(results: dict[str, Conformance], case: Case, against: str) -> None:
    result = results[case.name]
    assert result.comparison.objects > 0
    assert not result.remaining, (
        f"{case.name}: {len(result.remaining)} differences from {against} that docs/migration.md does not "
        "allow:\n" + "\n".join(f"  {d}" for d in result.remaining) + _quoted_logs(result, case)
    )


def _quoted_logs(result: Conformance, case: Case) -> str:
    """The last lines each side's operator (and the controller manager) logged about the case's job: a side
    that stopped short of a state (a peer's job never ``Succeeded`` in one CI run) says why there, and CI
    keeps only the test's output."""
    job = case.manifest["metadata"]["name"]
    quoted = []
    for side, path in result.logs.items():
        if not path.exists():
            continue
        lines = [line[:400] for line in path.read_text(errors="replace").splitlines() if job in line]
        quoted.append(f"\n--- {side} on {job} (last {LOG_LINES_QUOTED} of {len(lines)} lines)")
        quoted += lines[-LOG_LINES_QUOTED:]
    return "\n".join(quoted)


# --- the operators -----------------------------------------------------------------------------------------


def training_operator(cluster: Cluster, schemes: Sequence[str]) -> StartOperator:
    def start(namespace: str, log: Path) -> Running:
        port = peers.free_port()
        threads = ["--controller-threads", str(TRAINING_OPERATOR_THREADS)]
        process = peers.start_training_operator(
            cluster.api, cluster.envtest.kubeconfig, namespace, log, schemes, threads, metrics_port=port
        )
        return TrainingOperator(process, port)

    return start


def mpi_operator(cluster: Cluster) -> StartOperator:
    def start(namespace: str, log: Path) -> Running:
        threads = ["--threadiness", str(MPI_OPERATOR_THREADS)]
        return MpiOperator(
            peers.start_mpi_operator(cluster.api, cluster.envtest.kubeconfig, namespace, log, threads)
        )

    return start


def trainer(
    cluster: Cluster, feature_gates: Mapping[str, bool] = peers.TRAINER_FEATURE_GATES
) -> StartOperator:
    """Kubeflow Trainer with ``feature_gates``, its webhooks serving the phase's namespace."""

    def start(namespace: str, log: Path) -> Running:
        port = peers.free_port()
        process = peers.start_trainer(
            cluster.api, cluster.envtest.kubeconfig, namespace, log, feature_gates, metrics_port=port
        )
        return Trainer(process, port)

    return start


def trainer_crds() -> tuple[Path, ...]:
    """Trainer's three CRDs as the release ships them (``manifests/base/crds``; the same documents as the
    Helm chart's ``templates/crd``)."""
    return tuple(sorted(peers.TRAINER.crds_dir().glob("trainer.kubeflow.org_*.yaml")))


def kubetrain(cluster: Cluster, flags: Sequence[str], endpoint: bool = False) -> StartOperator:
    """``kubetrain operator`` with ``flags``; its status endpoint off, or on 127.0.0.1 (``endpoint``)."""

    def start(namespace: str, log: Path) -> Running:
        if endpoint:
            port = peers.free_port()
            served = ["--status-server-bind-address", f"127.0.0.1:{port}"]
            served += [
                "--status-server-url",
                f"https://127.0.0.1:{port}",
                "--status-server-namespace",
                namespace,
            ]
        else:
            served = ["--status-server-bind-address=0"]
        return KubetrainOperator(cluster.envtest.kubeconfig, namespace, log, [*flags, *served])

    return start
