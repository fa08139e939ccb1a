"""Who sent a report, on a cluster: a TokenReview for the job's own audience, then the pod check.

Checked in Trainer v2.3's order, the token before the job, so that the answers say nothing about which jobs
exist to whoever has no token for one (503 while the operator's caches are still being filled):

1. The token is reviewed by the API server (``authentication.k8s.io/v1`` TokenReview) for the audience of
   that job's tokens (``injection.token_audience``, and the audience kubetrain gave them before, so that pods
   made then still report): an expired token, another job's token or any other token is refused with 403
   (Trainer v2.3's code) and the API server's reason. Answers are cached by the token's hash: a valid one
   until the token expires or ``POSITIVE_TTL``, whichever is first, a refusal for ``NEGATIVE_TTL``; at most
   ``MAX_CACHED`` of them. Reviews of tokens not in the cache are limited to ``REVIEWS_PER_SECOND`` (429
   beyond), and concurrent requests with one new token share one review, so a flood of random tokens costs
   the API server a bounded rate of reviews.
2. The job must exist in the operator's cache (404, as Trainer v2.3 answers for a job not found).
3. The token must be bound to a pod (its ``authentication.kubernetes.io/pod-name`` and ``pod-uid`` extras)
   in the job's namespace, and that pod, as the operator's cache has it (or the API server, when the cache
   has not seen it yet), must have the same UID and be controlled by the job, directly or through the
   controllers ``JobCaches.owners`` names (a batch Job: MPI v2beta1's launcher). Otherwise 403, saying
   which. (Trainer v2.3 takes any pod of the namespace; a tenant who may request tokens for its own pods can
   make one with another job's audience, but not one bound to that job's pods.)
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.progress import StatusRoute, StatusRoutes, StatusTarget
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.runtime.store import KubeObject, Store, controller_reference
from kubetrain.kube.status.injection import legacy_token_audience, token_audience
from kubetrain.progress.limits import RateLimiter
from kubetrain.progress.server import RefusedError, Reporter

log = logging.getLogger(__name__)

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
POSITIVE_TTL = 300.0
"""Seconds a valid token is trusted without another review (less when it expires sooner)."""
NEGATIVE_TTL = 10.0
MAX_CACHED = 10_000
REVIEWS_PER_SECOND = 50.0
REVIEW_BURST = 100
"""A thousand pods starting to report at once are all reviewed within about 20 seconds."""
BATCH_JOB_OWNER = ("batch/v1", "Job")
"""How a pod's ownerReference names a batch Job: MPI v2beta1's launcher runs in one."""
MAX_OWNER_HOPS = 3
"""Controllers between a pod and its job: a batch Job (MPI v2beta1's launcher); a batch Job and its JobSet
(a TrainJob's pods)."""


@dataclass(frozen=True)
class PodReporter(Reporter):
    """A replica pod of the job the report is for."""

    namespace: str
    pod_uid: str
    job_uid: str


def job_uid_of(reporter: Reporter) -> str:
    """The UID of the job a report's pod belongs to ("" for a reporter this authenticator did not make)."""
    return reporter.job_uid if isinstance(reporter, PodReporter) else ""


@dataclass(frozen=True)
class _Identity:
    namespace: str
    pod_name: str
    pod_uid: str


@dataclass(frozen=True)
class _Cached:
    until: float
    identity: _Identity | None
    refusal: RefusedError | None


@dataclass(frozen=True)
class JobCaches:
    """The operator's caches a report is checked against (read-only here)."""

    jobs: Mapping[StatusRoute, Store]
    """Jobs by the route of their status: the kinds this operator reconciles, one entry each. The endpoint
    serves exactly these routes."""
    pods: Store
    owners: Mapping[tuple[str, str], Store] = field(default_factory=dict)
    """Controllers that may stand between a pod and its job, by (apiVersion, kind) as an ownerReference
    names them: ``("batch/v1", "Job")`` for MPI v2beta1's launcher, a JobSet for a TrainJob."""
    synced: Callable[[], bool] = lambda: True
    """Whether the caches have been filled once: before that a job or pod not found may just not be listed
    yet (the endpoint starts before the caches sync)."""

    @property
    def routes(self) -> StatusRoutes:
        return StatusRoutes(self.jobs)

    def store(self, target: StatusTarget) -> Store | None:
        """The cache of ``target``'s kind, or None for a kind this operator does not reconcile."""
        kind = (target.api_version, target.plural)
        return next(
            (jobs for route, jobs in self.jobs.items() if (route.api_version, route.plural) == kind), None
        )


@dataclass
class ReviewCounts:
    reviews: int = 0
    cache_hits: int = 0
    throttled: int = 0


class TokenReviewAuthenticator:
    def __init__(
        self,
        http: HttpApi,
        caches: JobCaches,
        *,
        reviews: RateLimiter | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._http = http
        self._caches = caches
        # ``is None``, not ``or``: a limiter that has seen no key has length 0 and is falsy.
        limiter = RateLimiter(REVIEWS_PER_SECOND, REVIEW_BURST, clock=clock) if reviews is None else reviews
        self._reviews = limiter
        self._clock = clock
        self._wall_clock = wall_clock
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._in_flight: dict[str, asyncio.Future[_Cached]] = {}
        self.counts = ReviewCounts()

    def __len__(self) -> int:
        return len(self._cache)

    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        if not self._caches.synced():
            raise RefusedError(
                503, "the operator is starting (its caches are not filled yet); retry", retry_after=1
            )
        identity = await self._identity(token, (token_audience(target), legacy_token_audience(target)))
        jobs = self._caches.store(target)
        job = jobs.get(target.key) if jobs is not None else None
        if job is None:
            raise RefusedError(404, f"{target.plural} {target.key} not found")
        return await self._member(identity, target, job)

    # --- the token -----------------------------------------------------------------------------

    async def _identity(self, token: str, audiences: tuple[str, ...]) -> _Identity:
        key = f"{hashlib.sha256(token.encode()).hexdigest()}|{audiences[0]}"
        cached = self._cached(key)
        if cached is None:
            cached = await self._review_once(key, token, audiences)
        else:
            self.counts.cache_hits += 1
        if cached.refusal is not None:
            raise cached.refusal
        assert cached.identity is not None
        return cached.identity

    def _cached(self, key: str) -> _Cached | None:
        cached = self._cache.get(key)
        if cached is None:
            return None
        if cached.until <= self._clock():
            del self._cache[key]
            return None
        self._cache.move_to_end(key)
        return cached

    async def _review_once(self, key: str, token: str, audiences: tuple[str, ...]) -> _Cached:
        """One review per new token, however many requests carry it at once."""
        pending = self._in_flight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        wait = self._reviews.allow("tokenreviews")
        if wait is not None:
            self.counts.throttled += 1
            raise RefusedError(429, "too many new tokens to check at once; retry shortly", retry_after=wait)
        future: asyncio.Future[_Cached] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            cached = await self._review(token, audiences)
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when no one else waited
            raise
        else:
            future.set_result(cached)
            self._remember(key, cached)
            return cached
        finally:
            del self._in_flight[key]

    def _remember(self, key: str, cached: _Cached) -> None:
        self._cache[key] = cached
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)

    async def _review(self, token: str, audiences: tuple[str, ...]) -> _Cached:
        """The API server authenticates a token with any one of ``audiences`` (the first is the job's)."""
        self.counts.reviews += 1
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": list(audiences)},
        }
        try:
            response = await self._http.post(TOKEN_REVIEWS, json=body)
        except Exception as error:
            raise RefusedError(503, f"cannot check the token now ({type(error).__name__}); retry") from None
        if response.status_code >= 400:
            log.error(
                "status endpoint: TokenReview refused (%s): %s", response.status_code, response.content[:300]
            )
            raise RefusedError(
                503, f"cannot check the token now (TokenReview: {response.status_code}); retry"
            )
        review = response.json().get("status") or {}
        now = self._clock()
        if not review.get("authenticated"):
            reason = str(review.get("error") or "not authenticated")
            refusal = RefusedError(
                403,
                f"the token is not valid for this job (audience {audiences[0]}): {reason}; send the token "
                "from the file KUBEFLOW_TRAINER_SERVER_TOKEN names, read again before each report",
            )
            return _Cached(now + NEGATIVE_TTL, None, refusal)
        user = review.get("user") or {}
        username = str(user.get("username") or "")
        extra = user.get("extra") or {}
        pod_names, pod_uids = extra.get(POD_NAME_EXTRA) or [], extra.get(POD_UID_EXTRA) or []
        if not username.startswith(SERVICE_ACCOUNT_PREFIX) or not pod_names or not pod_uids:
            refusal = RefusedError(
                403,
                f"the token of {username or 'an unnamed user'} is not bound to a pod; reports must carry the "
                "projected service-account token of a replica of the job",
            )
            return _Cached(now + NEGATIVE_TTL, None, refusal)
        namespace = username.removeprefix(SERVICE_ACCOUNT_PREFIX).split(":", 1)[0]
        identity = _Identity(namespace, str(pod_names[0]), str(pod_uids[0]))
        return _Cached(now + self._positive_ttl(token), identity, None)

    def _positive_ttl(self, token: str) -> float:
        expiry = _expiry(token)
        if expiry is None:
            return POSITIVE_TTL
        return max(0.0, min(POSITIVE_TTL, expiry - self._wall_clock()))

    # --- the pod -------------------------------------------------------------------------------

    async def _member(self, identity: _Identity, target: StatusTarget, job: KubeObject) -> PodReporter:
        if identity.namespace != target.namespace:
            raise RefusedError(
                403, f"the token belongs to a pod in namespace {identity.namespace}, not {target.namespace}"
            )
        pod = self._caches.pods.get_named(identity.namespace, identity.pod_name)
        if pod is None or _uid(pod) != identity.pod_uid:
            pod = await self._fetch_pod(identity)  # the cache may not have seen it (or its replacement) yet
        if pod is None or _uid(pod) != identity.pod_uid:
            raise RefusedError(
                403, f"the token was issued to pod {identity.pod_name}, which no longer exists"
            )
        job_uid = _uid(job)
        if not self._controlled_by(pod, job_uid):
            kind = job.get("kind") or target.plural
            raise RefusedError(403, f"pod {identity.pod_name} is not a replica of {kind} {target.key}")
        return PodReporter(identity.pod_name, identity.namespace, identity.pod_uid, job_uid)

    def _controlled_by(self, pod: KubeObject, job_uid: str) -> bool:
        """Whether the job is the pod's controller, or its controller's (through ``MAX_OWNER_HOPS`` at most,
        each one the controller of the one before as the operator's caches have it)."""
        namespace = (pod.get("metadata") or {}).get("namespace")
        current: KubeObject = pod
        for _ in range(MAX_OWNER_HOPS + 1):
            owner = controller_reference(current)
            if owner is None:
                return False
            if owner.get("uid") == job_uid:
                return True
            owners = self._caches.owners.get((str(owner.get("apiVersion")), str(owner.get("kind"))))
            parent = owners.get_named(namespace, str(owner.get("name"))) if owners is not None else None
            if parent is None or _uid(parent) != owner.get("uid"):
                return False
            current = parent
        return False

    async def _fetch_pod(self, identity: _Identity) -> KubeObject | None:
        path = f"/api/v1/namespaces/{identity.namespace}/pods/{identity.pod_name}"
        try:
            response = await self._http.get(path)
        except Exception as error:
            raise RefusedError(503, f"cannot look up the pod now ({type(error).__name__}); retry") from None
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise RefusedError(503, f"cannot look up the pod now ({response.status_code}); retry")
        pod: dict[str, Any] = response.json()
        return pod


def _uid(obj: KubeObject) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT, read without verifying it: only to bound how long a review is cached."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    expiry = payload.get("exp") if isinstance(payload, dict) else None
    return float(expiry) if isinstance(expiry, int | float) and not isinstance(expiry, bool) else None
