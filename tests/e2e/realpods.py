"""Helpers of the e2e tier: the session's cluster, test pods on the real node, waiting for them."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.envtest import binaries, realnode
from kubetrain.envtest.kubeapi import ApiError, KubeApi
from waiting import PATIENCE, eventually

# The test pods' image: the Debian base of tools/images, whose python does the DNS and TCP checks.
TEST_IMAGE = "localhost/kubetrain/python:3.11-bookworm"
GREETING_SERVER = textwrap.dedent(
    """
    import socket
    server = socket.create_server(("", 23456))
    connection, _ = server.accept()
    connection.sendall(b"hello from " + socket.gethostname().encode() + b"\\n")
    connection.close()
    """
)
"""A pod's script: greets the first client on port 23456 with its host name, then exits."""


@dataclass(frozen=True)
class RealCluster:
    run_dir: Path
    kubeconfig: Path
    api: KubeApi

    def kubectl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(binaries.locate().kubectl), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=PATIENCE,
        )

    def kubetrain(self, *args: str) -> subprocess.CompletedProcess[str]:
        """The kubetrain CLI of this venv, pointed at the cluster as a user's KUBECONFIG would."""
        return subprocess.run(
            [str(Path(sys.executable).with_name("kubetrain")), *args],
            capture_output=True,
            text=True,
            check=False,
            timeout=PATIENCE,
            env={**os.environ, "KUBECONFIG": str(self.kubeconfig)},
        )


def wait_until(what: str, done: Any, timeout: float = PATIENCE) -> Any:
    """``done()`` once truthy; ``timeout`` only where a wait is known to take longer than PATIENCE."""
    return eventually(done, what, timeout)


def pod(name: str, script: str, **spec: Any) -> dict[str, Any]:
    """A pod of the test image running a Python script on the real node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": {realnode.REAL_NODE_LABEL: "true"},
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": TEST_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["python", "-u", "-c", script],
                }
            ],
            **spec,
        },
    }


def wait_for_phase(api: KubeApi, namespace: str, name: str, phases: tuple[str, ...]) -> dict[str, Any]:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    def reached() -> dict[str, Any] | None:
        current = api.get(path)
        return current if current.get("status", {}).get("phase") in phases else None

    try:
        return dict(wait_until(f"pod {namespace}/{name} in {'/'.join(phases)}", reached))
    except AssertionError as error:
        raise AssertionError(f"{error}; last status: {api.get(path).get('status')}") from error


@contextlib.contextmanager
def scratch_namespace(cluster: RealCluster, stem: str) -> Iterator[str]:
    """A fresh namespace ``<stem>-<random>``, with its default ServiceAccount (real pods mount its token),
    deleted afterwards without waiting for its pods to go."""
    name = f"{stem}-{secrets.token_hex(3)}"
    cluster.api.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    try:
        wait_until(
            f"the default ServiceAccount of {name}",
            lambda: cluster.api.exists(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
            PATIENCE,
        )
        yield name
    finally:
        _delete_namespace_object(cluster, name)


def _delete_namespace_object(cluster: RealCluster, namespace: str) -> None:
    """Ask for the namespace's deletion, without waiting; one already gone is fine."""
    try:
        cluster.api.delete(f"/api/v1/namespaces/{namespace}")
    except ApiError as error:
        if error.code != 404:
            raise


def delete_namespace(cluster: RealCluster, namespace: str) -> None:
    """The namespace deleted and gone, its jobs and pods with it (before an operator that watches every
    namespace is back, say)."""
    _delete_namespace_object(cluster, namespace)
    wait_until(
        f"namespace {namespace} gone",
        lambda: not cluster.api.exists(f"/api/v1/namespaces/{namespace}"),
        PATIENCE,
    )


TRAINJOBS = "/apis/trainer.kubeflow.org/v1alpha1"


def job_pods_once_ended(api: KubeApi, namespace: str, job: str) -> dict[str, dict[str, Any]]:
    """A v1 job's pods by name once each has ended: the job succeeds with its master, and its workers'
    pods may still be ending at that moment (a warm CI run saw one Running on the other node)."""

    def ended() -> dict[str, dict[str, Any]] | None:
        selector = {"labelSelector": f"training.kubeflow.org/job-name={job}"}
        pods = api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
        done = all(p["status"]["phase"] in ("Succeeded", "Failed") for p in pods)
        return {p["metadata"]["name"]: p for p in pods} if pods and done else None

    return dict(wait_until(f"every pod of {job} ended", ended, PATIENCE))


def trainjob(api: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    return dict(api.get(f"{TRAINJOBS}/namespaces/{namespace}/trainjobs/{name}"))


def trainjob_outcome(api: KubeApi, namespace: str, name: str) -> dict[str, Any] | None:
    """The TrainJob's ``Complete`` or ``Failed`` condition once one is True."""
    conditions = trainjob(api, namespace, name).get("status", {}).get("conditions") or []
    done = [c for c in conditions if c["type"] in ("Complete", "Failed") and c["status"] == "True"]
    return done[0] if done else None


def jobset_pods(api: KubeApi, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pods of a TrainJob's JobSet (named as the TrainJob), in completion-index order."""
    selector = {"labelSelector": f"jobset.sigs.k8s.io/jobset-name={name}"}
    pods = api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
    return sorted(
        pods, key=lambda p: int(p["metadata"]["labels"]["batch.kubernetes.io/job-completion-index"])
    )
