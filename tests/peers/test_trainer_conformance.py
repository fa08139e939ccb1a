"""TrainJob under Kubeflow Trainer v2.3.0 and under kubetrain, both on the real JobSet v0.12.0 controller:
every built-in runtime, the release's example TrainJobs, and per runtime kind a success, a failure, suspend
and resume, a deadline and runtime patches; initializers, MPI with its launcher apart, a coscheduling
PodGroup; compared object for object (trainer_cases.py).

Trainer reconciles the TrainJobs of every namespace and cannot be told to leave some to another controller
(its ``managedBy`` check skips only other values, and the CRD allows only its own and MultiKueue's), so the
two sides never overlap: every case runs under Trainer (one start, its CRDs, the release's runtimes), Trainer
stops, then every case runs under kubetrain (its CRDs; the release's runtimes deleted, so that it installs
its own). Trainer runs at the release's defaults, its TrainJobStatus gate (alpha) off, and kubetrain with its
status endpoint off: their pods must then be the same. kubetrain's default, the endpoint on, is compared too,
on a torch and an MPI TrainJob: what the endpoint adds is all that differs (docs/migration.md says why the
gate is not compared on)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.envtest import binaries, coscheduler, peers
from kubetrain.envtest.conformance import AllowList
from kubetrain.envtest.pytest_plugin import EnvtestCluster

from .peer_runner import Case
from .peer_suite import (
    KUBETRAIN_CRDS,
    RUN_TIMEOUT,
    Cluster,
    Conformance,
    Phase,
    Running,
    StartOperator,
    assert_conforms,
    compare_phases,
    kubetrain,
    run_phase,
    selected_cases,
    trainer,
    trainer_crds,
)
from .trainer_cases import BUILT_IN, CASES, ENDPOINT_CASES

pytestmark = pytest.mark.peers

CLUSTER_RUNTIMES = "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes"
RUNTIMES_TIMEOUT = 60.0


def gang_crds() -> tuple[Path, ...]:
    """scheduler-plugins' PodGroup (and the ElasticQuota its controller needs), which both operators find at
    their start to plan coscheduling runtimes."""
    return tuple(coscheduler.crd_paths())


def trainer_with_its_runtimes(cluster: Cluster) -> StartOperator:
    """Trainer, its built-in runtimes installed (the release's overlay) before it starts and lists them."""
    start = trainer(cluster)

    def begin(namespace: str, log: Path) -> Running:
        peers.install_trainer_runtimes(cluster.api, binaries.locate().kubectl)
        return start(namespace, log)

    return begin


def kubetrain_with_its_runtimes(cluster: Cluster, endpoint: bool = False) -> StartOperator:
    """``kubetrain operator`` serving TrainJobs only; the release's built-in runtimes deleted first, so the
    ones it installs itself are what its TrainJobs run on (their snapshots are compared with Trainer's)."""
    start = kubetrain(cluster, ["--enable-scheme=trainjob"], endpoint)

    def begin(namespace: str, log: Path) -> Running:
        for name in BUILT_IN:
            if cluster.api.exists(f"{CLUSTER_RUNTIMES}/{name}"):
                cluster.api.delete(f"{CLUSTER_RUNTIMES}/{name}")
        operator = start(namespace, log)
        deadline = time.monotonic() + RUNTIMES_TIMEOUT
        while not (all(cluster.api.exists(f"{CLUSTER_RUNTIMES}/{n}") for n in BUILT_IN) and operator.idle()):
            if time.monotonic() > deadline:
                operator.stop()
                raise TimeoutError(
                    f"kubetrain did not install {sorted(BUILT_IN)} within {RUNTIMES_TIMEOUT} s"
                )
            time.sleep(0.2)
        return operator

    return begin


def trainer_phase(cluster: Cluster) -> Phase:
    return Phase("trainer", (*trainer_crds(), *gang_crds()), trainer_with_its_runtimes(cluster))


def kubetrain_phase(cluster: Cluster, endpoint: bool = False) -> Phase:
    crds = tuple(sorted(KUBETRAIN_CRDS.glob("trainer.kubeflow.org_*.yaml")))
    # Sides of their own: outcomes are kept per side and case name for the session, and a v1 module's
    # kubetrain ran cases of the same names (``mpi-succeeds``) under another configuration.
    side = "kubetrain-trainjobs+endpoint" if endpoint else "kubetrain-trainjobs"
    return Phase(side, (*crds, *gang_crds()), kubetrain_with_its_runtimes(cluster, endpoint))


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    allow_list: AllowList,
    jobset_controller: EnvtestCluster,
) -> Iterator[dict[str, Conformance]]:
    cases = selected_cases(request, CASES)
    at_defaults = selected_cases(request, ENDPOINT_CASES)
    peer = trainer_phase(cluster)
    run_phase(cluster, peer, [*cases, *at_defaults])  # one Trainer start for every case
    yield {
        **compare_phases(cluster, allow_list, peer, kubetrain_phase(cluster), cases),
        **compare_phases(cluster, allow_list, peer, kubetrain_phase(cluster, endpoint=True), at_defaults),
    }


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kubetrain_does_what_trainer_does(case: Case, results: dict[str, Conformance]) -> None:
    assert_conforms(results, case, "Kubeflow Trainer v2.3.0")


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", ENDPOINT_CASES, ids=str)
def test_kubetrain_at_its_defaults_adds_only_its_status_endpoint(
    case: Case, results: dict[str, Conformance]
) -> None:
    assert_conforms(results, case, "Kubeflow Trainer v2.3.0 at its defaults")
