"""Several envtests coexist (a run directory and free ports each); stop ends exactly what start began."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest import binaries, controlplane, processes
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster

pytestmark = pytest.mark.cluster


def test_a_second_envtest_runs_beside_the_first_and_stop_ends_all_its_processes(
    envtest: EnvtestCluster, tmp_path: Path
) -> None:
    runner = cli_runner()
    started = runner.invoke(app, ["envtest", "start", "--dir", str(tmp_path), "--nodes", "1"])
    assert started.exit_code == 0, started.output
    try:
        kubeconfig = Path(started.stdout.strip().splitlines()[-1])
        with KubeApi.from_kubeconfig(kubeconfig) as second:
            names = [node["metadata"]["name"] for node in second.get("/api/v1/nodes")["items"]]
        assert names == ["envtest-node-0"]
        records = [processes.read_record(tmp_path, name) for name in controlplane.COMPONENT_ORDER]
        assert all(record is not None and record.is_running() for record in records)
    finally:
        stopped = runner.invoke(app, ["envtest", "stop", "--dir", str(tmp_path)])

    assert stopped.exit_code == 0, stopped.output
    assert not any(record is not None and record.is_running() for record in records)
    with KubeApi.from_kubeconfig(envtest.kubeconfig) as first:
        assert first.is_ok("/readyz")


def test_env_exports_the_kubeconfig_and_puts_the_built_kubectl_first_on_path(envtest: EnvtestCluster) -> None:
    if envtest.run_dir is None:
        pytest.skip("the cluster of KUBETRAIN_KUBECONFIG has no envtest run directory")
    result = cli_runner().invoke(app, ["envtest", "env", "--dir", str(envtest.run_dir)])

    assert result.exit_code == 0, result.output
    assert f"export KUBECONFIG={envtest.kubeconfig.resolve()}" in result.stdout
    assert f"export PATH={binaries.locate().directory}:" in result.stdout
