"""MPIJob kubeflow.org/v2beta1 under the mpi-operator v0.6.0, the operator that defines it, and under
kubetrain: every v2beta1 example of its release, the kind's status scenarios, and its own settings (the
launcher created once the workers are ready, the launcher as a worker, the Intel and MPICH implementations),
compared field by field."""

from __future__ import annotations

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.conformance import AllowList

from .peer_cases import MPI_V2, example_jobs, mpi_v2_extras, scenarios
from .peer_runner import Case
from .peer_suite import (
    KUBETRAIN_CRDS,
    RUN_TIMEOUT,
    Cluster,
    Conformance,
    Phase,
    assert_conforms,
    kubetrain,
    module_results,
    mpi_operator,
)

pytestmark = pytest.mark.peers

CASES: list[Case] = [
    *example_jobs(peers.MPI_OPERATOR.examples_dir(), {"MPIJob"}, "kubeflow.org/v2beta1"),
    *scenarios(MPI_V2),
    *mpi_v2_extras(),
]


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, cluster: Cluster, allow_list: AllowList
) -> dict[str, Conformance]:
    crd = peers.MPI_OPERATOR.crds_dir() / "kubeflow.org_mpijobs.yaml"
    peer = Phase("mpi-operator", (crd,), mpi_operator(cluster))
    ours = Phase(
        "kubetrain",
        (KUBETRAIN_CRDS / "kubeflow.org_mpijobs.yaml",),
        kubetrain(cluster, ["--enable-scheme", "mpijob-v2beta1"]),
    )
    return module_results(request, cluster, allow_list, peer, ours, CASES)


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kubetrain_runs_mpijob_v2beta1_as_the_mpi_operator_does(
    case: Case, results: dict[str, Conformance]
) -> None:
    assert_conforms(results, case, "the mpi-operator")
