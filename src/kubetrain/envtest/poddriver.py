"""The kubelet stand-in: tests say what happens to each bound pod, and the driver writes it through
``pods/status``.

Nothing happens by magic: a pod stays as the scheduler left it until a test calls ``run``, ``succeed``,
``fail``, ``restart``, ``evict`` or ``lose_node``. The one thing done without being asked is what any kubelet
does: finishing the graceful deletion of pods on its nodes (without it a deleted, bound pod stays Terminating
forever). Pods on a node a test declared lost are left Terminating, as on a real cluster.
"""

from __future__ import annotations

import datetime
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import httpx

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject
from kubetrain.envtest.nodes import FAKE_NODE_LABEL

PodRef = KubeObject | tuple[str, str]
"""A pod as returned by the API (a dict with metadata) or as (namespace, name)."""

DEFAULT_BIND_TIMEOUT = 30.0


class PodDriverError(RuntimeError):
    """A requested pod transition that a kubelet could not make (unbound pod, wrong restart policy...)."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ref(pod: PodRef) -> tuple[str, str]:
    if isinstance(pod, tuple):
        return pod
    metadata = pod["metadata"]
    return metadata.get("namespace", "default"), metadata["name"]


def pod_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods/{name}"


def pod_ip(pod: KubeObject, node_index: int) -> str:
    """A stable fake address per pod: 10.244.<node>.<from uid>."""
    digest = hashlib.sha256(pod["metadata"]["uid"].encode()).digest()
    return f"10.244.{node_index % 256}.{2 + digest[0] % 250}"


def _container_id(pod: KubeObject, container: str, restart_count: int) -> str:
    seed = f"{pod['metadata']['uid']}/{container}/{restart_count}".encode()
    return f"envtest://{hashlib.sha256(seed).hexdigest()[:32]}"


def _condition(kind: str, status: bool, reason: str | None = None) -> KubeObject:
    condition: KubeObject = {
        "type": kind,
        "status": "True" if status else "False",
        "lastTransitionTime": _now(),
    }
    if reason:
        condition["reason"] = reason
    return condition


def _restart_counts(pod: KubeObject) -> dict[str, int]:
    return {
        s["name"]: int(s.get("restartCount", 0)) for s in pod.get("status", {}).get("containerStatuses") or []
    }


def _started_at(pod: KubeObject) -> dict[str, str]:
    started: dict[str, str] = {}
    for status in pod.get("status", {}).get("containerStatuses") or []:
        running = (status.get("state") or {}).get("running")
        if running:
            started[status["name"]] = running.get("startedAt", _now())
    return started


class PodDriver:
    """Plays the kubelet of envtest's fake nodes for the pods the scheduler bound to them."""

    def __init__(self, api: KubeApi, bind_timeout: float = DEFAULT_BIND_TIMEOUT) -> None:
        self._api = api
        self._bind_timeout = bind_timeout
        self._lost_nodes: set[str] = set()
        self._lock = threading.Lock()
        self._finisher: threading.Thread | None = None
        self._stopping = threading.Event()
        self._fake_nodes = self._list_fake_nodes()
        self._addresses: dict[str, str] = {}

    # -- transitions
    # -------------------------------------------------------------------------------------------

    def run(self, pod: PodRef) -> KubeObject:
        """Running, every container started and ready, with a pod IP; the restart counts are kept."""
        current = self.wait_bound(pod)
        counts = _restart_counts(current)
        statuses = [
            self._running_status(current, container, counts.get(container["name"], 0))
            for container in current["spec"]["containers"]
        ]
        return self._write_status(
            current, self._base_status(current, "Running", ready=True, containers=statuses)
        )

    def succeed(self, pod: PodRef, exit_code: int = 0) -> KubeObject:
        """Succeeded: every container terminated with ``exit_code`` (0 unless a test says otherwise)."""
        current = self.wait_bound(pod)
        return self._terminate(current, "Succeeded", exit_code, "Completed", containers=None)

    def fail(
        self,
        pod: PodRef,
        exit_code: int = 1,
        reason: str = "Error",
        container: str | None = None,
        message: str | None = None,
    ) -> KubeObject:
        """Failed: ``container`` (every container when None) terminated with ``exit_code`` and ``reason``;
        ``message``: what it wrote to its termination message path (or, under ``FallbackToLogsOnError``, the
        end of its log, as a kubelet puts it there)."""
        current = self.wait_bound(pod)
        return self._terminate(
            current,
            "Failed",
            exit_code,
            reason,
            containers={container} if container else None,
            message=message,
        )

    def restart(self, pod: PodRef, exit_code: int = 1, container: str | None = None) -> KubeObject:
        """The container exited with ``exit_code`` and the kubelet restarted it in place: restartCount + 1,
        ``lastState.terminated`` records the exit, the pod stays Running. Only for OnFailure / Always pods."""
        current = self.wait_bound(pod)
        policy = current["spec"].get("restartPolicy", "Always")
        if policy == "Never":
            namespace, name = _ref(current)
            raise PodDriverError(
                f"pod {namespace}/{name} has restartPolicy Never: a kubelet does not restart its containers; "
                "use fail() instead"
            )
        names = {container} if container else {c["name"] for c in current["spec"]["containers"]}
        counts = _restart_counts(current)
        started = _started_at(current)
        statuses = []
        for spec_container in current["spec"]["containers"]:
            name = spec_container["name"]
            count = counts.get(name, 0)
            if name in names:
                status = self._running_status(current, spec_container, count + 1)
                status["lastState"] = {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": "Error" if exit_code else "Completed",
                        "startedAt": started.get(name, _now()),
                        "finishedAt": _now(),
                        "containerID": _container_id(current, name, count),
                    }
                }
            else:
                status = self._running_status(current, spec_container, count)
            statuses.append(status)
        return self._write_status(
            current, self._base_status(current, "Running", ready=True, containers=statuses)
        )

    def crash_loop(
        self, pod: PodRef, exit_code: int = 1, container: str | None = None, reason: str = "Error"
    ) -> KubeObject:
        """The container exited with ``exit_code`` (``reason``: ``Error``, ``OOMKilled``) once more and waits
        out the kubelet's back-off before its next start: restartCount + 1, ``lastState.terminated`` records
        the exit, ``state.waiting`` is ``CrashLoopBackOff``; the pod stays Running, not Ready."""
        current = self.restart(pod, exit_code, container)
        names = {container} if container else {c["name"] for c in current["spec"]["containers"]}
        statuses = []
        for status in current["status"]["containerStatuses"]:
            if status["name"] in names:
                status["lastState"]["terminated"]["reason"] = reason
                back_off = f"back-off 10s restarting failed container={status['name']} pod={_ref(current)[1]}"
                status.update(
                    ready=False,
                    started=False,
                    state={"waiting": {"reason": "CrashLoopBackOff", "message": back_off}},
                )
            statuses.append(status)
        return self._write_status(
            current,
            self._base_status(
                current, "Running", ready=False, containers=statuses, reason="ContainersNotReady"
            ),
        )

    def wait_for_image(
        self,
        pod: PodRef,
        reason: str = "ErrImagePull",
        message: str = "rpc error: code = NotFound desc = failed to pull and unpack image",
    ) -> KubeObject:
        """Its containers cannot start because their image cannot be pulled: the pod stays Pending, each
        container waiting with ``reason`` (``ErrImagePull``, ``ImagePullBackOff``, ``ErrImageNeverPull``)."""
        current = self.wait_bound(pod)
        statuses = []
        for spec_container in current["spec"]["containers"]:
            status = self._running_status(current, spec_container, 0)
            status.update(
                ready=False,
                started=False,
                imageID="",
                containerID="",
                state={"waiting": {"reason": reason, "message": message}},
            )
            statuses.append(status)
        updated = self._base_status(
            current, "Pending", ready=False, containers=statuses, reason="ContainersNotReady"
        )
        updated.pop("podIP")
        updated.pop("podIPs")
        return self._write_status(current, updated)

    def evict(self, pod: PodRef, message: str = "The node was low on resource: memory.") -> KubeObject:
        """Evicted by the kubelet: Failed with reason Evicted, containers killed, a DisruptionTarget
        condition."""
        current = self.wait_bound(pod)
        updated = self._terminate(current, "Failed", 137, "Error", containers=None, write=False)
        updated["reason"] = "Evicted"
        updated["message"] = message
        updated["conditions"].append(
            {**_condition("DisruptionTarget", True, "TerminationByKubelet"), "message": message}
        )
        return self._write_status(current, updated)

    def lose_node(self, pod: PodRef) -> KubeObject:
        """The pod's node stops answering: its pods turn not-ready (as the node controller marks them) and,
        once deleted, stay Terminating because no kubelet confirms the deletion. Returns the pod."""
        current = self.wait_bound(pod)
        node = current["spec"]["nodeName"]
        with self._lock:
            self._lost_nodes.add(node)
        for on_node in self._api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})["items"]:
            conditions = [
                c for c in on_node.get("status", {}).get("conditions") or [] if c["type"] != "Ready"
            ]
            conditions.append(_condition("Ready", False, "NodeLost"))
            namespace, name = _ref(on_node)
            try:
                self._api.patch(f"{pod_path(namespace, name)}/status", {"status": {"conditions": conditions}})
            except ApiError as error:
                # Other tests' pods share the node, and one may be gone since the list (its namespace
                # deleted): nothing is left to mark.
                if error.code != 404:
                    raise
        return self._api.get(pod_path(*_ref(current)))

    def lost_nodes(self) -> set[str]:
        with self._lock:
            return set(self._lost_nodes)

    def recover_nodes(self) -> None:
        """Lost nodes answer again: deletions left Terminating on them are completed now."""
        with self._lock:
            recovered = self._lost_nodes
            self._lost_nodes = set()
        for node in recovered:
            pods = self._api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})["items"]
            self._finish_all(pods)

    # -- helpers
    # -----------------------------------------------------------------------------------------------

    def wait_bound(self, pod: PodRef) -> KubeObject:
        """The pod, once the scheduler has bound it to a node; an error naming the scheduler's reason
        otherwise."""
        namespace, name = _ref(pod)
        deadline = time.monotonic() + self._bind_timeout
        while True:
            current = self._api.get(pod_path(namespace, name))
            node = current["spec"].get("nodeName")
            if node:
                if node not in self._fake_nodes:
                    self._fake_nodes = self._list_fake_nodes()
                if node not in self._fake_nodes:
                    raise PodDriverError(
                        f"pod {namespace}/{name} is bound to {node}, which is no envtest node"
                    )
                return current
            if time.monotonic() > deadline:
                scheduled: KubeObject = next(
                    (
                        c
                        for c in current.get("status", {}).get("conditions") or []
                        if c["type"] == "PodScheduled"
                    ),
                    {},
                )
                raise PodDriverError(
                    f"pod {namespace}/{name} was not bound to a node within {self._bind_timeout:.0f} s "
                    f"({scheduled.get('reason', 'no PodScheduled condition')}: "
                    f"{scheduled.get('message', '')}); "
                    "a kubelet only acts on bound pods"
                )
            time.sleep(0.05)

    def _list_fake_nodes(self) -> dict[str, int]:
        nodes = self._api.get("/api/v1/nodes", {"labelSelector": FAKE_NODE_LABEL})["items"]
        return {node["metadata"]["name"]: index for index, node in enumerate(nodes)}

    def _node_address(self, node: str) -> str:
        # Read once per node: a fake node's address never changes, and a burst runs thousands of pods.
        if node not in self._addresses:
            addresses = self._api.get(f"/api/v1/nodes/{node}")["status"].get("addresses") or []
            self._addresses[node] = next(
                (a["address"] for a in addresses if a["type"] == "InternalIP"), "127.0.0.1"
            )
        return self._addresses[node]

    def _running_status(
        self, pod: KubeObject, container: Mapping[str, Any], restart_count: int
    ) -> KubeObject:
        name = container["name"]
        return {
            "name": name,
            "image": container.get("image", ""),
            "imageID": f"envtest://{container.get('image', '')}",
            "containerID": _container_id(pod, name, restart_count),
            "ready": True,
            "started": True,
            "restartCount": restart_count,
            "state": {"running": {"startedAt": _now()}},
        }

    def _base_status(
        self,
        pod: KubeObject,
        phase: str,
        ready: bool,
        containers: list[KubeObject],
        reason: str | None = None,
    ) -> KubeObject:
        node = pod["spec"]["nodeName"]
        ip = pod_ip(pod, self._fake_nodes.get(node, 0))
        previous = pod.get("status", {})
        return {
            "phase": phase,
            "hostIP": previous.get("hostIP") or self._node_address(node),
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": previous.get("startTime") or _now(),
            "conditions": [
                _condition("PodScheduled", True),
                _condition("Initialized", True),
                _condition("ContainersReady", ready, None if ready else reason),
                _condition("Ready", ready, None if ready else reason),
            ],
            "containerStatuses": containers,
        }

    def _terminate(
        self,
        pod: KubeObject,
        phase: str,
        exit_code: int,
        reason: str,
        containers: set[str] | None,
        write: bool = True,
        message: str | None = None,
    ) -> KubeObject:
        counts = _restart_counts(pod)
        started = _started_at(pod)
        statuses = []
        for spec_container in pod["spec"]["containers"]:
            name = spec_container["name"]
            chosen = containers is None or name in containers
            status = self._running_status(pod, spec_container, counts.get(name, 0))
            status.update(ready=False, started=False)
            status["state"] = {
                "terminated": {
                    "exitCode": exit_code if chosen else 0,
                    "reason": reason if chosen else "Completed",
                    "startedAt": started.get(name, _now()),
                    "finishedAt": _now(),
                    "containerID": status["containerID"],
                }
            }
            if chosen and message is not None:
                status["state"]["terminated"]["message"] = message
            statuses.append(status)
        updated = self._base_status(pod, phase, ready=False, containers=statuses, reason="PodCompleted")
        if not write:
            return updated
        return self._write_status(pod, updated)

    def _write_status(self, pod: KubeObject, status: KubeObject) -> KubeObject:
        namespace, name = _ref(pod)
        # A merge patch replaces each list whole, which is what is wanted: the status computed here is
        # complete.
        body = {"metadata": {"uid": pod["metadata"]["uid"]}, "status": status}
        return self._api.patch(f"{pod_path(namespace, name)}/status", body)

    # -- graceful-deletion finisher
    # ----------------------------------------------------------------------------

    def start_finisher(self) -> None:
        """Start the background watcher that completes deletion of pods on fake nodes (not on lost ones)."""
        if self._finisher is not None:
            return
        self._stopping.clear()
        self._finisher = threading.Thread(
            target=self._finish_deletions, name="envtest-pod-finisher", daemon=True
        )
        self._finisher.start()

    def stop_finisher(self) -> None:
        if self._finisher is None:
            return
        self._stopping.set()
        self._finisher.join(timeout=10)
        self._finisher = None

    def __enter__(self) -> PodDriver:
        self.start_finisher()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_finisher()

    def _finish_deletions(self) -> None:
        while not self._stopping.is_set():
            try:
                listing = self._api.get("/api/v1/pods")
                self._finish_all(listing["items"])
                self._watch_from(listing["metadata"]["resourceVersion"])
            except (ApiError, httpx.HTTPError, OSError):
                # 410 Gone, a restarting API server, or the cluster going away at the end: list again shortly.
                self._stopping.wait(0.5)

    def _watch_from(self, resource_version: str) -> None:
        while not self._stopping.is_set():
            # A short server-side timeout is what lets the thread notice stop_finisher() within a second.
            for kind, pod in self._api.watch("/api/v1/pods", resource_version, timeout_seconds=1):
                resource_version = pod["metadata"]["resourceVersion"]
                if kind in ("ADDED", "MODIFIED"):
                    self._finish_all([pod])
                if self._stopping.is_set():
                    return

    def _finish_all(self, pods: Iterable[KubeObject]) -> None:
        lost = self.lost_nodes()
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if not pod["metadata"].get("deletionTimestamp") or not node or node in lost:
                continue
            if node not in self._fake_nodes:
                self._fake_nodes = self._list_fake_nodes()
                if node not in self._fake_nodes:
                    continue
            self._delete_now(pod)

    def _delete_now(self, pod: KubeObject) -> None:
        namespace, name = _ref(pod)
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": pod["metadata"]["uid"]}}
        try:
            self._api.delete(pod_path(namespace, name), body)
        except ApiError as error:
            if error.code not in (404, 409):  # already gone, or a new pod of the same name
                raise


def finish_deletion(api: KubeApi, pod: PodRef) -> None:
    """Complete one pod's graceful deletion by hand (for pods on a lost node, when a test wants them gone)."""
    namespace, name = _ref(pod)
    api.delete(pod_path(namespace, name), {"gracePeriodSeconds": 0})


def wait_for_pod(
    api: KubeApi, pod: PodRef, predicate: Callable[[KubeObject], bool], timeout: float = 30.0
) -> KubeObject:
    """Poll a pod until ``predicate`` holds (e.g. bound, or a PodScheduled=False reason); TimeoutError
    otherwise."""
    namespace, name = _ref(pod)
    deadline = time.monotonic() + timeout
    while True:
        current = api.get(pod_path(namespace, name))
        if predicate(current):
            return current
        if time.monotonic() > deadline:
            raise TimeoutError(f"pod {namespace}/{name} did not reach the expected state in {timeout:.0f} s")
        time.sleep(0.05)
