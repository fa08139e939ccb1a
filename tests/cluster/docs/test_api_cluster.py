"""docs/api.md's CRD commands run as written against an envtest of their own (they replace the MPIJob CRD,
which the cluster tier's shared control plane must keep)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from docs_blocks import API_ON_A_CLUSTER, ROOT, BlockRun, docs_env, run_script, sh_blocks

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

PAGE = ROOT / "docs" / "api.md"
(SECTION,) = API_ON_A_CLUSTER


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BlockRun]]:
    home = tmp_path_factory.mktemp("home")
    env = docs_env(home, {"KUBETRAIN_ENVTEST_DIR": str(tmp_path_factory.mktemp("envtest-api"))})
    env.pop("KUBECONFIG", None)
    try:
        started = run_script("kubetrain envtest start", env, timeout=600)
        assert started.returncode == 0, started.output
        # The reader's kubectl talks to their cluster: here, the envtest's.
        reader = 'eval "$(kubetrain envtest env)"\n'
        yield [run_script(reader + script, env, timeout=300) for script in sh_blocks(PAGE, SECTION)]
    finally:
        run_script("kubetrain envtest stop", env)


def test_every_command_installing_the_crds_succeeds(runs: list[BlockRun]) -> None:
    assert len(runs) == len(sh_blocks(PAGE, SECTION)) > 0
    failed = [run for run in runs if run.returncode != 0]
    assert not failed, f"block failed:\n{failed[0].script}\n--- output:\n{failed[0].output}"


def test_the_kustomization_installs_every_kind(runs: list[BlockRun]) -> None:
    install = runs[0].output
    for plural in ("pytorchjobs", "tfjobs", "xgboostjobs", "paddlejobs", "jaxjobs", "mxjobs", "mpijobs"):
        assert f"customresourcedefinition.apiextensions.k8s.io/{plural}.kubeflow.org" in install
