"""The conformance tier's session: the envtest with room for every case, the allow-list of docs/migration.md,
and at the end the allow-list as applied and what was compared."""

from __future__ import annotations

import pytest

from kubetrain.envtest.conformance import AllowList
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster

from .peer_suite import TOTALS, Cluster, ensure_roomy_node, load_allow_list, summary

_loaded: list[AllowList] = []


@pytest.fixture(scope="session")
def allow_list() -> AllowList:
    entries = load_allow_list()
    _loaded.append(entries)
    return entries


@pytest.fixture(scope="session")
def cluster(
    envtest: EnvtestCluster,
    kube_api: KubeApi,
    _session_pod_driver: PodDriver,
    tmp_path_factory: pytest.TempPathFactory,
) -> Cluster:
    ensure_roomy_node(kube_api)
    return Cluster(envtest, kube_api, _session_pod_driver, tmp_path_factory.mktemp("operators"))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _loaded or not TOTALS.cases:
        return
    terminalreporter.section("peers: the allow-list of docs/migration.md, as applied")
    for line in summary(_loaded[0]):
        terminalreporter.write_line(line)
