"""MPIJob kubeflow.org/v1 (the launcher runs ``kubectl exec``) under upstream's training-operator v1.9.0 and
under kubetrain (``--mpi-api v1``): the release's MPIJob examples and the kind's status scenarios, compared
field by field."""

from __future__ import annotations

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.conformance import AllowList

from .peer_cases import MPI_V1, example_jobs, scenarios
from .peer_runner import Case
from .peer_suite import (
    KUBETRAIN_MPIJOB_V1_CRD,
    RUN_TIMEOUT,
    Cluster,
    Conformance,
    Phase,
    assert_conforms,
    kubetrain,
    module_results,
    training_operator,
)

pytestmark = pytest.mark.peers

CASES: list[Case] = [
    # Named mpiv1-*, as its scenarios are: the allow-list's rows for this controller name its cases so.
    *example_jobs(
        peers.TRAINING_OPERATOR.examples_dir() / "mpi", {"MPIJob"}, "kubeflow.org/v1", prefix="mpiv1-example"
    ),
    *scenarios(MPI_V1),
]


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, cluster: Cluster, allow_list: AllowList
) -> dict[str, Conformance]:
    crd = peers.TRAINING_OPERATOR.crds_dir() / "kubeflow.org_mpijobs.yaml"
    peer = Phase("training-operator", (crd,), training_operator(cluster, ["mpijob"]))
    flags = ["--mpi-api", "v1", "--enable-scheme", "mpijob"]
    ours = Phase("kubetrain", (KUBETRAIN_MPIJOB_V1_CRD,), kubetrain(cluster, flags))
    return module_results(request, cluster, allow_list, peer, ours, CASES)


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kubetrain_runs_mpijob_v1_as_the_training_operator_does(
    case: Case, results: dict[str, Conformance]
) -> None:
    assert_conforms(results, case, "the training-operator")
