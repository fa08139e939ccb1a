"""Real pods on the real node: cluster DNS, pod-to-pod TCP, the in-cluster API, logs and restarts."""

from __future__ import annotations

import textwrap

import pytest

from e2e.realpods import GREETING_SERVER, RealCluster, pod, wait_for_phase

pytestmark = pytest.mark.e2e

CLIENT = textwrap.dedent(
    """
    import socket, time
    for name in ("job1-master-0.job1", "job1-master-0"):
        for attempt in range(100):
            try:
                address = socket.gethostbyname(name)
                break
            except socket.gaierror:
                time.sleep(0.1)
        print(name, "resolves to", address, flush=True)
    for attempt in range(100):
        try:
            with socket.create_connection(("job1-master-0.job1", 23456), timeout=2) as connection:
                print(connection.recv(100).decode().strip())
                break
        except OSError:
            time.sleep(0.1)
    else:
        raise SystemExit("no connection")
    """
)


def _headless_service(name: str, selector: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"clusterIP": "None", "selector": selector, "ports": [{"name": "port", "port": 23456}]},
    }


def _master_and_client(real_cluster: RealCluster, namespace: str) -> None:
    """What the operator makes of a job: a master pod with hostname + subdomain, a headless service of the
    job and one per replica; a client that looks the master up by the names a worker uses."""
    api = real_cluster.api
    services = f"/api/v1/namespaces/{namespace}/services"
    api.create(services, _headless_service("job1", {"job": "job1"}))
    api.create(services, _headless_service("job1-master-0", {"app": "job1-master-0"}))
    master = pod(
        "job1-master-0", GREETING_SERVER, hostname="job1-master-0", subdomain="job1", restartPolicy="Never"
    )
    master["metadata"]["labels"]["job"] = "job1"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    api.create(pods, master)
    api.create(pods, pod("client", CLIENT, restartPolicy="Never"))


def test_pod_resolves_peer_through_headless_services_and_connects_over_tcp(
    real_cluster: RealCluster, namespace: str
) -> None:
    _master_and_client(real_cluster, namespace)

    client = wait_for_phase(real_cluster.api, namespace, "client", ("Succeeded", "Failed"))
    master = wait_for_phase(real_cluster.api, namespace, "job1-master-0", ("Succeeded", "Failed"))

    assert client["status"]["phase"] == "Succeeded"
    assert master["status"]["phase"] == "Succeeded"


def test_kubectl_logs_shows_the_container_output(real_cluster: RealCluster, namespace: str) -> None:
    _master_and_client(real_cluster, namespace)
    wait_for_phase(real_cluster.api, namespace, "client", ("Succeeded", "Failed"))

    logs = real_cluster.kubectl("logs", "-n", namespace, "client")

    assert logs.returncode == 0, logs.stderr
    assert "hello from job1-master-0" in logs.stdout
    assert "job1-master-0.job1 resolves to 10.244.0." in logs.stdout


def test_onfailure_container_is_restarted_in_place(real_cluster: RealCluster, namespace: str) -> None:
    fails_once = textwrap.dedent(
        """
        import os
        if not os.path.exists("/scratch/ran"):
            open("/scratch/ran", "w").close()
            raise SystemExit(3)
        print("second run")
        """
    )
    body = pod("fails-once", fails_once, restartPolicy="OnFailure", volumes=[{"name": "s", "emptyDir": {}}])
    body["spec"]["containers"][0]["volumeMounts"] = [{"name": "s", "mountPath": "/scratch"}]
    real_cluster.api.create(f"/api/v1/namespaces/{namespace}/pods", body)

    done = wait_for_phase(real_cluster.api, namespace, "fails-once", ("Succeeded", "Failed"))

    assert done["status"]["phase"] == "Succeeded"
    container = done["status"]["containerStatuses"][0]
    assert container["restartCount"] == 1


def test_in_cluster_client_reaches_the_api_server_through_the_kubernetes_service(
    real_cluster: RealCluster, namespace: str
) -> None:
    # What the operator's in-cluster config does: the Service's env vars, the projected token and CA.
    in_cluster = textwrap.dedent(
        """
        import json, os, ssl, urllib.request
        account = "/var/run/secrets/kubernetes.io/serviceaccount"
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        request = urllib.request.Request(
            f"https://{host}:{port}/api/v1/namespaces/{open(account + '/namespace').read()}/pods",
            headers={"Authorization": "Bearer " + open(account + "/token").read()},
        )
        context = ssl.create_default_context(cafile=account + "/ca.crt")
        try:
            urllib.request.urlopen(request, context=context, timeout=5)
        except urllib.error.HTTPError as error:
            print("status", error.code, json.load(error)["message"])
        """
    )
    real_cluster.api.create(
        f"/api/v1/namespaces/{namespace}/pods", pod("in-cluster", in_cluster, restartPolicy="Never")
    )
    wait_for_phase(real_cluster.api, namespace, "in-cluster", ("Succeeded", "Failed"))

    logs = real_cluster.kubectl("logs", "-n", namespace, "in-cluster").stdout

    # Authenticated as the namespace's default ServiceAccount, which RBAC grants nothing: a 403 naming
    # it proves the route, the TLS chain and the token all work.
    assert f"system:serviceaccount:{namespace}:default" in logs
    assert "status 403" in logs
