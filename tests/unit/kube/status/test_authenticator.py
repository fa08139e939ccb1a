"""Who may report for a job on a cluster: a token the API server vouches for, for that job's audience,
bound to a live pod the job controls; cached, and with new tokens reviewed at a bounded rate."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx2
import pytest

from kubetrain.api.progress import StatusRoute, StatusTarget
from kubetrain.kube.runtime.store import ChangeType, Store
from kubetrain.kube.status import authenticator as module
from kubetrain.kube.status.authenticator import (
    BATCH_JOB_OWNER,
    NEGATIVE_TTL,
    POSITIVE_TTL,
    JobCaches,
    PodReporter,
    TokenReviewAuthenticator,
)
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import RefusedError

from .fakes import ObjectApi, status

TARGET = StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", "bert")
AUDIENCE = "kubeflow.org/v1/namespaces/team/pytorchjobs/bert/status"
"""Trainer v2.3's rule: the job's status path without /apis/."""
LEGACY_AUDIENCE = "kubetrain.dev/status/team/pytorchjobs/bert"
"""What kubetrain's injection gave the same job's pods before."""
ROUTE = StatusRoute.of("kubeflow.org/v1", "pytorchjobs")
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


OWNER_API_VERSIONS = {"Job": "batch/v1", "JobSet": "jobset.x-k8s.io/v1alpha2"}


def owned(kind: str, name: str, uid: str, owner_kind: str, owner_uid: str, **extra: Any) -> dict[str, Any]:
    api_version = OWNER_API_VERSIONS.get(owner_kind, "kubeflow.org/v1")
    reference = {
        "apiVersion": api_version,
        "kind": owner_kind,
        "name": "x",
        "uid": owner_uid,
        "controller": True,
    }
    metadata = {"name": name, "namespace": "team", "uid": uid, "ownerReferences": [reference], **extra}
    return {"kind": kind, "metadata": metadata}


def store(*objects: dict[str, Any]) -> Store:
    cache = Store()
    for obj in objects:
        cache.apply(ChangeType.ADDED, obj)
    return cache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Reviewer:
    """The API server's TokenReview: tokens it knows, by the audience they were issued for."""

    def __init__(self, api: ObjectApi) -> None:
        self.tokens: dict[str, tuple[str, str, str, str]] = {}
        """token → (audience, namespace, pod name, pod uid)."""
        api.answers[("POST", REVIEWS)] = self.review

    def issue(self, token: str, pod: str, uid: str, audience: str = AUDIENCE, namespace: str = "team") -> str:
        self.tokens[token] = (audience, namespace, pod, uid)
        return token

    def review(self, request: httpx2.Request) -> httpx2.Response:
        spec = json.loads(request.content)["spec"]
        known = self.tokens.get(spec["token"])
        if known is None or known[0] not in spec["audiences"]:
            error = "[invalid bearer token, token audiences are invalid for the target audiences]"
            return httpx2.Response(201, json={"status": {"authenticated": False, "error": error}})
        _, namespace, pod, uid = known
        user = {
            "username": f"system:serviceaccount:{namespace}:default",
            "extra": {
                "authentication.kubernetes.io/pod-name": [pod],
                "authentication.kubernetes.io/pod-uid": [uid],
            },
        }
        return httpx2.Response(
            201, json={"status": {"authenticated": True, "user": user, "audiences": [known[0]]}}
        )


JOB = owned("PyTorchJob", "bert", "job-uid", "None", "")
JOB["metadata"]["ownerReferences"] = []
WORKER = owned("Pod", "bert-worker-0", "pod-uid", "PyTorchJob", "job-uid")
OTHER_JOBS_POD = owned("Pod", "gpt-worker-0", "other-pod-uid", "PyTorchJob", "other-job-uid")


def authenticator(
    api: ObjectApi,
    *pods: dict[str, Any],
    clock: Clock | None = None,
    batch_jobs: Store | None = None,
    **kwargs: Any,
) -> TokenReviewAuthenticator:
    owners = {BATCH_JOB_OWNER: batch_jobs} if batch_jobs is not None else {}
    caches = JobCaches({ROUTE: store(JOB)}, store(*pods), owners)
    return TokenReviewAuthenticator(api.client(), caches, clock=clock or Clock(), **kwargs)


async def refusal(
    checker: TokenReviewAuthenticator, token: str, target: StatusTarget = TARGET
) -> RefusedError:
    with pytest.raises(RefusedError) as refused:
        await checker.authenticate(token, target)
    return refused.value


async def test_a_replica_pods_token_for_the_jobs_audience_is_accepted() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid")
    reporter = await authenticator(api, WORKER).authenticate(token, TARGET)
    assert reporter == PodReporter("bert-worker-0", "team", "pod-uid", "job-uid")
    [(_, _, review)] = api.calls("POST", REVIEWS)
    assert review["spec"] == {"token": "t1", "audiences": [AUDIENCE, LEGACY_AUDIENCE]}


async def test_the_token_of_a_pod_made_before_trainer_v2_3s_audience_rule_is_still_accepted() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid", audience=LEGACY_AUDIENCE)
    assert (await authenticator(api, WORKER).authenticate(token, TARGET)).name == "bert-worker-0"


async def test_a_token_for_another_audience_is_refused_with_403_and_the_reason() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue(
        "t1",
        "gpt-worker-0",
        "other-pod-uid",
        audience="kubeflow.org/v1/namespaces/team/pytorchjobs/gpt/status",
    )
    refused = await refusal(authenticator(api, WORKER, OTHER_JOBS_POD), token)
    assert refused.code == 403
    assert AUDIENCE in refused.message and "invalid for the target audiences" in refused.message


async def test_a_pod_of_another_job_is_refused_with_403_naming_the_pod_and_the_job() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "gpt-worker-0", "other-pod-uid")
    refused = await refusal(authenticator(api, WORKER, OTHER_JOBS_POD), token)
    assert (refused.code, refused.message) == (
        403,
        "pod gpt-worker-0 is not a replica of PyTorchJob team/bert",
    )


async def test_a_pod_in_another_namespace_is_refused_with_403() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid", namespace="elsewhere")
    refused = await refusal(authenticator(api, WORKER), token)
    assert refused.code == 403 and "namespace elsewhere, not team" in refused.message


async def test_the_token_of_a_pod_that_no_longer_exists_is_refused_with_403() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "bert-worker-0", "the-deleted-pods-uid")
    refused = await refusal(authenticator(api, WORKER), token)
    assert (refused.code, refused.message) == (
        403,
        "the token was issued to pod bert-worker-0, which no longer exists",
    )
    assert api.calls("GET", "/api/v1/namespaces/team/pods/bert-worker-0"), "the API server was asked first"


async def test_a_pod_the_cache_has_not_seen_yet_is_looked_up() -> None:
    api = ObjectApi()
    api.put_object(
        "/api/v1/namespaces/team/pods/bert-worker-1",
        owned("Pod", "bert-worker-1", "new-uid", "PyTorchJob", "job-uid"),
    )
    token = Reviewer(api).issue("t1", "bert-worker-1", "new-uid")
    reporter = await authenticator(api, WORKER).authenticate(token, TARGET)
    assert reporter.name == "bert-worker-1"


async def test_a_launcher_pod_run_by_a_batch_job_the_job_controls_is_accepted() -> None:
    api = ObjectApi()
    launcher_job = owned("Job", "pi-launcher", "batch-uid", "MPIJob", "job-uid")
    launcher_pod = owned("Pod", "pi-launcher-abcde", "launcher-pod-uid", "Job", "batch-uid")
    launcher_pod["metadata"]["ownerReferences"][0]["name"] = "pi-launcher"
    token = Reviewer(api).issue("t1", "pi-launcher-abcde", "launcher-pod-uid")
    checker = authenticator(api, launcher_pod, batch_jobs=store(launcher_job))
    assert (await checker.authenticate(token, TARGET)).name == "pi-launcher-abcde"


async def test_a_pod_of_a_registered_kind_is_accepted_through_the_controllers_between_it_and_its_job() -> (
    None
):
    """A TrainJob's pod: a batch Job's, whose controller is a JobSet, whose controller is the TrainJob."""
    api = ObjectApi()
    route = StatusRoute("trainer.kubeflow.org", "v1alpha1", "trainjobs")
    train_job = owned("TrainJob", "bert", "trainjob-uid", "None", "")
    train_job["metadata"]["ownerReferences"] = []
    job_set = owned("JobSet", "bert", "jobset-uid", "TrainJob", "trainjob-uid")
    batch_job = owned("Job", "bert-node-0", "batch-uid", "JobSet", "jobset-uid")
    batch_job["metadata"]["ownerReferences"][0]["name"] = "bert"
    node = owned("Pod", "bert-node-0-0-x", "node-uid", "Job", "batch-uid")
    node["metadata"]["ownerReferences"][0]["name"] = "bert-node-0"
    target = route.target("team", "bert")
    token = Reviewer(api).issue(
        "t1", "bert-node-0-0-x", "node-uid", audience=target.path.removeprefix("/apis/")
    )
    owners = {BATCH_JOB_OWNER: store(batch_job)}
    without_job_sets = JobCaches({ROUTE: store(JOB), route: store(train_job)}, store(node), owners)
    refused = await refusal(TokenReviewAuthenticator(api.client(), without_job_sets), token, target)
    assert (refused.code, refused.message) == (
        403,
        "pod bert-node-0-0-x is not a replica of TrainJob team/bert",
    )
    job_sets = {**owners, ("jobset.x-k8s.io/v1alpha2", "JobSet"): store(job_set)}
    caches = JobCaches({ROUTE: store(JOB), route: store(train_job)}, store(node), job_sets)
    assert (await TokenReviewAuthenticator(api.client(), caches).authenticate(token, target)).name == node[
        "metadata"
    ]["name"]


async def test_a_token_not_bound_to_a_pod_is_refused_with_403() -> None:
    api = ObjectApi()

    def user_token(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(201, json={"status": {"authenticated": True, "user": {"username": "alice"}}})

    api.answers[("POST", REVIEWS)] = user_token
    refused = await refusal(authenticator(api, WORKER), "alices-token")
    assert refused.code == 403 and "alice is not bound to a pod" in refused.message


async def test_a_job_that_does_not_exist_is_403_to_a_stranger_and_404_to_a_token_for_it() -> None:
    """Trainer v2.3's order, the token before the job: no answer tells a stranger which jobs exist."""
    api = ObjectApi()
    gone = StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", "gone")
    reviewer = Reviewer(api)
    assert (await refusal(authenticator(api, WORKER), "random", gone)).code == 403
    token = reviewer.issue("t1", "gone-worker-0", "gone-uid", audience=gone.path.removeprefix("/apis/"))
    refused = await refusal(authenticator(api, WORKER), token, gone)
    assert (refused.code, refused.message) == (404, "pytorchjobs team/gone not found")


async def test_a_valid_token_is_reviewed_once_and_its_pod_checked_every_time() -> None:
    api, clock = ObjectApi(), Clock()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid")
    checker = authenticator(api, WORKER, clock=clock)
    for _ in range(5):
        await checker.authenticate(token, TARGET)
    assert len(api.calls("POST", REVIEWS)) == 1
    checker._caches.pods.apply(ChangeType.DELETED, WORKER)
    assert (await refusal(checker, token)).code == 403, "a deleted pod's cached token is refused"


async def test_a_valid_token_is_reviewed_again_after_the_positive_ttl() -> None:
    api, clock = ObjectApi(), Clock()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid")
    checker = authenticator(api, WORKER, clock=clock)
    await checker.authenticate(token, TARGET)
    clock.now += POSITIVE_TTL
    await checker.authenticate(token, TARGET)
    assert len(api.calls("POST", REVIEWS)) == 2


async def test_a_token_about_to_expire_is_trusted_only_until_it_does() -> None:
    api, clock = ObjectApi(), Clock()
    claims = base64.urlsafe_b64encode(json.dumps({"exp": 5030}).encode()).decode().rstrip("=")
    token = Reviewer(api).issue(f"header.{claims}.signature", "bert-worker-0", "pod-uid")
    checker = authenticator(api, WORKER, clock=clock, wall_clock=lambda: 5000.0)
    await checker.authenticate(token, TARGET)
    clock.now += 30
    await checker.authenticate(token, TARGET)
    assert len(api.calls("POST", REVIEWS)) == 2


async def test_a_refused_token_is_remembered_briefly() -> None:
    api, clock = ObjectApi(), Clock()
    Reviewer(api)
    checker = authenticator(api, WORKER, clock=clock)
    for _ in range(3):
        assert (await refusal(checker, "forged")).code == 403
    assert len(api.calls("POST", REVIEWS)) == 1
    clock.now += NEGATIVE_TTL
    await refusal(checker, "forged")
    assert len(api.calls("POST", REVIEWS)) == 2


async def test_new_tokens_beyond_the_review_rate_are_refused_with_429_without_a_review() -> None:
    api, clock = ObjectApi(), Clock()
    Reviewer(api)
    checker = authenticator(api, WORKER, clock=clock, reviews=RateLimiter(1.0, 3, clock=clock))
    codes = [(await refusal(checker, f"random-{i}")).code for i in range(5)]
    assert codes == [403, 403, 403, 429, 429]
    assert len(api.calls("POST", REVIEWS)) == 3
    throttled = await refusal(checker, "random-6")
    assert throttled.retry_after is not None and throttled.retry_after > 0


async def test_requests_carrying_one_new_token_at_once_share_one_review() -> None:
    api = ObjectApi()
    token = Reviewer(api).issue("t1", "bert-worker-0", "pod-uid")
    checker = authenticator(api, WORKER)
    reporters = await asyncio.gather(*(checker.authenticate(token, TARGET) for _ in range(20)))
    assert {r.name for r in reporters} == {"bert-worker-0"}
    assert len(api.calls("POST", REVIEWS)) == 1


async def test_a_review_the_api_server_cannot_answer_is_503_and_not_remembered() -> None:
    api = ObjectApi()
    api.answers[("POST", REVIEWS)] = lambda request: status(500, "InternalError", "etcd is away")
    checker = authenticator(api, WORKER)
    assert (await refusal(checker, "t1")).code == 503
    assert (await refusal(checker, "t1")).code == 503
    assert len(api.calls("POST", REVIEWS)) == 2


async def test_the_cache_keeps_at_most_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(module, "MAX_CACHED", 10)
    api = ObjectApi()
    Reviewer(api)
    checker = authenticator(api, WORKER)
    for i in range(30):
        await refusal(checker, f"random-{i}")
    assert len(checker) == 10


async def test_before_the_caches_are_filled_a_report_is_told_to_retry_not_that_its_job_is_missing() -> None:
    api = ObjectApi()
    caches = JobCaches({ROUTE: Store()}, Store(), synced=lambda: False)
    refused = await refusal(TokenReviewAuthenticator(api.client(), caches), "t1")
    assert refused.code == 503 and refused.retry_after == 1
    assert not api.requests
