"""Progress reports on the real node: a PyTorchJob whose script reports with the standard library and the
three injected variables alone (docs/progress.md's own example), to the in-cluster operator's status endpoint
(the standalone overlay as it ships: HTTPS through the headless Service, a projected token, the CA from the
namespace's ConfigMap).

Its progress is shown by ``kubectl get``, ``kubetrain get`` and the SDK, each showing a report no older than
the last one the script had logged (how soon is bench/progress_reporting.py's to measure); Kubeflow Trainer
v2.3's own status script, unchanged, sets a PyTorchJob's trainerStatus from its pod and a TrainJob's from its
trainer pod (its JobSet run by the real JobSet controller); another job's token, no token, a token of
another job's pod and a flood are refused (403, 403, 403, 429) and change nothing; and a job that reports and
then goes quiet with its process alive is failed and restarted at its deadline.
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import ssl
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from builders import container, manifest
from docs_blocks import section_text
from e2e.realpods import (
    TEST_IMAGE,
    TRAINJOBS,
    RealCluster,
    jobset_pods,
    trainjob,
    trainjob_outcome,
    wait_until,
)
from e2e.session_operator import operator_pods
from kubetrain.sdk.client import TrainingClient
from waiting import PATIENCE

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SERVICE = "training-operator-status.kubeflow.svc"
STEPS = 20

DOCS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "progress.md"
TRAINER_SCRIPT = (
    Path(__file__).resolve().parents[2] / "tests" / "upstream" / "trainer" / "status_update.py"
).read_text()
"""Kubeflow Trainer v2.3.0's test/e2e/testdata/status_update.py, byte for byte (run as ``python -c``)."""
PYTHON_BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)
[DOCUMENTED_REPORT] = PYTHON_BLOCK.findall(section_text(DOCS_PAGE, "On a cluster"))
"""The page's stdlib reporter, ``report(progress, remaining_seconds, **metrics)``, as the page shows it."""

REPORTER = (
    DOCUMENTED_REPORT
    + f"""
import time
for step in range(1, {STEPS} + 1):
    progress = step * 100 // {STEPS}
    code = report(progress, {STEPS} - step, loss=round(2.0 / step, 4))
    print(f"step {{step}} progress {{progress}} code {{code}} at {{time.time():.3f}}", flush=True)
    time.sleep(1)
time.sleep(3600)  # still Running when a loaded machine gets to read its ETA (a finished job shows none)
"""
)

HANGS = (
    DOCUMENTED_REPORT
    + """
import time
print("reported", report(5, 600, loss=1.5), flush=True)
time.sleep(3600)  # alive and silent: hung
"""
)

# Requests no reporter should make: to another job's URL, and without a token (the standard library again).
INTRUDER = """
import json, os, ssl, time, urllib.error, urllib.request

URL = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
CONTEXT = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as file:
    TOKEN = file.read().strip()


def post(url, body, token=True):
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + TOKEN
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers=headers)
    try:
        with urllib.request.urlopen(request, context=CONTEXT, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


other = URL.replace("/pytorchjobs/intruder/", "/pytorchjobs/reporter/")
body = {"trainerStatus": {"progressPercentage": 99}}
results = {
    "another_jobs_url": post(other, body),
    "no_token": post(other, body, token=False),
    "flood": [post(URL, {"trainerStatus": {"progressPercentage": 1}}) for _ in range(30)],
}
print("RESULTS " + json.dumps(results), flush=True)
time.sleep(300)  # alive, so that a token can be bound to this pod
"""


def job(name: str, script: str, **metadata: Any) -> dict[str, Any]:
    body = manifest("PyTorchJob", {}, name=name, namespace=None)
    body["metadata"].update(metadata)
    command = ["python", "-u", "-c", script]
    main = container("pytorch", TEST_IMAGE, imagePullPolicy="Never", command=command)
    body["spec"]["pytorchReplicaSpecs"] = {
        "Master": {
            "replicas": 1,
            "restartPolicy": "OnFailure",
            "template": {"spec": {"terminationGracePeriodSeconds": 1, "containers": [main]}},
        }
    }
    body["spec"]["runPolicy"] = {"backoffLimit": 5}
    return body


class Jobs:
    def __init__(self, cluster: RealCluster, namespace: str) -> None:
        self.cluster = cluster
        self.namespace = namespace
        self.path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs"

    def create(self, body: dict[str, Any]) -> None:
        self.cluster.api.create(self.path, body)

    def get(self, name: str) -> dict[str, Any]:
        return dict(self.cluster.api.get(f"{self.path}/{name}"))

    def trainer_status(self, name: str) -> dict[str, Any] | None:
        status: dict[str, Any] | None = self.get(name).get("status", {}).get("trainerStatus")
        return status

    def master(self, name: str) -> dict[str, Any] | None:
        found = self.cluster.api.get_or_none(f"/api/v1/namespaces/{self.namespace}/pods/{name}-master-0")
        return None if found is None else dict(found)

    def logs(self, name: str) -> str:
        return self.cluster.kubectl("-n", self.namespace, "logs", f"{name}-master-0").stdout


@pytest.fixture
def jobs(operator: RealCluster, namespace: str) -> Iterator[Jobs]:
    yield Jobs(operator, namespace)


def latest_report(logs: str) -> tuple[int, float] | None:
    """(progress, when) of the last accepted report the script logged."""
    found = re.findall(r"progress (\d+) code 200 at ([\d.]+)", logs)
    return (int(found[-1][0]), float(found[-1][1])) if found else None


def table(output: str) -> dict[str, str]:
    """The one row of a ``get`` table, by column (``PROGRESS %`` read as one column)."""
    header, row = output.replace("PROGRESS %", "PROGRESS%").splitlines()[:2]
    return dict(zip(header.split(), row.split(), strict=False))


def shown_after_the_latest_report(jobs: Jobs, shows: Any) -> int:
    """The progress ``shows`` shows once it has caught up with the last report the script logged as
    accepted: that report's progress, or a later one's."""
    progress: int
    progress, _ = wait_until("a report", lambda: latest_report(jobs.logs("reporter")))

    def caught_up() -> int | None:
        seen: int | None = shows()
        return seen if seen is not None and seen >= progress else None

    shown: int = wait_until(f"{progress}% or more shown", caught_up)
    return shown


def test_a_stdlib_reporters_progress_is_shown_by_kubectl_kubetrain_and_the_sdk_in_the_order_reported(
    jobs: Jobs, operator: RealCluster, namespace: str
) -> None:
    jobs.create(job("reporter", REPORTER))
    client = TrainingClient(config_file=str(operator.kubeconfig), namespace=namespace)

    def kubectl_progress() -> int | None:
        shown = table(operator.kubectl("-n", namespace, "get", "pytorchjob", "reporter").stdout)["PROGRESS%"]
        return int(shown) if shown.isdigit() else None

    def kubetrain_progress() -> int | None:
        shown = table(operator.kubetrain("get", "pytorchjob", "reporter", "-n", namespace).stdout)["PROGRESS"]
        return int(shown.rstrip("%")) if shown != "-" else None

    def sdk_progress() -> int | None:
        status = client.get_job("reporter", job_kind="PyTorchJob").status.trainer_status
        return None if status is None else status.progress_percentage

    # Asked one after the other, each shows a report at least as recent as the one before it showed: the
    # three read the same status, which only ever moves forward.
    shown = [
        shown_after_the_latest_report(jobs, shows)
        for shows in (kubectl_progress, kubetrain_progress, sdk_progress)
    ]
    assert shown == sorted(shown), shown
    eta = operator.kubectl(
        "-n",
        namespace,
        "get",
        "pytorchjob",
        "reporter",
        "-o",
        "jsonpath={.status.trainerStatus.estimatedRemainingSeconds}",
    ).stdout
    assert eta.isdigit() and int(eta) < STEPS
    assert table(operator.kubetrain("get", "pytorchjob", "reporter", "-n", namespace).stdout)["ETA"].endswith(
        "s"
    )
    status = client.get_job("reporter", job_kind="PyTorchJob").status.trainer_status
    assert status is not None and status.metric("loss") is not None


def _time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def _at(status: dict[str, Any] | None, progress: int) -> dict[str, Any] | None:
    return status if status is not None and status.get("progressPercentage") == progress else None


def _pinned_post(address: str, ca: str, path: str, token: str) -> int:
    """A report from this machine straight to an operator pod, verified as the Service's name."""

    class Pinned(http.client.HTTPSConnection):
        def connect(self) -> None:
            raw = socket.create_connection((address, 8443), 10)
            self.sock = ssl.create_default_context(cadata=ca).wrap_socket(raw, server_hostname=SERVICE)

    connection = Pinned(SERVICE, 8443, timeout=10)
    body = json.dumps({"trainerStatus": {"progressPercentage": 99}})
    connection.request("POST", path, body, {"Authorization": f"Bearer {token}"})
    return connection.getresponse().status


def test_trainer_v2_3s_own_status_script_in_a_pytorchjobs_pod_sets_its_trainer_status(
    jobs: Jobs, operator: RealCluster
) -> None:
    jobs.create(job("trainer-script", TRAINER_SCRIPT))
    status = wait_until("the script's report", lambda: _at(jobs.trainer_status("trainer-script"), 42))
    assert status["estimatedRemainingSeconds"] == 120
    assert status["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    # The status is written within a second of the answer; the answer reaches the pod's log in its own time.
    wait_until(
        "the script's success in its log",
        lambda: jobs.logs("trainer-script").startswith("Success updating trainer status: 200 "),
        PATIENCE,
    )


def test_trainer_v2_3s_own_status_script_in_a_trainjobs_trainer_pod_sets_its_trainer_status(
    operator: RealCluster, namespace: str
) -> None:
    # On the operator's built-in torch-distributed runtime, as Trainer's own e2e suite runs the script.
    body = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "trainer-script"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "numNodes": 1,
                "image": TEST_IMAGE,
                "command": ["python", "-u", "-c", TRAINER_SCRIPT],
            },
        },
    }
    operator.api.create(f"{TRAINJOBS}/namespaces/{namespace}/trainjobs", body)

    def reported() -> dict[str, Any] | None:
        status = trainjob(operator.api, namespace, "trainer-script").get("status", {}).get("trainerStatus")
        return _at(status, 42)

    status = wait_until("the script's report", reported)
    assert status["estimatedRemainingSeconds"] == 120
    assert status["metrics"] == [{"name": "loss", "value": "0.123"}, {"name": "accuracy", "value": "0.95"}]
    outcome = wait_until(
        "the TrainJob's outcome",
        lambda: trainjob_outcome(operator.api, namespace, "trainer-script"),
        PATIENCE,
    )
    assert outcome["type"] == "Complete"
    [pod] = jobset_pods(operator.api, namespace, "trainer-script")
    logs = operator.kubectl("-n", namespace, "logs", pod["metadata"]["name"], "-c", "node").stdout
    assert logs.startswith("Success updating trainer status: 200 "), logs


def test_other_jobs_tokens_no_token_and_a_flood_are_refused_and_change_nothing(
    jobs: Jobs, operator: RealCluster, namespace: str
) -> None:
    jobs.create(job("reporter", REPORTER))
    wait_until("the reporter done", lambda: f"step {STEPS} " in jobs.logs("reporter"))
    # Its last report is written within a second of the one before (one status write a second per job).
    before = wait_until(
        "its last report written", lambda: _at(jobs.trainer_status("reporter"), 100), PATIENCE
    )

    jobs.create(job("intruder", INTRUDER))
    line = wait_until(
        "the intruder's results", lambda: re.search(r"RESULTS (.*)", jobs.logs("intruder")), 180
    )
    results = json.loads(line.group(1))
    assert results["another_jobs_url"] == 403, "its token is for its own job's audience"
    assert results["no_token"] == 403
    assert results["flood"][:3] == [200, 200, 200]
    # Each of the two replicas the Service resolves to limits the token on its own (a burst of 5, then 2 a
    # second): together they let through twice what one would.
    assert results["flood"].count(429) >= 10

    # A token with the reporter's audience, bound to the intruder's pod (what a tenant allowed to request
    # tokens for its pods could make): the pod check refuses it.
    intruder = jobs.master("intruder")
    assert intruder is not None
    request = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {
            "audiences": [f"kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/reporter/status"],
            "expirationSeconds": 600,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": "intruder-master-0",
                "uid": intruder["metadata"]["uid"],
            },
        },
    }
    token = operator.api.create(f"/api/v1/namespaces/{namespace}/serviceaccounts/default/token", request)[
        "status"
    ]["token"]
    ca = operator.api.get(f"/api/v1/namespaces/{namespace}/configmaps/kubetrain-status-ca")["data"]["ca.crt"]
    path = f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/reporter/status"
    # Every replica serves the endpoint (the Service resolves to all that are ready): each must refuse.
    for operator_pod in operator_pods(operator):
        assert _pinned_post(operator_pod["status"]["podIP"], ca, path, token) == 403

    # The 403s above are the refusals themselves; this only confirms that nothing reached the status. A
    # window for something that must not happen: load could only hide a write, never fail the test.
    time.sleep(2)
    assert jobs.trainer_status("reporter") == before


def test_a_job_that_reports_then_hangs_is_failed_and_restarted_at_its_deadline(
    jobs: Jobs, operator: RealCluster
) -> None:
    deadline = 10
    annotations = {
        "kubetrain.dev/progress-deadline-seconds": str(deadline),
        "kubetrain.dev/progress-deadline-action": "Fail",
    }
    jobs.create(job("hangs", HANGS, annotations=annotations))
    wait_until("the report", lambda: "reported 200" in jobs.logs("hangs"))
    report = wait_until("the report written", lambda: _at(jobs.trainer_status("hangs"), 5))
    first = jobs.master("hangs")
    assert first is not None

    def replaced() -> bool:
        current = jobs.master("hangs")
        return current is not None and current["metadata"]["uid"] != first["metadata"]["uid"]

    wait_until("the hung master replaced", replaced)
    conditions = jobs.get("hangs")["status"]["conditions"]
    restarting = [c for c in conditions if c["type"] == "Restarting"]
    assert restarting and restarting[-1]["reason"] == "ProgressDeadlineExceeded"
    # Restarted at its deadline, not before: by the job's own timestamps (both whole seconds, rounded down).
    silent = _time(restarting[-1]["lastTransitionTime"]) - _time(report["lastUpdatedTime"])
    assert silent.total_seconds() >= deadline, silent
    assert "hangs-master-0" in restarting[-1]["message"]
    wait_until("the new master reporting", lambda: "reported 200" in jobs.logs("hangs"), PATIENCE)
