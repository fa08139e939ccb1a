"""docs/operations.md's cluster commands (metrics and health endpoints, upgrading the CRDs) run as written on
an envtest of their own: they install CRDs and start an operator."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from docs_blocks import OPERATIONS_ON_A_CLUSTER, ROOT, BlockRun, docs_env, run_script, sh_blocks

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(1200)]

PAGE = ROOT / "docs" / "operations.md"
SECTIONS = OPERATIONS_ON_A_CLUSTER


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, list[BlockRun]]]:
    home = tmp_path_factory.mktemp("home")
    envtest_dir = tmp_path_factory.mktemp("envtest-operations")
    env = docs_env(home, {"KUBETRAIN_ENVTEST_DIR": str(envtest_dir)})
    env.pop("KUBECONFIG", None)
    done: dict[str, list[BlockRun]] = {}
    try:
        started = run_script("kubetrain envtest start", env, timeout=600)
        assert started.returncode == 0, started.output
        for section in SECTIONS:
            done[section] = [run_script(script, env, timeout=300) for script in sh_blocks(PAGE, section)]
        yield done
    finally:
        pid_file = home / "operator.pid"
        if pid_file.exists():
            subprocess.run(["kill", pid_file.read_text().strip()], check=False)
        run_script("kubetrain envtest stop", env)


@pytest.mark.parametrize("section", SECTIONS)
def test_every_command_of_the_section_succeeds(runs: dict[str, list[BlockRun]], section: str) -> None:
    assert runs[section], f"no commands in '## {section}'"
    failed = [run for run in runs[section] if run.returncode != 0]
    assert not failed, f"block failed:\n{failed[0].script}\n--- output:\n{failed[0].output}"


def test_the_operator_serves_health_and_the_upstream_metric_names(runs: dict[str, list[BlockRun]]) -> None:
    (metrics,) = runs["Metrics and health"]
    assert "kubetrain_leader" in metrics.output
    assert "# HELP training_operator_jobs_created_total" in metrics.output


def test_the_upgraded_crd_serves_v1(runs: dict[str, list[BlockRun]]) -> None:
    (upgrade,) = runs["Upgrading"]
    assert upgrade.output.rstrip().endswith("v1")
