"""PyTorchJob, TFJob, XGBoostJob, PaddleJob and JAXJob under upstream's training-operator v1.9.0 and under
kubetrain: every example its release ships, and each kind's status scenarios, compared field by field."""

from __future__ import annotations

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.conformance import AllowList

from .peer_cases import TRAINING_OPERATOR_KINDS, example_jobs, scenarios, tensorflow_extras
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
    training_operator,
)

pytestmark = pytest.mark.peers

SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
CRD_FILES = tuple(f"kubeflow.org_{kind.lower()}s.yaml" for kind in KINDS)

CASES: list[Case] = [
    *example_jobs(peers.TRAINING_OPERATOR.examples_dir(), set(KINDS), "kubeflow.org/v1"),
    *(case for kind in TRAINING_OPERATOR_KINDS for case in scenarios(kind)),
    *tensorflow_extras(),
]


def peer_phase(cluster: Cluster) -> Phase:
    crds = tuple(peers.TRAINING_OPERATOR.crds_dir() / name for name in CRD_FILES)
    return Phase("training-operator", crds, training_operator(cluster, SCHEMES))


def kubetrain_phase(cluster: Cluster, endpoint: bool = False) -> Phase:
    flags = [f"--enable-scheme={scheme}" for scheme in SCHEMES]
    side = "kubetrain+endpoint" if endpoint else "kubetrain"
    return Phase(
        side, tuple(KUBETRAIN_CRDS / name for name in CRD_FILES), kubetrain(cluster, flags, endpoint)
    )


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, cluster: Cluster, allow_list: AllowList
) -> dict[str, Conformance]:
    return module_results(request, cluster, allow_list, peer_phase(cluster), kubetrain_phase(cluster), CASES)


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_kubetrain_does_what_the_training_operator_does(case: Case, results: dict[str, Conformance]) -> None:
    assert_conforms(results, case, "the training-operator")
