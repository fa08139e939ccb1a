"""Fault injection: a component can be stopped and started again (same ports and flags, etcd data kept), so
tests can see watches break and clients recover."""

from __future__ import annotations

import collections
import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kubetrain.envtest import controlplane
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from waiting import PATIENCE

pytestmark = pytest.mark.cluster


@pytest.fixture
def run_dir(envtest: EnvtestCluster) -> Iterator[Path]:
    if envtest.run_dir is None:
        pytest.skip("the cluster of KUBETRAIN_KUBECONFIG is not an envtest this session can restart")
    yield envtest.run_dir
    controlplane.restart_controllers(envtest.run_dir)


def test_objects_survive_an_api_server_crash_and_restart_and_an_open_watch_ends(
    run_dir: Path, kube_api: KubeApi, namespace: str
) -> None:
    configmaps = f"/api/v1/namespaces/{namespace}/configmaps"
    created = kube_api.create(configmaps, {"metadata": {"name": "kept"}, "data": {"k": "v"}})
    watch_ended = threading.Event()

    def watch() -> None:
        # The watch must end when the API server dies, by closing or by failing: either will do.
        with contextlib.suppress(httpx.HTTPError, ApiError):
            events = kube_api.watch(configmaps, created["metadata"]["resourceVersion"], 300)
            collections.deque(events, maxlen=0)
        watch_ended.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    controlplane.restart_component(run_dir, "kube-apiserver", crash=True)

    assert watch_ended.wait(timeout=PATIENCE), "a watch outlived the API server it was open on"
    assert kube_api.get(f"{configmaps}/kept")["data"] == {"k": "v"}


def test_a_crashed_api_server_refuses_connections_until_started_again(
    run_dir: Path, kube_api: KubeApi, namespace: str
) -> None:
    controlplane.stop_component(run_dir, "kube-apiserver", crash=True)
    try:
        with pytest.raises(httpx.TransportError):
            kube_api.get(f"/api/v1/namespaces/{namespace}")
    finally:
        controlplane.start_component(run_dir, "kube-apiserver")

    assert kube_api.get(f"/api/v1/namespaces/{namespace}")["metadata"]["name"] == namespace


def test_an_unknown_component_name_is_refused_with_the_valid_names(run_dir: Path) -> None:
    with pytest.raises(ValueError, match="one of etcd, kube-apiserver"):
        controlplane.stop_component(run_dir, "kubelet")
