"""kubetrain's status endpoint (Kubeflow Trainer v2's progress reports) on, against kubetrain with it off,
over every example of both peers: what it adds to each pod (three variables, the token and CA volume, the
pod's service account named) is the only difference. The other modules run with it off, so that what they
compare with the peers is kubetrain's pods as a cluster without the endpoint gets them."""

from __future__ import annotations

import pytest

from kubetrain.envtest import peers
from kubetrain.envtest.conformance import AllowList

from .peer_cases import example_jobs
from .peer_runner import Case
from .peer_suite import (
    KUBETRAIN_CRDS,
    RUN_TIMEOUT,
    Cluster,
    Conformance,
    Phase,
    assert_conforms,
    compare_phases,
    kubetrain,
    selected_cases,
)

pytestmark = pytest.mark.peers

V1_KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
V1_SCHEMES = ("pytorchjob", "tfjob", "xgboostjob", "paddlejob", "jaxjob")
V1_CASES: list[Case] = example_jobs(peers.TRAINING_OPERATOR.examples_dir(), set(V1_KINDS), "kubeflow.org/v1")
V2_CASES: list[Case] = example_jobs(peers.MPI_OPERATOR.examples_dir(), {"MPIJob"}, "kubeflow.org/v2beta1")


def _phases(cluster: Cluster, crds: tuple[str, ...], schemes: tuple[str, ...]) -> tuple[Phase, Phase]:
    files = tuple(KUBETRAIN_CRDS / name for name in crds)
    flags = [f"--enable-scheme={scheme}" for scheme in schemes]
    return (
        Phase("kubetrain", files, kubetrain(cluster, flags)),
        Phase("kubetrain+endpoint", files, kubetrain(cluster, flags, endpoint=True)),
    )


@pytest.fixture(scope="module")
def results(
    request: pytest.FixtureRequest, cluster: Cluster, allow_list: AllowList
) -> dict[str, Conformance]:
    v1 = _phases(cluster, tuple(f"kubeflow.org_{kind.lower()}s.yaml" for kind in V1_KINDS), V1_SCHEMES)
    v2 = _phases(cluster, ("kubeflow.org_mpijobs.yaml",), ("mpijob-v2beta1",))
    return {
        **compare_phases(cluster, allow_list, *v1, selected_cases(request, V1_CASES)),
        **compare_phases(cluster, allow_list, *v2, selected_cases(request, V2_CASES)),
    }


@pytest.mark.timeout(RUN_TIMEOUT)
@pytest.mark.parametrize("case", [*V1_CASES, *V2_CASES], ids=str)
def test_the_status_endpoint_adds_its_variables_volume_and_service_account_and_nothing_else(
    case: Case, results: dict[str, Conformance]
) -> None:
    assert_conforms(results, case, "kubetrain with its status endpoint off")
