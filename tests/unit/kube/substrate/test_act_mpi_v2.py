"""Carrying out MPIJob v2beta1 decisions: the launcher as a batch Job, the SSH Secret's keys, and the
launcher Job's ``suspend`` following the MPIJob's (§4.12 step 8)."""

from __future__ import annotations

from typing import Any

import httpx2

from builders import job
from kubetrain.api.jobs import V2BETA1, TrainingJob
from kubetrain.engine.admission import admit
from kubetrain.engine.types import CreateReplica, Decision
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube.act import Actor, Target
from kubetrain.kube.events import EventRecorder
from kubetrain.kube.metrics import OperatorMetrics
from kubetrain.kube.render import RenderSettings
from kubetrain.kube.runtime.expectations import Expectations

from .fakes import FakeApi

JOBS = "/apis/batch/v1/namespaces/default/jobs"


def _mpijob(**run_policy: Any) -> TrainingJob:
    spec = {"runPolicy": run_policy} if run_policy else None
    return admit(job("MPIJob", {"Launcher": 1, "Worker": 1}, name="pi", api_version=V2BETA1, spec=spec))


def _target(mpijob: TrainingJob, *batch_jobs: dict[str, Any]) -> Target:
    stored = {**mpijob.to_wire(), "metadata": {"name": "pi", "namespace": "default", "uid": "u1"}}
    return Target("default/pi", stored, mpijob, framework_for(mpijob), batch_jobs=batch_jobs)


async def _carry_out(target: Target, *actions: CreateReplica) -> list[tuple[str, str, Any]]:
    api = FakeApi()
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(api.handle), base_url="https://api")
    actor = Actor(http, Expectations(), EventRecorder(http), OperatorMetrics(), RenderSettings())
    await actor.carry_out(target, Decision(actions=actions, status=target.job.status))
    return api.requests


def _launcher_job(suspend: bool, start_time: str | None = None) -> dict[str, Any]:
    status = {"startTime": start_time} if start_time else {}
    # As the mpi-operator labels it: `app` on the Job, the replica's labels on its pod template.
    template = {"metadata": {"labels": {"training.kubeflow.org/job-role": "launcher"}}}
    metadata = {"name": "pi-launcher", "labels": {"app": "pi"}}
    return {"metadata": metadata, "spec": {"suspend": suspend, "template": template}, "status": status}


async def test_the_launcher_is_created_as_a_batch_job_with_the_run_policy() -> None:
    requests = await _carry_out(_target(_mpijob(backoffLimit=2)), CreateReplica("Launcher", 0))
    [body] = [body for method, path, body in requests if (method, path) == ("POST", JOBS)]
    assert (body["kind"], body["metadata"]["name"], body["spec"]["backoffLimit"]) == ("Job", "pi-launcher", 2)


async def test_the_ssh_secret_is_created_with_a_key_pair() -> None:
    requests = await _carry_out(_target(_mpijob()))
    [secret] = [body for method, path, body in requests if path.endswith("/secrets")]
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}


async def test_a_suspended_mpijob_suspends_its_launcher_job() -> None:
    requests = await _carry_out(_target(_mpijob(suspend=True), _launcher_job(suspend=False)))
    patches = [(path, body) for method, path, body in requests if method == "PATCH"]
    assert patches == [(f"{JOBS}/pi-launcher", {"spec": {"suspend": True}})]


async def test_resuming_clears_the_launcher_jobs_start_time_then_unsuspends_it() -> None:
    launcher = _launcher_job(suspend=True, start_time="2026-01-01T00:00:00Z")
    requests = await _carry_out(_target(_mpijob(), launcher))
    patches = [(path, body) for method, path, body in requests if method == "PATCH"]
    assert [path for path, _ in patches] == [f"{JOBS}/pi-launcher/status", f"{JOBS}/pi-launcher"]
    assert patches[0][1] == {"status": {"startTime": None}}
    assert patches[1][1]["spec"]["suspend"] is False


async def test_a_launcher_job_in_step_with_the_mpijob_is_left_alone() -> None:
    requests = await _carry_out(_target(_mpijob(), _launcher_job(suspend=False)))
    assert not [method for method, _, _ in requests if method == "PATCH"]
