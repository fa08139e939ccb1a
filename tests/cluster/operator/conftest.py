"""Fixtures of the operator's cluster tests: CRDs installed once, and operators started per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from operator_support import OperatorProcess, StartOperator

from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster

CRDS = Path(__file__).resolve().parents[3] / "manifests" / "crds"


@pytest.fixture(scope="session")
def job_crds(kube_api: KubeApi) -> list[str]:
    return install_crds(kube_api, CRDS)


@pytest.fixture
def start_operator(
    envtest: EnvtestCluster, job_crds: list[str], namespace: str, tmp_path: Path
) -> Iterator[StartOperator]:
    """Start ``kubetrain operator`` watching the test's namespace; every one started is stopped afterwards.

    The log of the n-th operator is ``tmp_path/operator-<n>.log``; it is printed when a test fails."""
    started: list[OperatorProcess] = []

    def start(
        *args: str, watch_namespace: str | None = namespace, env: dict[str, str] | None = None
    ) -> OperatorProcess:
        scope = ["--namespace", watch_namespace] if watch_namespace else []
        log = tmp_path / f"operator-{len(started)}.log"
        process = OperatorProcess(envtest.kubeconfig, log, [*scope, *args], env)
        started.append(process)
        return process

    yield start
    for process in started:
        if process.process.poll() is None:
            process.kill()
        print(f"--- {process.log_path.name}\n{process.log[-6000:]}")
