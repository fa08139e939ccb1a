"""Every operator replica's copy of the endpoint's credentials: read from the Secret, created when it is
absent, renewed when due (``credentials.renewed``), and served from one ``SSLContext`` that is reloaded in
place when the Secret changes, so a renewal needs no restart and drops no connection.

Replicas race: a creation answered 409 reads what the winner made; an update is guarded by the
resourceVersion it read, so a 409 means another replica already wrote, and the next read takes theirs.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
from collections.abc import Callable, Sequence
from typing import Any

from kubetrain.kube.runtime.client import ApiStatusError, raise_for_status
from kubetrain.kube.runtime.http import HttpApi
from kubetrain.kube.status.credentials import (
    StoredCredentials,
    UnreadableSecretError,
    from_secret,
    renewed,
    secret_annotations,
    secret_data,
)

log = logging.getLogger(__name__)

RELOAD_PERIOD = 10.0
"""Seconds between reads of the Secret: one small GET per replica, and a renewal another replica wrote is
served within this long."""
LABELS = {"app.kubernetes.io/name": "kubetrain", "app.kubernetes.io/component": "status-endpoint"}


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CredentialKeeper:
    def __init__(
        self,
        http: HttpApi,
        namespace: str,
        secret: str,
        names: Sequence[str],
        *,
        on_bundle: Callable[[str], None] = lambda bundle: None,
        now: Callable[[], datetime.datetime] = _now,
    ) -> None:
        self._http = http
        self._path = f"/api/v1/namespaces/{namespace}/secrets/{secret}"
        self._collection = f"/api/v1/namespaces/{namespace}/secrets"
        self._namespace = namespace
        self._secret = secret
        self._names = list(names)
        self._on_bundle = on_bundle
        self._now = now
        self.context: ssl.SSLContext | None = None
        """What the endpoint serves from; None until the first ``sync``."""
        self.stored: StoredCredentials | None = None
        self.bundle: str | None = None
        """The CA certificates reporters are given (PEM); None until the first ``sync``."""
        self.reloads = 0
        """Times the served certificate changed after the first load."""

    @property
    def where(self) -> str:
        return f"Secret {self._namespace}/{self._secret}"

    async def sync(self) -> None:
        """Read the Secret, write what it should hold when that differs, and serve the result."""
        for _ in range(3):
            secret = await self._read()
            stored = self._readable(secret)
            wanted = renewed(stored, self._names, self._now())
            if wanted is None:
                assert stored is not None
                self._serve(stored)
                return
            written = await self._write(secret, wanted)
            if written is not None:
                self._serve(from_secret(written))
                return
        raise ApiStatusError(409, "Conflict", f"{self.where} kept changing under three writes in a row")

    async def run(self, period: float = RELOAD_PERIOD) -> None:
        """``sync`` every ``period`` seconds until cancelled; a failure is logged and tried again."""
        while True:
            await asyncio.sleep(period)
            try:
                await self.sync()
            except Exception as error:
                log.warning("status endpoint: could not sync its credentials in %s: %s", self.where, error)

    async def _read(self) -> dict[str, Any] | None:
        response = await self._http.get(self._path)
        if response.status_code == 404:
            return None
        raise_for_status(response, response.content)
        secret: dict[str, Any] = response.json()
        return secret

    def _readable(self, secret: dict[str, Any] | None) -> StoredCredentials | None:
        if secret is None:
            return None
        try:
            return from_secret(secret)
        except UnreadableSecretError as error:
            log.warning("status endpoint: %s is unreadable (%s); replacing it", self.where, error)
            return None

    async def _write(self, secret: dict[str, Any] | None, wanted: StoredCredentials) -> dict[str, Any] | None:
        """Create or update the Secret; None when another replica wrote first (409)."""
        metadata: dict[str, Any] = {
            "name": self._secret,
            "namespace": self._namespace,
            "labels": dict(LABELS),
            "annotations": secret_annotations(wanted),
        }
        body: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "Opaque",
            "data": secret_data(wanted),
        }
        if secret is None:
            response = await self._http.post(self._collection, json={**body, "metadata": metadata})
            what = "created"
        else:
            old = secret.get("metadata") or {}
            kept = {
                k: v for k, v in (old.get("annotations") or {}).items() if k not in metadata["annotations"]
            }
            metadata = {
                **old,
                **metadata,
                "labels": {**(old.get("labels") or {}), **LABELS},
                "annotations": {**kept, **metadata["annotations"]},
            }
            metadata.pop("managedFields", None)
            body = {**body, "type": secret.get("type", "Opaque")}
            response = await self._http.put(self._path, json={**body, "metadata": metadata})
            what = "renewed"
        if response.status_code == 409:
            return None
        raise_for_status(response, response.content)
        log.info("status endpoint: %s credentials in %s", what, self.where)
        written: dict[str, Any] = response.json()
        return written

    def _serve(self, stored: StoredCredentials) -> None:
        if self.context is None:
            self.context = stored.current.server_context()
        elif self.stored is not None and self.stored.current != stored.current:
            stored.current.load_into(self.context)
            self.reloads += 1
            log.info("status endpoint: now serving the renewed certificate from %s", self.where)
        self.stored = stored
        bundle = stored.ca_bundle(self._now())
        if bundle != self.bundle:
            self.bundle = bundle
            self._on_bundle(bundle)
