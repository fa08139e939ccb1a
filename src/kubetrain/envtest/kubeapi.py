"""A small JSON client for the Kubernetes API, enough for envtest's own work (nodes, pod driver, readiness).

envtest stays independent of the rest of kubetrain, and it needs a watch it can stop between events (the pod
driver's deletion finisher runs in a thread), so it talks to the API server directly with httpx. Objects are
plain dicts, as on the wire.
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import httpx
import yaml

KubeObject = dict[str, Any]

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

WEBHOOK_TRANSPORT_FAILURES = ("write: broken pipe", "connection reset by peer", ": EOF")
"""How the API server words a webhook call lost on a kept-alive connection the webhook's server had just
closed (a CI run failed a TrainingRuntime's create on the first). Admission fails before anything is stored,
so the write is sent again."""
WRITE_ATTEMPTS = 3
READ_ATTEMPTS = 3
"""A GET is sent again when the server closed its kept-alive connection as the request went out
(``Server disconnected without sending a response``, ``connection reset``): a CI run lost a conformance
module's every case to one such read, on a connection that had carried 1,468 requests. Reads change
nothing, so sending one again is safe; writes are not retried for this (the server may have acted)."""
POOL_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=None)
"""No surplus of kept-alive connections for the pool to close. httpcore 1.0.9 counts every connection as idle
when it looks for a surplus over ``max_keepalive_connections`` (20 by default), and closes an idle one even
after another thread's request was given it (encode/httpcore#1110): with the conformance tier's threads
sharing a client, reads failed with ``[Errno 9] Bad file descriptor`` (a CI run lost a whole module so). A
client's connections are as many as its threads' requests at once."""


class ApiError(Exception):
    """A non-2xx answer of the API server, with its Status reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


class KubeconfigError(ValueError):
    """A kubeconfig this client cannot use; the message names the field."""


@dataclass(frozen=True)
class Connection:
    """Where and how to reach one API server, resolved from a kubeconfig's current context."""

    server: str
    verify: ssl.SSLContext | bool
    headers: Mapping[str, str]


def load_connection(kubeconfig: Path, context: str | None = None) -> Connection:
    """Resolve the current (or given) context of a kubeconfig: server, CA, bearer token or client
    certificate."""
    config = yaml.safe_load(kubeconfig.read_text()) or {}
    context_name = context or config.get("current-context")
    if not context_name:
        raise KubeconfigError(f"{kubeconfig}: current-context is empty; set it or pass a context name")
    context_entry = _named(config, "contexts", context_name, kubeconfig)["context"]
    cluster = _named(config, "clusters", context_entry["cluster"], kubeconfig)["cluster"]
    user = _named(config, "users", context_entry["user"], kubeconfig).get("user") or {}
    base = kubeconfig.parent

    context_ssl = ssl.create_default_context()
    if cluster.get("insecure-skip-tls-verify"):
        context_ssl.check_hostname = False
        context_ssl.verify_mode = ssl.CERT_NONE
    elif "certificate-authority-data" in cluster:
        context_ssl.load_verify_locations(
            cadata=base64.b64decode(cluster["certificate-authority-data"]).decode()
        )
    elif "certificate-authority" in cluster:
        context_ssl.load_verify_locations(cafile=str(base / cluster["certificate-authority"]))

    headers: dict[str, str] = {}
    if "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    elif "tokenFile" in user:
        headers["Authorization"] = f"Bearer {(base / user['tokenFile']).read_text().strip()}"
    elif "client-certificate-data" in user or "client-certificate" in user:
        _load_client_certificate(context_ssl, user, base)
    elif user:
        raise KubeconfigError(
            f"{kubeconfig}: users[{context_entry['user']}] uses {sorted(user)}; envtest supports token, "
            "tokenFile and client-certificate users"
        )
    return Connection(server=cluster["server"].rstrip("/"), verify=context_ssl, headers=headers)


def _named(config: Mapping[str, Any], section: str, name: str, path: Path) -> Mapping[str, Any]:
    for entry in config.get(section) or []:
        if entry.get("name") == name:
            return cast(Mapping[str, Any], entry)
    raise KubeconfigError(f"{path}: {section} has no entry named {name!r}")


def _load_client_certificate(context_ssl: ssl.SSLContext, user: Mapping[str, Any], base: Path) -> None:
    if "client-certificate-data" in user:
        # ssl only loads certificate chains from files.
        with tempfile.TemporaryDirectory() as scratch:
            cert = Path(scratch) / "client.crt"
            key = Path(scratch) / "client.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            context_ssl.load_cert_chain(cert, key)
    else:
        context_ssl.load_cert_chain(base / user["client-certificate"], base / user["client-key"])


def _lost_webhook_call(response: httpx.Response) -> bool:
    if response.status_code != 500 or b"failed calling webhook" not in response.content:
        return False
    return any(failure.encode() in response.content for failure in WEBHOOK_TRANSPORT_FAILURES)


class KubeApi:
    """Synchronous JSON calls on API paths (``/api/v1/namespaces/x/pods``). Thread-safe, as httpx.Client
    is."""

    def __init__(
        self, connection: Connection, timeout: float = 10.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self._connection = connection
        self._http = httpx.Client(
            base_url=connection.server,
            verify=connection.verify,
            headers=dict(connection.headers),
            timeout=timeout,
            transport=transport,
            limits=POOL_LIMITS,
        )

    @classmethod
    def from_kubeconfig(cls, kubeconfig: Path, context: str | None = None) -> KubeApi:
        return cls(load_connection(kubeconfig, context))

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> KubeApi:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(self, path: str, params: Mapping[str, str] | None = None) -> KubeObject:
        attempt = 1
        while True:
            try:
                return self._json(self._http.get(path, params=params))
            except (httpx.RemoteProtocolError, httpx.ReadError):
                if attempt == READ_ATTEMPTS:
                    raise
                attempt += 1

    def create(self, path: str, body: Mapping[str, Any]) -> KubeObject:
        return self._write("POST", path, json.dumps(body), "application/json")

    def replace(self, path: str, body: Mapping[str, Any]) -> KubeObject:
        return self._write("PUT", path, json.dumps(body), "application/json")

    def patch(self, path: str, body: Mapping[str, Any], content_type: str = MERGE_PATCH) -> KubeObject:
        return self._write("PATCH", path, json.dumps(body), content_type)

    def _write(self, method: str, path: str, content: str, content_type: str) -> KubeObject:
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            response = self._http.request(
                method, path, content=content, headers={"Content-Type": content_type}
            )
            if attempt == WRITE_ATTEMPTS or not _lost_webhook_call(response):
                break
            time.sleep(0.2 * attempt)
        return self._json(response)

    def delete(self, path: str, body: Mapping[str, Any] | None = None) -> KubeObject:
        response = self._http.request("DELETE", path, json=body or {})
        return self._json(response)

    def is_ok(self, path: str) -> bool:
        """True when a plain-text health endpoint (``/readyz``, ``/livez``) answers 200."""
        return self._http.get(path).status_code == 200

    def get_or_none(self, path: str) -> KubeObject | None:
        """The object, or None when there is none: one read, where exists() then get() could see it
        vanish in between."""
        try:
            return self.get(path)
        except ApiError as error:
            if error.code == 404:
                return None
            raise

    def exists(self, path: str) -> bool:
        return self.get_or_none(path) is not None

    def watch(
        self, path: str, resource_version: str, timeout_seconds: int
    ) -> Iterator[tuple[str, KubeObject]]:
        """Events after ``resource_version`` until the server ends the watch (after ``timeout_seconds``).

        Raises ApiError(410) when the version is too old; the caller lists again and resumes from the list's
        version.
        """
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
            "allowWatchBookmarks": "true",
        }
        timeout = httpx.Timeout(10.0, read=timeout_seconds + 10.0)
        with self._http.stream("GET", path, params=params, timeout=timeout) as response:
            if response.status_code >= 300:
                response.read()
                self._json(response)
            for line in response.iter_lines():
                if not line:
                    continue
                event = json.loads(line)
                if event["type"] == "ERROR":
                    status = event["object"]
                    raise ApiError(
                        status.get("code", 500), status.get("reason", ""), status.get("message", "")
                    )
                yield event["type"], event["object"]

    @staticmethod
    def _json(response: httpx.Response) -> KubeObject:
        if response.status_code >= 300:
            try:
                status = response.json()
            except ValueError:
                status = {"message": response.text}
            raise ApiError(response.status_code, status.get("reason", ""), status.get("message", ""))
        if not response.content:
            return {}
        return cast(KubeObject, response.json())
