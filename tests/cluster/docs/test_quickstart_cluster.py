"""docs/quickstart.md's cluster path runs as written, block after block, on an envtest of its own (the page
installs CRDs and starts an operator, which the cluster tier's shared control plane already has)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest

from docs_blocks import QUICKSTART_CLUSTER, ROOT, BlockRun, docs_env, run_script, sh_blocks

pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(1200)]

PAGE = ROOT / "docs" / "quickstart.md"
CLUSTER = QUICKSTART_CLUSTER


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[BlockRun]]:
    home = tmp_path_factory.mktemp("home")
    envtest_dir = tmp_path_factory.mktemp("envtest-quickstart")
    env = docs_env(home, {"KUBETRAIN_ENVTEST_DIR": str(envtest_dir)})
    env.pop("KUBECONFIG", None)
    done: list[BlockRun] = []
    try:
        for script in sh_blocks(PAGE, CLUSTER):
            done.append(run_script(script, env, timeout=600))
            if done[-1].returncode != 0:
                break  # later blocks build on this one
        yield done
    finally:
        pid_file = home / "operator.pid"
        if pid_file.exists():
            subprocess.run(["kill", pid_file.read_text().strip()], check=False)
        run_script("kubetrain envtest stop", env)


def test_every_command_of_the_cluster_path_succeeds(runs: list[BlockRun]) -> None:
    failed = [run for run in runs if run.returncode != 0]
    assert not failed, f"block failed:\n{failed[0].script}\n--- output:\n{failed[0].output}"
    assert len(runs) == len(sh_blocks(PAGE, CLUSTER))


def test_the_submitted_job_is_listed_with_its_replicas(runs: list[BlockRun]) -> None:
    listing = next(run.output for run in runs if "kubetrain get pytorchjobs" in run.script)
    assert "hello" in listing
    assert "hello-worker-0" in listing
