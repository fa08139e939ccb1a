"""The Jobs view's web server: the page, its JSON API and its live streams (Server-Sent Events).

Every job is addressed as ``/api/jobs/<source>/<namespace>/<kind slug>/<name>`` (``views.job_id``). Reads of
the list and of a job's live state come from the sources' watches, held once for all pages; pods, events,
logs, history and diagnosis are read through the SDK when a page asks, and every action goes through it.

Guards, in the order a request meets them: security headers on every answer (a strict Content Security
Policy: the page loads nothing from anywhere else); the Host header (run locally, only the address it
listens on, which stops DNS rebinding); the identity (in-cluster, 401 without the trusted header); for a
request that changes something, a same-origin check and a CSRF token (a cookie the page echoes in a header);
then, per request, ``Access.allowed`` for exactly what it reads or does (403 naming it, nothing shown).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web

from kubetrain.api.errors import InvalidJobError
from kubetrain.dashboard import streams, views
from kubetrain.dashboard.access import Access, Attributes, User
from kubetrain.dashboard.sources import Entry, Source, Subscription
from kubetrain.dashboard.streams import SECURITY_HEADERS
from kubetrain.sdk import tables
from kubetrain.sdk.client import kind_argument as sdk_kind_argument
from kubetrain.sdk.errors import (
    AccessDeniedError,
    BackendUnavailableError,
    JobExistsError,
    JobNotFoundError,
    TrainingApiError,
    UnsupportedOperationError,
)
from kubetrain.sdk.kinds import JobKind

log = logging.getLogger(__name__)

STATIC = resources.files("kubetrain.dashboard") / "static"
CSRF_COOKIE = "kubetrain-csrf"
CSRF_HEADER = "X-CSRF-Token"
FIRST_LIST_SECONDS = 5.0
LOG_TAIL_DEFAULT, LOG_TAIL_MAX = 1000, 10_000
LOG_STREAMS_MAX = 64
"""Log streams open at once, for the whole server: each holds a thread reading the backend."""
MAX_MANIFEST_BYTES = 256 * 1024
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
USER: web.RequestKey[User | None] = web.RequestKey("user")


def kind_argument(kind: JobKind) -> str:
    """A kind name the SDK resolves to exactly this kind (the v2beta1 MPIJob needs its version)."""
    return sdk_kind_argument(kind)


class RequestError(Exception):
    def __init__(self, status: int, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors or []


def problem_text(error: BaseException) -> str:
    """What a page is told of a failure that ends a stream."""
    try:
        return _problem_for(error).message
    except BaseException:
        return f"{type(error).__name__}: {error}"


def _problem_for(error: BaseException) -> RequestError:
    if isinstance(error, RequestError):
        return error
    if isinstance(error, InvalidJobError):
        return RequestError(422, "invalid job", [str(e) for e in error.errors])
    if isinstance(error, JobNotFoundError):
        return RequestError(404, str(error))
    if isinstance(error, AccessDeniedError):
        return RequestError(403, str(error))
    if isinstance(error, JobExistsError):
        return RequestError(409, str(error))
    if isinstance(error, BackendUnavailableError):
        return RequestError(503, str(error))
    if isinstance(error, UnsupportedOperationError):
        return RequestError(501, str(error))
    if isinstance(error, TrainingApiError):
        return RequestError(502, str(error))
    if isinstance(error, ValueError):
        return RequestError(422, str(error))
    raise error


@dataclass(frozen=True)
class JobRef:
    source: Source
    namespace: str
    kind: JobKind
    name: str

    @property
    def id(self) -> str:
        return views.job_id(self.source.name, self.namespace, self.kind, self.name)

    def attributes(self, verb: str, resource: str | None = None, subresource: str = "") -> Attributes:
        if resource is None:
            return Attributes(verb, self.kind.plural, self.namespace, self.kind.group, self.name, subresource)
        return Attributes(verb, resource, self.namespace, subresource=subresource)


@dataclass
class Dashboard:
    sources: dict[str, Source]
    access: Access
    allowed_hosts: frozenset[str] | None
    """Host headers served (run locally); None: any (behind a gateway that routes by host)."""
    working_dir: Path | None = None
    """Where local runs created from the page run (their manifests' relative paths)."""
    static: Any = STATIC
    log_streams: int = 0

    # --- the application ----------------------------------------------------------------------

    def application(self) -> web.Application:
        app = web.Application(
            middlewares=[self._headers, self._host, self._identity, self._csrf],
            client_max_size=MAX_MANIFEST_BYTES,
        )
        app.router.add_get("/", self.index)
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/static/{path:.+}", self.asset)
        app.router.add_get("/api/session", self.session)
        app.router.add_get("/api/stream", self.stream)
        app.router.add_post("/api/plan", self.plan)
        app.router.add_post("/api/jobs", self.create)
        job = "/api/jobs/{source}/{namespace}/{kind}/{name}"
        app.router.add_get(job, self.job)
        app.router.add_delete(job, self.delete)
        app.router.add_get(f"{job}/stream", self.job_stream)
        app.router.add_get(f"{job}/pods", self.pods)
        app.router.add_get(f"{job}/events", self.events)
        app.router.add_get(f"{job}/history", self.history)
        app.router.add_get(f"{job}/diagnosis", self.diagnosis)
        app.router.add_get(f"{job}/failures", self.failures)
        app.router.add_get(f"{job}/describe", self.describe)
        app.router.add_get(f"{job}/logs", self.logs)
        app.router.add_post(f"{job}/suspend", functools.partial(self.suspend_or_resume, suspend=True))
        app.router.add_post(f"{job}/resume", functools.partial(self.suspend_or_resume, suspend=False))
        app.on_startup.append(self._start_sources)
        app.on_shutdown.append(self._stop_sources)
        return app

    async def _start_sources(self, app: web.Application) -> None:
        loop = asyncio.get_running_loop()
        for source in self.sources.values():
            source.start(loop)

    async def _stop_sources(self, app: web.Application) -> None:
        for source in self.sources.values():
            source.stop()

    # --- middlewares --------------------------------------------------------------------------

    @web.middleware
    async def _headers(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as error:
            error.headers.update(SECURITY_HEADERS)
            raise
        except Exception as error:
            try:
                problem = _problem_for(error)
            except Exception:
                log.exception("%s %s failed", request.method, request.path)
                problem = RequestError(500, f"internal error: {type(error).__name__}")
            response = web.json_response(
                {"error": problem.message, "errors": problem.errors}, status=problem.status
            )
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    @web.middleware
    async def _host(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if self.allowed_hosts is not None and request.host not in self.allowed_hosts:
            served = ", ".join(sorted(self.allowed_hosts))
            raise RequestError(421, f"this dashboard answers only for {served}")
        return await handler(request)

    @web.middleware
    async def _identity(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        user = self.access.identify(request.headers)
        if self.access.needs_identity and user is None and request.path != "/healthz":
            raise RequestError(
                401, "no user: this dashboard is reached through the Kubeflow Central Dashboard"
            )
        request[USER] = user
        return await handler(request)

    @web.middleware
    async def _csrf(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method in UNSAFE_METHODS:
            origin = request.headers.get("Origin")
            if origin is not None and origin.split("://", 1)[-1] != request.host:
                raise RequestError(403, f"cross-site request refused (Origin {origin})")
            site = request.headers.get("Sec-Fetch-Site")
            if site is not None and site not in ("same-origin", "none"):
                raise RequestError(403, f"cross-site request refused (Sec-Fetch-Site {site})")
            cookie = request.cookies.get(CSRF_COOKIE, "")
            sent = request.headers.get(CSRF_HEADER, "")
            if not cookie or not secrets.compare_digest(cookie, sent):
                raise RequestError(403, f"missing or wrong {CSRF_HEADER}: reload the page")
        return await handler(request)

    # --- helpers ------------------------------------------------------------------------------

    async def _require(self, request: web.Request, *checks: Attributes) -> None:
        user = request[USER]
        for attributes in checks:
            if not await self.access.allowed(user, attributes):
                who = user.name if user else "you"
                raise RequestError(403, f"forbidden: {who} may not {attributes.describe()}")

    async def _visible(self, user: User | None, entry: Entry) -> bool:
        """Whether the user may list this job: its kind, in every namespace or in its own."""
        if not self.access.needs_identity:
            return True
        kind = views.kind_of_wire(entry.wire)
        if kind is None:
            return False
        namespace = entry.row["namespace"]
        everywhere = Attributes("list", kind.plural, "", kind.group)
        return await self.access.allowed(user, everywhere) or await self.access.allowed(
            user, Attributes("list", kind.plural, namespace, kind.group)
        )

    def _ref(self, request: web.Request) -> JobRef:
        info = request.match_info
        source = self.sources.get(info["source"])
        if source is None:
            raise RequestError(
                404, f"no source {info['source']!r}; this dashboard has: {', '.join(self.sources)}"
            )
        kind = views.kind_from_slug(info["kind"])
        if kind is None:
            raise RequestError(404, f"unknown job kind {info['kind']!r}")
        return JobRef(source, info["namespace"], kind, info["name"])

    def _source(self, name: object) -> Source:
        source = self.sources.get(str(name)) if name is not None else next(iter(self.sources.values()), None)
        if source is None:
            raise RequestError(422, f"source: must be one of {', '.join(self.sources)}")
        return source

    @staticmethod
    async def _body(request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise RequestError(400, "the body must be JSON") from None
        if not isinstance(body, dict):
            raise RequestError(400, "the body must be a JSON object")
        return body

    async def _entry(self, ref: JobRef) -> Entry:
        """The job as the source's watch holds it (waiting briefly for a starting watch's first list)."""
        if not ref.source.synced.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ref.source.synced.wait(), FIRST_LIST_SECONDS)
        entry = ref.source.entries.get(ref.id)
        if entry is None:
            raise RequestError(
                404, f"{ref.kind.kind} {ref.namespace}/{ref.name} not found in {ref.source.name}"
            )
        return entry

    # --- the page -----------------------------------------------------------------------------

    async def healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def index(self, request: web.Request) -> web.Response:
        response = web.Response(
            body=(self.static / "index.html").read_bytes(),
            content_type="text/html",
            headers={"Cache-Control": "no-cache"},
        )
        self._csrf_cookie(request, response)
        return response

    def _csrf_cookie(self, request: web.Request, response: web.StreamResponse) -> str:
        token = request.cookies.get(CSRF_COOKIE)
        if not token:
            token = secrets.token_urlsafe(32)
            response.set_cookie(CSRF_COOKIE, token, httponly=True, samesite="Strict", path="/")
        return token

    async def asset(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        if ".." in path.split("/") or path.startswith("/"):
            raise RequestError(404, "no such file")
        resource = self.static.joinpath(*path.split("/"))
        if not resource.is_file():
            raise RequestError(404, "no such file")
        types = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml", ".html": "text/html"}
        suffix = Path(path).suffix
        return web.Response(
            body=resource.read_bytes(),
            content_type=types.get(suffix, "application/octet-stream"),
            headers={"Cache-Control": "no-cache"},
        )

    async def session(self, request: web.Request) -> web.Response:
        user = request[USER]
        response = web.json_response(
            {
                "user": user.name if user else None,
                "reviewed": self.access.needs_identity,
                "sources": [s.state.to_json() | {"namespace": s.namespace} for s in self.sources.values()],
            }
        )
        token = self._csrf_cookie(request, response)
        response.headers[CSRF_HEADER] = token
        return response

    # --- live streams -------------------------------------------------------------------------

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """The list: a snapshot of every job the user may list, then their changes, batched."""
        user = request[USER]
        subscription = Subscription()
        for source in self.sources.values():
            source.subscribe_with(subscription)
        response = await streams.open_stream(request)
        try:
            # A fresh server's first page waits for the first lists (briefly: an unreachable cluster must
            # not hold the local runs back); anything listed later arrives as changes.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    asyncio.gather(*(s.synced.wait() for s in self.sources.values())), FIRST_LIST_SECONDS
                )
            rows = [
                e.row
                for s in self.sources.values()
                for e in s.entries.values()
                if await self._visible(user, e)
            ]
            await streams.send(response, "snapshot", {"jobs": rows, "sources": self._states()})
            while True:
                batch = await streams.next_batch(subscription)
                if subscription.dropped:
                    await streams.send(response, "reset", {"reason": "this page fell behind"})
                    break
                if batch is None:
                    await response.write(b": ping\n\n")
                    continue
                upserts: dict[str, dict[str, Any]] = {}
                deletes: list[str] = []
                for change in batch:
                    if change is None or not await self._visible(user, change.entry):
                        continue
                    if change.deleted:
                        upserts.pop(change.entry.id, None)
                        deletes.append(change.entry.id)
                    else:
                        upserts[change.entry.id] = change.entry.row
                payload: dict[str, Any] = {"upserts": list(upserts.values()), "deletes": deletes}
                if any(change is None for change in batch):
                    payload["sources"] = self._states()
                if upserts or deletes or "sources" in payload:
                    await streams.send(response, "changes", payload)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            for source in self.sources.values():
                source.unsubscribe(subscription)
        return response

    def _states(self) -> list[dict[str, Any]]:
        return [s.state.to_json() | {"namespace": s.namespace} for s in self.sources.values()]

    async def job_stream(self, request: web.Request) -> web.StreamResponse:
        """One job's live state: its detail now and after every change, until it is deleted."""
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"))
        entry = await self._entry(ref)
        subscription = Subscription()
        ref.source.subscribe_with(subscription)
        response = await streams.open_stream(request)
        try:
            await streams.send(response, "job", self._detail(ref, entry))
            while True:
                batch = await streams.next_batch(subscription)
                if subscription.dropped:
                    await streams.send(response, "reset", {"reason": "this page fell behind"})
                    break
                if batch is None:
                    await response.write(b": ping\n\n")
                    continue
                mine = [c for c in batch if c is not None and c.entry.id == ref.id]
                if not mine:
                    continue
                if mine[-1].deleted:
                    await streams.send(response, "deleted", {"id": ref.id})
                    break
                await streams.send(response, "job", self._detail(ref, mine[-1].entry))
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            ref.source.unsubscribe(subscription)
        return response

    def _detail(self, ref: JobRef, entry: Entry) -> dict[str, Any]:
        return views.job_detail(ref.source.name, entry.wire, entry.restarts, datetime.now(UTC), entry.nodes)

    # --- one job ------------------------------------------------------------------------------

    async def job(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"))
        return web.json_response(self._detail(ref, await self._entry(ref)))

    async def pods(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"), ref.attributes("list", "pods"))
        client = ref.source.client

        def read() -> list[dict[str, Any]]:
            kind = kind_argument(ref.kind)
            pods = client.get_job_pods(ref.name, ref.namespace, job_kind=kind)
            replicas = (
                client.get_job_replicas(ref.name, ref.namespace, kind) if ref.kind.is_trainjob else None
            )
            return views.pod_rows(pods, ref.name, replicas)

        return web.json_response(await asyncio.to_thread(read))

    async def events(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"), ref.attributes("list", "events"))
        client = ref.source.client
        found = await asyncio.to_thread(
            client.get_job_events, ref.name, ref.namespace, kind_argument(ref.kind)
        )
        return web.json_response(views.event_rows(found))

    async def history(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"))
        client = ref.source.client
        history = await asyncio.to_thread(
            client.get_job_progress_history, ref.name, ref.namespace, kind_argument(ref.kind)
        )
        return web.json_response(history.to_json())

    async def diagnosis(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"), ref.attributes("list", "pods"))
        client = ref.source.client
        found = await asyncio.to_thread(
            client.get_job_diagnosis, ref.name, ref.namespace, kind_argument(ref.kind)
        )
        return web.json_response(views.findings(found))

    async def failures(self, request: web.Request) -> web.Response:
        """Which replica failed first and how, as kept on the job (``null`` while none failed)."""
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"))
        client = ref.source.client
        found = await asyncio.to_thread(
            client.get_job_failures, ref.name, ref.namespace, kind_argument(ref.kind)
        )
        return web.json_response(views.failures(found))

    async def describe(self, request: web.Request) -> web.Response:
        """``kubetrain describe``'s text, from the same function."""
        ref = self._ref(request)
        await self._require(
            request, ref.attributes("get"), ref.attributes("list", "pods"), ref.attributes("list", "events")
        )
        client = ref.source.client

        def text() -> str:
            kind = kind_argument(ref.kind)
            job = client.get_job(ref.name, ref.namespace, kind)
            pods = client.get_job_pods(ref.name, ref.namespace, job_kind=kind)
            events = client.get_job_events(ref.name, ref.namespace, kind)
            findings = client.get_job_diagnosis(ref.name, ref.namespace, kind)
            state = client.get_job_state(ref.name, ref.namespace, kind)
            failures = client.get_job_failures(ref.name, ref.namespace, kind)
            return tables.describe(job, pods, events, datetime.now(UTC), findings, state, failures)

        return web.Response(text=await asyncio.to_thread(text), content_type="text/plain")

    async def logs(self, request: web.Request) -> web.StreamResponse:
        """One replica's log lines, as ``kubetrain logs --replica`` reads them; ``follow=1`` streams on."""
        ref = self._ref(request)
        await self._require(request, ref.attributes("get"), ref.attributes("get", "pods", "log"))
        replica = request.query.get("replica", "")
        replica_type, _, index = replica.rpartition("-")
        if not replica_type or not index.isdigit():
            raise RequestError(422, f"replica: expected <type>-<index> such as worker-0, got {replica!r}")
        follow = request.query.get("follow") == "1"
        try:
            tail = min(int(request.query.get("tail", LOG_TAIL_DEFAULT)), LOG_TAIL_MAX)
        except ValueError:
            raise RequestError(422, "tail: expected a number of lines") from None
        if self.log_streams >= LOG_STREAMS_MAX:
            raise RequestError(503, f"{LOG_STREAMS_MAX} log streams are open already; close one")
        client = ref.source.client

        def lines() -> Iterator[tuple[str, str]]:
            return client.stream_job_logs(
                ref.name,
                ref.namespace,
                kind_argument(ref.kind),
                replica_type=replica_type,
                replica_index=int(index),
                follow=follow,
                tail_lines=tail,
            )

        self.log_streams += 1
        try:
            return await streams.stream_lines(request, lines, problem_text)
        finally:
            self.log_streams -= 1

    # --- actions ------------------------------------------------------------------------------

    async def suspend_or_resume(self, request: web.Request, *, suspend: bool) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("patch"))
        client = ref.source.client
        act = client.suspend_job if suspend else client.resume_job
        await asyncio.to_thread(act, ref.name, ref.namespace, kind_argument(ref.kind))
        return web.json_response({"id": ref.id, "suspended": suspend})

    async def delete(self, request: web.Request) -> web.Response:
        ref = self._ref(request)
        await self._require(request, ref.attributes("delete"))
        client = ref.source.client
        await asyncio.to_thread(client.delete_job, ref.name, ref.namespace, kind_argument(ref.kind))
        return web.json_response({"id": ref.id, "deleted": True})

    def _parse_manifest(self, body: Mapping[str, Any], source: Source) -> tuple[Any, str]:
        """The job of the form's YAML (a v1 job or a TrainJob) and the namespace it goes to."""
        import yaml

        from kubetrain.api.manifest import parse_job
        from kubetrain.local.trainjob import is_trainjob, parse_trainjob

        text = body.get("yaml")
        if not isinstance(text, str) or not text.strip():
            raise RequestError(422, "yaml: paste a job manifest")
        try:
            documents = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as error:
            raise RequestError(422, f"yaml: not valid YAML: {error}") from None
        if len(documents) != 1 or not isinstance(documents[0], dict):
            raise RequestError(422, f"yaml: expected one job object, got {len(documents)} documents")
        job = (
            parse_trainjob(documents[0])
            if is_trainjob(documents[0])
            else parse_job(documents[0], strict=True)
        )
        namespace = (
            str(body.get("namespace") or "")
            or (documents[0].get("metadata") or {}).get("namespace")
            or source.namespace
            or source.client.namespace
        )
        job = job.model_copy(update={"metadata": job.metadata.model_copy(update={"namespace": namespace})})
        return job, namespace

    async def plan(self, request: web.Request) -> web.Response:
        """What the job would become (``kubetrain plan``): each pod's (locally, process's) command and env. A
        TrainJob is planned on its runtime: on a cluster the cluster's, locally a built-in one."""
        body = await self._body(request)
        source = self._source(body.get("source"))
        job, namespace = self._parse_manifest(body, source)
        working_dir = self.working_dir or Path.cwd()
        runtime = views.runtime_attributes(job.to_wire(), namespace)
        if runtime is not None and source.client.backend_name != "local":
            await self._require(request, runtime)  # the view reads it with its own account

        def planned() -> list[dict[str, Any]]:
            from kubetrain.api.trainer import TrainJob

            if isinstance(job, TrainJob):
                return self._trainjob_plan(source, job, working_dir)
            if source.client.backend_name == "local":
                from kubetrain.local.plan import local_plan

                return local_plan(job, working_dir)
            from kubetrain.kube.plan import kubernetes_plan

            return kubernetes_plan(job)

        documents = views.redact_secrets(await asyncio.to_thread(planned))
        others = [
            {"kind": d.get("kind"), "name": (d.get("metadata") or {}).get("name")}
            for d in documents
            if d.get("kind") not in ("Pod", "Job", "JobSet") and "kind" in d
        ]
        return web.json_response(
            {"kind": job.KIND, "name": job.name, "pods": views.plan_preview(documents), "objects": others}
        )

    @staticmethod
    def _trainjob_plan(source: Source, trainjob: Any, working_dir: Path) -> list[dict[str, Any]]:
        runtime = source.client.backend.training_runtime(trainjob)
        if source.client.backend_name == "local":
            from kubetrain.local.plan import trainjob_plan_for
            from kubetrain.local.runtime import Runtime

            return trainjob_plan_for(trainjob, runtime, Runtime.PROCESS, working_dir)
        from kubetrain.kube.plan import trainjob_kubernetes_plan

        return trainjob_kubernetes_plan(trainjob, runtime)

    async def create(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        source = self._source(body.get("source"))
        job, namespace = self._parse_manifest(body, source)
        kind = views.kind_of_wire(job.to_wire())
        if kind is None:
            raise RequestError(422, f"kind: {job.KIND} is not a kind this dashboard knows")
        await self._require(request, Attributes("create", kind.plural, namespace, kind.group))
        created = await asyncio.to_thread(source.client.create_job, job, namespace=namespace)
        identity = views.job_id(source.name, namespace, kind, created.name)
        # The answer sends the page to the job's own page: let the watch have it by then.
        deadline = asyncio.get_running_loop().time() + FIRST_LIST_SECONDS
        while identity not in source.entries and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        return web.json_response({"id": identity}, status=201)


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve ``app``; returns the runner (``cleanup()`` stops it) and the port bound (0: any free one)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server = site._server
    sockets = getattr(server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return runner, int(bound)
