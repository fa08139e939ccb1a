"""Fixtures of the e2e tier: one envtest with a real node (kubelet, containerd, CoreDNS) for the session.

The tier needs root, containerd, runc, the CNI plugins, overlayfs and cgroups; where any is missing every
test is skipped with the reason (``make test-e2e`` prints it in the short summary). An envtest is started
for the session (in a temporary directory) and stopped at its end; one real-node cluster runs on a machine
at a time, so the tests that start their own (``test_node_lifecycle.py``, ``test_two_nodes.py``: two real
nodes) run first and stop theirs before the session's starts.

The envtest runs the real JobSet controller beside it (``--jobset``: a host process whose webhooks the API
server reaches on the host's loopback; no registry serves its image for an in-cluster Deployment), so a
TrainJob's JobSet gets its Jobs and real pods.

``KUBETRAIN_E2E_ENVTEST_DIR`` names a real-node envtest that is already running (``kubetrain envtest start
--real-node --dir …``): the tier then uses it and leaves it, and the operator, running, so that several
engineers' test runs share one node while they develop (the node is one per machine).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from browser_support import browser, viewer_for
from e2e.realpods import RealCluster, scratch_namespace
from e2e.session_operator import DEPLOYMENT, wait_available
from kubetrain.envtest import controlplane, coscheduler, jobset, realnode
from kubetrain.envtest.kubeapi import KubeApi
from waiting import PATIENCE

OVERLAY = Path(__file__).resolve().parent / "operator-overlay"
SHARED_RUN_DIR_ENV = "KUBETRAIN_E2E_ENVTEST_DIR"
__all__ = ["browser", "viewer_for"]  # the Jobs view test's (tests/browser_support.py)


def _say(message: str) -> None:
    print(f"e2e: {message}", file=sys.__stderr__, flush=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The node lifecycle test and the two-node tests start and stop nodes of their own: they must run before
    # the session's node starts (one real-node cluster per machine), so they go first whatever the file
    # order.
    first = ("test_node_lifecycle.py", "test_two_nodes.py")
    # The other frameworks' images are built beside the tier in `make test` (the node does not start with
    # them): their tests go last, when those are ready.
    last = ("test_frameworks.py",)

    def place(item: pytest.Item) -> int:
        name = item.path.name
        if name in first:
            return first.index(name)
        return len(first) + (name in last)

    items.sort(key=place)
    reasons = realnode.cannot_run_reasons()
    if not reasons:
        return
    skip = pytest.mark.skip(reason="the real node cannot run on this machine: " + "; ".join(reasons))
    for item in items:
        if "tests/e2e" in str(item.path):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    shared = os.environ.get(SHARED_RUN_DIR_ENV)
    if shared:
        run_dir = Path(shared)
        # A shared node started without --jobset gets the controller here (once: it takes a lock); `kubetrain
        # envtest stop` stops it with the rest.
        jobset.start(run_dir, run_dir / controlplane.ADMIN_KUBECONFIG)
        realnode.load_images(realnode.node_paths(run_dir), ["python"])
        with KubeApi.from_kubeconfig(run_dir / controlplane.ADMIN_KUBECONFIG) as api:
            yield RealCluster(run_dir, run_dir / controlplane.ADMIN_KUBECONFIG, api)
        return
    run_dir = tmp_path_factory.mktemp("e2e-envtest")
    options = controlplane.EnvtestOptions(nodes=0, real_node=True, jobset=True)
    try:
        kubeconfig = controlplane.start(run_dir, options, log=_say).kubeconfig
        realnode.load_images(realnode.node_paths(run_dir), ["python"])
        with KubeApi.from_kubeconfig(kubeconfig) as api:
            yield RealCluster(run_dir, kubeconfig, api)
    finally:
        controlplane.stop(run_dir)


@pytest.fixture(scope="session")
def gang_scheduler(real_cluster: RealCluster) -> Iterator[str]:
    """scheduler-plugins' Coscheduling scheduler beside envtest's, as a cluster with gang scheduling runs it;
    the operator overlay names it (``--gang-scheduler-name``), so it gang-schedules every job's pods."""
    if not coscheduler.running(real_cluster.run_dir):
        coscheduler.start(real_cluster.run_dir)
    yield coscheduler.SCHEDULER_NAME
    if not os.environ.get(SHARED_RUN_DIR_ENV):
        coscheduler.stop(real_cluster.run_dir)


@pytest.fixture(scope="session")
def operator(real_cluster: RealCluster, gang_scheduler: str) -> Iterator[RealCluster]:
    """The operator installed as a user would: its image (tools/images) and the standalone overlay."""
    realnode.load_images(realnode.node_paths(real_cluster.run_dir), ["operator", "busybox"])
    shared = bool(os.environ.get(SHARED_RUN_DIR_ENV))
    # A shared node's operator is installed once, by whoever started the node; applying again would conflict
    # with tests that scale it (test_helm.py owns .spec.replicas while its own operator runs).
    if not (shared and real_cluster.api.exists(DEPLOYMENT)):
        applied = real_cluster.kubectl("apply", "--server-side", "-k", str(OVERLAY))
        assert applied.returncode == 0, applied.stderr
    # On a shared node, also while another run's test_helm.py holds it at 0 replicas.
    wait_available(real_cluster, 480.0 if shared else PATIENCE)
    yield real_cluster
    if not shared:
        real_cluster.kubectl("delete", "-k", str(OVERLAY), "--wait=false")


@pytest.fixture
def namespace(real_cluster: RealCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace, with its default ServiceAccount (real pods mount its token), deleted after."""
    stem = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    with scratch_namespace(real_cluster, stem) as name:
        yield name
