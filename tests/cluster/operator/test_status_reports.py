"""The operator's status endpoint against a real API server: a replica's report reaches the job's status,
``kubetrain get`` and the SDK, stamped with when it was received, and a later one replaces it; Kubeflow
Trainer v2.3's own status script, run as the pod the operator rendered, sets the trainerStatus; any other
token, a malformed report and a flood are refused and change nothing; the history survives a restart; the
certificate rotates without one; a job that goes quiet is caught once its deadline has passed; and with the
endpoint off pods are as upstream's and nothing is created. How fast a report shows is
bench/operator_latency.py's to measure."""

from __future__ import annotations

import concurrent.futures
import datetime
import secrets
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    StartOperator,
    condition_true,
    create_job,
    eventually,
    get_job,
    pod,
    pytorch_job,
    wait_condition,
)
from status_support import (
    CA_CONFIG_MAP,
    SECRET,
    audience,
    ca_bundle,
    free_port,
    mint_token,
    played_env,
    post,
    start_endpoint,
    trainer_status,
    wait_default_service_account,
)

from builders import cli_runner
from kubetrain.cli.main import app
from kubetrain.envtest.kubeapi import KubeApi
from kubetrain.envtest.poddriver import PodDriver
from kubetrain.envtest.pytest_plugin import EnvtestCluster
from kubetrain.kube.status.credentials import StoredCredentials, secret_data
from kubetrain.kube.status.settings import StatusServerSettings
from kubetrain.progress.credentials import issue
from kubetrain.progress.server import TOKEN_BURST, TOKEN_RATE
from kubetrain.sdk.client import TrainingClient
from waiting import PATIENCE

pytestmark = pytest.mark.cluster

TRAINER_SCRIPT = Path(__file__).resolve().parents[3] / "tests" / "upstream" / "trainer" / "status_update.py"
"""Kubeflow Trainer v2.3.0's test/e2e/testdata/status_update.py, byte for byte."""

REPORT = {
    "trainerStatus": {
        "progressPercentage": 42,
        "estimatedRemainingSeconds": 600,
        "metrics": [{"name": "loss", "value": "0.3125"}, {"name": "accuracy", "value": "0.875"}],
    }
}


def running_job(api: KubeApi, namespace: str, name: str, **job: Any) -> dict[str, Any]:
    """A PyTorchJob (master + 1 worker, as ``default``) whose pods exist; returns its master pod."""
    wait_default_service_account(api, namespace)
    manifest = pytorch_job(name, workers=1, **job.pop("run_policy", {}))
    manifest["metadata"].update(job)
    create_job(api, namespace, manifest)
    for replica in (f"{name}-master-0", f"{name}-worker-0"):
        wait_pod(api, namespace, replica)
    return pod(api, namespace, f"{name}-master-0")


def wait_pod(api: KubeApi, namespace: str, name: str) -> None:
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"
    eventually(lambda: api.get_or_none(path), f"pod {name}")


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def received_at(status: dict[str, Any]) -> datetime.datetime:
    """A report's ``lastUpdatedTime``: when the endpoint received it, in whole seconds."""
    return datetime.datetime.fromisoformat(status["lastUpdatedTime"].replace("Z", "+00:00"))


def whole_second(moment: datetime.datetime) -> datetime.datetime:
    return moment.replace(microsecond=0)


def test_a_replicas_report_is_in_the_status_kubetrain_get_and_the_sdk(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, envtest: EnvtestCluster
) -> None:
    metrics = free_port()
    endpoint = start_endpoint(start_operator, namespace, "--metrics-bind-address", f"127.0.0.1:{metrics}")
    master = running_job(kube_api, namespace, "bert")
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    sent = utc_now()
    code, answer = post(endpoint.url("bert"), ca_bundle(kube_api, namespace), REPORT, token)
    answered = utc_now()
    assert code == 200, answer
    written = eventually(lambda: trainer_status(kube_api, namespace, "bert"), "trainerStatus")
    assert whole_second(sent) <= received_at(written) <= answered, "stamped while the request was served"
    assert written["progressPercentage"] == 42 and written["estimatedRemainingSeconds"] == 600
    assert written["metrics"] == REPORT["trainerStatus"]["metrics"]

    listed = cli_runner().invoke(
        app,
        ["get", "pytorchjobs", "-n", namespace, "--kubeconfig", str(envtest.kubeconfig)],
        env={"NO_COLOR": "1"},
    )
    header, row = listed.stdout.splitlines()[:2]
    cells = dict(zip(header.split(), row.split(), strict=False))
    assert cells["PROGRESS"] == "42%"
    assert cells["ETA"] in ("10m", "9m")
    client = TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)
    status = client.get_job("bert", job_kind="PyTorchJob").status.trainer_status
    assert status is not None and status.progress_percentage == 42 and status.metric("loss") == "0.3125"

    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=PATIENCE).read().decode()
    for sample in (
        'kubetrain_status_requests{code="200"} 1.0',
        'kubetrain_status_writes{result="written"} 1.0',
        "kubetrain_status_reports_coalesced 0.0",
        'kubetrain_status_token_reviews{outcome="reviewed"} 1.0',
        'kubetrain_status_connections{state="accepted"}',
    ):
        assert sample in text, f"{sample} missing from /metrics"


def test_a_later_report_replaces_an_earlier_one_in_the_status(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    master = running_job(kube_api, namespace, "bert")
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    ca = ca_bundle(kube_api, namespace)
    earlier = {"trainerStatus": {"progressPercentage": 10, "metrics": [{"name": "loss", "value": "2.5"}]}}
    later = {"trainerStatus": {"progressPercentage": 60, "metrics": [{"name": "loss", "value": "1.25"}]}}

    assert post(endpoint.url("bert"), ca, earlier, token)[0] == 200
    first = eventually(lambda: trainer_status(kube_api, namespace, "bert"), "the earlier report")
    assert post(endpoint.url("bert"), ca, later, token)[0] == 200

    def replaced() -> dict[str, Any] | None:
        status = trainer_status(kube_api, namespace, "bert")
        return status if status and status["progressPercentage"] == 60 else None

    second = eventually(replaced, "the later report")
    assert second["metrics"] == later["trainerStatus"]["metrics"]
    assert received_at(second) >= received_at(first)


def test_trainer_v2_3s_own_status_script_run_as_the_rendered_pod_sets_the_trainer_status(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, tmp_path: Path
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    master = running_job(kube_api, namespace, "bert")
    env = played_env(kube_api, master, "pytorch", tmp_path)
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == endpoint.url("bert")
    ran = subprocess.run(
        [sys.executable, str(TRAINER_SCRIPT)],
        env=env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.startswith("Success updating trainer status: 200 ")
    written = eventually(lambda: trainer_status(kube_api, namespace, "bert"), "trainerStatus")
    assert (written["progressPercentage"], written["estimatedRemainingSeconds"]) == (42, 120)
    assert written["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]


def test_refusals_say_why_and_change_nothing(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    bert = running_job(kube_api, namespace, "bert")
    other = running_job(kube_api, namespace, "gpt")
    ca = ca_bundle(kube_api, namespace)
    url = endpoint.url("bert")

    code, answer = post(url, ca, REPORT, None)
    assert (code, answer["reason"]) == (403, "Forbidden")
    code, answer = post(url, ca, REPORT, mint_token(kube_api, other, audience(namespace, "gpt")))
    assert code == 403 and "audience" in answer["message"], "another job's token, for its own job"
    code, answer = post(url, ca, REPORT, mint_token(kube_api, bert, "https://kubernetes.default.svc"))
    assert code == 403, "a token for the API server's audience"
    code, answer = post(url, ca, REPORT, mint_token(kube_api, other, audience(namespace, "bert")))
    assert (code, answer["message"]) == (
        403,
        f"pod gpt-master-0 is not a replica of PyTorchJob {namespace}/bert",
    )
    token = mint_token(kube_api, bert, audience(namespace, "bert"))
    code, answer = post(url, ca, {"trainerStatus": {"progressPercentage": 140}}, token)
    assert code == 422
    assert answer["details"]["causes"][0]["field"] == "trainerStatus.progressPercentage"
    assert "between 0 and 100" in answer["message"]
    code, answer = post(url, ca, b"{not json", token)
    assert (code, answer["reason"]) == (422, "Invalid")
    # Then one it accepts, for the other job. Reports are written oldest first: once this one shows, whatever
    # the refusals had left to write would show too, however slow the machine.
    accepted = {"trainerStatus": {"progressPercentage": 7}}
    gpt_token = mint_token(kube_api, other, audience(namespace, "gpt"))
    assert post(endpoint.url("gpt"), ca, accepted, gpt_token)[0] == 200
    written = eventually(lambda: trainer_status(kube_api, namespace, "gpt"), "the accepted report")
    assert written["progressPercentage"] == 7
    assert trainer_status(kube_api, namespace, "bert") is None


def test_a_flood_from_one_pod_is_refused_with_429_and_retry_after(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    master = running_job(kube_api, namespace, "bert")
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    ca, url = ca_bundle(kube_api, namespace), endpoint.url("bert")
    started = time.monotonic()
    assert [post(url, ca, REPORT, token)[0] for _ in range(3)] == [200, 200, 200], "within the burst"
    codes: list[int] = []

    def refused() -> bool:
        # A busy machine sends slower: flood until the bucket runs dry, however long that takes.
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            codes.extend(pool.map(lambda _: post(url, ca, REPORT, token)[0], range(16)))
        return 429 in codes

    eventually(refused, "a 429 for the flood")
    elapsed = time.monotonic() - started
    assert set(codes) <= {200, 429}
    assert 3 + codes.count(200) <= TOKEN_BURST + TOKEN_RATE * elapsed + 1, "the burst, then the token's rate"


def test_a_flood_of_random_tokens_is_refused_and_reviewed_at_a_bounded_rate(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    metrics = free_port()
    endpoint = start_endpoint(start_operator, namespace, "--metrics-bind-address", f"127.0.0.1:{metrics}")
    running_job(kube_api, namespace, "bert")
    ca, url = ca_bundle(kube_api, namespace), endpoint.url("bert")
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        codes = list(pool.map(lambda _: post(url, ca, REPORT, secrets.token_urlsafe(32))[0], range(400)))
    elapsed = time.monotonic() - started
    assert set(codes) <= {403, 429}
    text = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=PATIENCE).read().decode()
    reviewed = next(
        float(line.split()[-1]) for line in text.splitlines() if 'token_reviews{outcome="reviewed"}' in line
    )
    assert reviewed <= 100 + 50 * elapsed + 1, "the burst, then 50 a second"
    assert codes.count(403) == reviewed, "every 403 cost one review; every 429 none"
    assert trainer_status(kube_api, namespace, "bert") is None


def test_the_history_survives_an_operator_restart(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, envtest: EnvtestCluster
) -> None:
    port = free_port()
    first = start_endpoint(start_operator, namespace, port=port)
    master = running_job(kube_api, namespace, "bert")
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    ca = ca_bundle(kube_api, namespace)
    for loss in ("2.5", "2.0"):
        report = {"trainerStatus": {"progressPercentage": 10, "metrics": [{"name": "loss", "value": loss}]}}
        assert post(first.url("bert"), ca, report, token)[0] == 200
        time.sleep(1.1)
    assert first.operator.terminate() == 0, "SIGTERM: the last points are written on the way out"
    client = TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)
    before = client.get_job_progress_history("bert", job_kind="PyTorchJob")
    assert [p.metrics["loss"] for p in before.points] == [2.5, 2.0]

    second = start_endpoint(start_operator, namespace, port=port)
    report = {"trainerStatus": {"progressPercentage": 60, "metrics": [{"name": "loss", "value": "1.25"}]}}
    assert post(second.url("bert"), ca, report, token)[0] == 200
    second.operator.terminate()
    after = client.get_job_progress_history("bert", job_kind="PyTorchJob")
    assert [p.metrics["loss"] for p in after.points] == [2.5, 2.0, 1.25]
    assert [p.progress for p in after.points] == [10, 10, 60]


def test_a_job_that_never_reported_has_an_empty_history(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, envtest: EnvtestCluster
) -> None:
    start_endpoint(start_operator, namespace)
    running_job(kube_api, namespace, "quiet")
    client = TrainingClient(config_file=str(envtest.kubeconfig), namespace=namespace)
    assert client.get_job_progress_history("quiet", job_kind="PyTorchJob").points == []


def _served_serial(port: int, ca: str) -> int:
    context = ssl.create_default_context(cadata=ca)
    context.check_hostname = False
    with context.wrap_socket(__import__("socket").create_connection(("127.0.0.1", port), 5)) as tls:
        der = tls.getpeercert(binary_form=True)
    from cryptography import x509

    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _serial(pem: str) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.encode()).serial_number


def test_credentials_due_for_renewal_are_published_then_served_without_a_restart(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    port = free_port()
    base_url = f"https://127.0.0.1:{port}"
    names = StatusServerSettings("127.0.0.1", port, base_url, namespace).certificate_names()
    now = datetime.datetime.now(datetime.UTC)
    due = issue(names, now - datetime.timedelta(days=70))
    secret_path = f"/api/v1/namespaces/{namespace}/secrets/{SECRET}"
    kube_api.create(
        f"/api/v1/namespaces/{namespace}/secrets",
        {"metadata": {"name": SECRET}, "data": secret_data(StoredCredentials(due))},
    )
    endpoint = start_endpoint(start_operator, namespace, port=port)
    running_job(kube_api, namespace, "bert")

    renewed = eventually(lambda: kube_api.get(secret_path)["metadata"].get("annotations"), "a renewal")
    assert "kubetrain.dev/next-credentials-since" in renewed
    bundle = ca_bundle(kube_api, namespace)
    assert bundle.startswith(due.ca_cert) and bundle.count("BEGIN CERTIFICATE") == 2, "both CAs published"
    assert _served_serial(port, due.ca_cert) == _serial(due.cert), "the old certificate still served"

    # Time for every pod's volume to have the new CA has passed: the next read promotes it.
    stored = kube_api.get(secret_path)
    since = (now - datetime.timedelta(minutes=11)).isoformat()
    stored["metadata"]["annotations"] = {"kubetrain.dev/next-credentials-since": since}
    kube_api.replace(secret_path, stored)
    new_ca = bundle[len(due.ca_cert) :]

    def serving_the_new_one() -> bool:
        try:
            _served_serial(port, new_ca)
        except ssl.SSLError:
            return False
        return True

    eventually(serving_the_new_one, "the renewed certificate served")
    assert endpoint.operator.process.poll() is None, "no restart"
    eventually(lambda: ca_bundle(kube_api, namespace) == new_ca + due.ca_cert, "the bundle: new, then old")
    master = pod(kube_api, namespace, "bert-master-0")
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    assert post(endpoint.url("bert"), new_ca, REPORT, token)[0] == 200


DEADLINE = 5
DEADLINE_PASSED = datetime.timedelta(seconds=DEADLINE)


def transitioned(condition: dict[str, Any]) -> datetime.datetime:
    return datetime.datetime.fromisoformat(condition["lastTransitionTime"].replace("Z", "+00:00"))


def _silent_job(
    kube_api: KubeApi, namespace: str, pod_driver: PodDriver, name: str, action: str
) -> dict[str, Any]:
    """A running job whose replicas will report once, then fall silent; returns its master."""
    annotations = {
        "kubetrain.dev/progress-deadline-seconds": str(DEADLINE),
        "kubetrain.dev/progress-deadline-action": action,
    }
    master = running_job(kube_api, namespace, name, annotations=annotations)
    for replica in (master, pod(kube_api, namespace, f"{name}-worker-0")):
        pod_driver.run(replica)
    wait_condition(kube_api, "PyTorchJob", namespace, name, "Running")
    return master


def test_a_job_that_stops_reporting_is_stalled_once_its_deadline_has_passed(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, pod_driver: PodDriver
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    master = _silent_job(kube_api, namespace, pod_driver, "hangs", "Warn")
    token = mint_token(kube_api, master, audience(namespace, "hangs"))
    assert post(endpoint.url("hangs"), ca_bundle(kube_api, namespace), REPORT, token)[0] == 200
    report = eventually(lambda: trainer_status(kube_api, namespace, "hangs"), "the report")
    stalled = wait_condition(kube_api, "PyTorchJob", namespace, "hangs", "Stalled")
    condition = condition_true(stalled, "Stalled")
    assert condition is not None and condition["reason"] == "ProgressDeadlineExceeded"
    assert transitioned(condition) >= received_at(report) + DEADLINE_PASSED, "not before the deadline"
    assert "hangs-master-0" in condition["message"]
    assert condition_true(get_job(kube_api, "PyTorchJob", namespace, "hangs"), "Running"), "processes alive"


def test_a_silent_job_that_asked_for_it_is_failed_and_restarted(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator, pod_driver: PodDriver
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    master = _silent_job(kube_api, namespace, pod_driver, "hangs", "Fail")
    token = mint_token(kube_api, master, audience(namespace, "hangs"))
    assert post(endpoint.url("hangs"), ca_bundle(kube_api, namespace), REPORT, token)[0] == 200
    report = eventually(lambda: trainer_status(kube_api, namespace, "hangs"), "the report")

    def replaced() -> bool:
        current = kube_api.get_or_none(f"/api/v1/namespaces/{namespace}/pods/hangs-master-0")
        return current is not None and current["metadata"]["uid"] != master["metadata"]["uid"]

    eventually(replaced, "the silent master replaced")
    job = get_job(kube_api, "PyTorchJob", namespace, "hangs")
    restarting = [c for c in job["status"]["conditions"] if c["type"] == "Restarting"]
    assert restarting and restarting[-1]["reason"] == "ProgressDeadlineExceeded"
    assert transitioned(restarting[-1]) >= received_at(report) + DEADLINE_PASSED, "not before the deadline"


def test_with_the_endpoint_off_pods_are_upstreams_and_nothing_is_created(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    operator = start_operator("--status-server-bind-address", "0", "--status-server-namespace", namespace)
    master = running_job(kube_api, namespace, "plain")
    spec = master["spec"]
    assert all(not v.get("projected") for v in spec.get("volumes") or [])
    names = {e["name"] for c in spec["containers"] for e in c.get("env") or []}
    assert not {n for n in names if n.startswith("KUBEFLOW_TRAINER_")}
    assert not kube_api.exists(f"/api/v1/namespaces/{namespace}/secrets/{SECRET}")
    assert not kube_api.exists(f"/api/v1/namespaces/{namespace}/configmaps/{CA_CONFIG_MAP}")
    assert "status endpoint" not in operator.log


def test_a_follower_replica_serves_the_same_certificate_and_writes_what_it_receives(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    election = ("--leader-elect", "--leader-election-namespace", namespace)
    leader = start_endpoint(start_operator, namespace, *election)
    eventually(lambda: "status endpoint: serving" in leader.operator.log)
    master = running_job(kube_api, namespace, "bert")
    follower = start_endpoint(start_operator, namespace, *election)
    assert "created credentials" not in follower.operator.log, "it read the leader's Secret"
    ca = ca_bundle(kube_api, namespace)
    token = mint_token(kube_api, master, audience(namespace, "bert"))
    assert post(follower.url("bert"), ca, REPORT, token)[0] == 200
    written = eventually(lambda: trainer_status(kube_api, namespace, "bert"), "the follower's write")
    assert written["progressPercentage"] == 42
    assert _served_serial(leader.port, ca) == _served_serial(follower.port, ca)


def test_the_mpi_v2beta1_launcher_run_by_its_batch_job_reports_for_its_mpijob(
    kube_api: KubeApi, namespace: str, start_operator: StartOperator
) -> None:
    endpoint = start_endpoint(start_operator, namespace)
    wait_default_service_account(kube_api, namespace)
    launcher = {"name": "mpi", "image": "example.com/horovod:1", "command": ["mpirun", "python", "train.py"]}
    worker = {"name": "mpi", "image": "example.com/horovod:1"}
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "pi"},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": {"containers": [launcher]}}},
                "Worker": {"replicas": 1, "template": {"spec": {"containers": [worker]}}},
            }
        },
    }
    kube_api.create(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs", mpijob)
    selector = {"labelSelector": "training.kubeflow.org/job-name=pi,training.kubeflow.org/job-role=launcher"}

    def launcher_pod() -> dict[str, Any] | None:
        items = kube_api.get(f"/api/v1/namespaces/{namespace}/pods", selector)["items"]
        return items[0] if items else None

    pod_of_the_batch_job = eventually(launcher_pod, "the launcher pod the Job controller makes")
    env = {e["name"] for e in pod_of_the_batch_job["spec"]["containers"][0]["env"]}
    assert "KUBEFLOW_TRAINER_SERVER_URL" in env
    token = mint_token(
        kube_api, pod_of_the_batch_job, audience(namespace, "pi", "mpijobs", "kubeflow.org/v2beta1")
    )
    url = endpoint.url("pi", "mpijobs", "kubeflow.org/v2beta1")
    code, answer = post(url, ca_bundle(kube_api, namespace), REPORT, token)
    assert code == 200, answer
    written = eventually(
        lambda: (
            kube_api.get(f"/apis/kubeflow.org/v2beta1/namespaces/{namespace}/mpijobs/pi").get("status") or {}
        ).get("trainerStatus"),
        "the MPIJob's trainerStatus",
    )
    assert written["progressPercentage"] == 42
