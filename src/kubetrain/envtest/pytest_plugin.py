"""pytest fixtures for tests against the envtest control plane.

kubetrain's own tests load this module as a plugin (``-p kubetrain.envtest.pytest_plugin`` in pyproject's
pytest ``addopts``); another project can do the same, or import the fixtures into its conftest.py.

Which cluster the session uses, in order:

1. ``KUBETRAIN_KUBECONFIG`` names a kubeconfig: that cluster (its nodes must be envtest fake nodes for the pod
   driver); nothing is started or stopped.
2. An envtest is already running in ``KUBETRAIN_ENVTEST_DIR`` (default
   ``~/.local/state/kubetrain/envtest``, where ``kubetrain envtest start`` puts it): that one, left running
   afterwards. Fast for repeated runs.
3. Otherwise a fresh envtest is started in a temporary directory for the session and stopped at its end,
   whether the tests pass or fail.
"""

from __future__ import annotations

import os
import re
import secrets
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kubetrain.envtest import binaries, controlplane, jobset
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from kubetrain.envtest.poddriver import PodDriver

KUBECONFIG_ENV = "KUBETRAIN_KUBECONFIG"


@dataclass(frozen=True)
class EnvtestCluster:
    """The cluster of this test session."""

    kubeconfig: Path
    run_dir: Path | None
    """The envtest run directory; None for a cluster given by KUBETRAIN_KUBECONFIG."""
    started_here: bool


def _tell_terminal(message: str) -> None:
    # A first build takes minutes; say so past pytest's output capture.
    print(f"envtest: {message}", file=sys.__stderr__, flush=True)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Build the binaries, if a collected test needs envtest and they are missing, before any test runs:
    a cold build takes minutes, more than pytest-timeout allows the first test's setup."""
    needs_envtest = any("envtest" in getattr(item, "fixturenames", ()) for item in items)
    if not needs_envtest or os.environ.get(KUBECONFIG_ENV):
        return
    running = controlplane.status(controlplane.default_run_dir())
    if not running.running:
        try:
            binaries.ensure_built(log=_tell_terminal)
        except binaries.BuildError as error:
            raise pytest.UsageError(f"envtest: {error}") from error
    if any("jobset_controller" in getattr(item, "fixturenames", ()) for item in items):
        try:
            jobset.ensure_built()
        except jobset.JobSetError as error:
            raise pytest.UsageError(f"envtest: {error}") from error


@pytest.fixture(scope="session")
def envtest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvtestCluster]:
    given = os.environ.get(KUBECONFIG_ENV)
    if given:
        yield EnvtestCluster(Path(given), None, started_here=False)
        return
    shared_dir = controlplane.default_run_dir()
    running = controlplane.status(shared_dir)
    if running.running and running.state is not None:
        yield EnvtestCluster(running.state.kubeconfig, shared_dir, started_here=False)
        return
    run_dir = tmp_path_factory.mktemp("envtest")
    state = controlplane.start(run_dir, log=_tell_terminal)
    try:
        yield EnvtestCluster(state.kubeconfig, run_dir, started_here=True)
    finally:
        controlplane.stop(run_dir)


@pytest.fixture(scope="session")
def jobset_controller(envtest: EnvtestCluster) -> EnvtestCluster:
    """The session's envtest with the JobSet controller running (started there when it is not yet; it
    stays until the envtest stops). A cluster given by KUBETRAIN_KUBECONFIG must have JobSet installed."""
    if envtest.run_dir is None:
        with KubeApi.from_kubeconfig(envtest.kubeconfig) as api:
            if not api.exists(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{jobset.CRD_NAME}"):
                pytest.fail(f"{envtest.kubeconfig}: JobSet is not installed there (no {jobset.CRD_NAME} CRD)")
        return envtest
    jobset.start(envtest.run_dir, envtest.kubeconfig)
    return envtest


@pytest.fixture(scope="session")
def kube_api(envtest: EnvtestCluster) -> Iterator[KubeApi]:
    with KubeApi.from_kubeconfig(envtest.kubeconfig) as api:
        yield api


@pytest.fixture(scope="session")
def _session_pod_driver(kube_api: KubeApi) -> Iterator[PodDriver]:
    with PodDriver(kube_api) as driver:
        yield driver


@pytest.fixture
def pod_driver(_session_pod_driver: PodDriver) -> Iterator[PodDriver]:
    """The kubelet stand-in. Nodes a test declares lost are recovered after it, so tests stay independent."""
    yield _session_pod_driver
    _session_pod_driver.recover_nodes()


def _namespace_name(test_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:40].strip("-")
    return f"{stem or 'test'}-{secrets.token_hex(3)}"


@pytest.fixture
def namespace(kube_api: KubeApi, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) after it."""
    name = _namespace_name(request.node.name)
    kube_api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    try:
        kube_api.delete(f"/api/v1/namespaces/{name}")
    except ApiError as error:
        if error.code != 404:
            raise
