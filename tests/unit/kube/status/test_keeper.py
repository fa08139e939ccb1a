"""Each operator replica's credentials: the Secret is created by the first, read by the others, renewed with
a resourceVersion-guarded update, and what is served is reloaded in place when the Secret changes."""

from __future__ import annotations

import datetime
from typing import Any

import httpx2
from cryptography import x509

from kubetrain.kube.status.credentials import (
    PROMOTE_AFTER,
    StoredCredentials,
    secret_annotations,
    secret_data,
)
from kubetrain.kube.status.keeper import CredentialKeeper
from kubetrain.progress.credentials import TlsCredentials, issue

from .fakes import ObjectApi, status
from .tls import served_certificate

NAMES = ["training-operator-status.kubeflow.svc"]
HOST = NAMES[0]
SECRETS = "/api/v1/namespaces/kubeflow/secrets"
SECRET = f"{SECRETS}/status-tls"
NOW = datetime.datetime(2026, 11, 25, 12, 0, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> datetime.datetime:
        return self.now


def keeper(api: ObjectApi, clock: Clock | None = None, bundles: list[str] | None = None) -> CredentialKeeper:
    seen = bundles if bundles is not None else []
    return CredentialKeeper(
        api.client(), "kubeflow", "status-tls", NAMES, on_bundle=seen.append, now=clock or Clock()
    )


def secret(stored: StoredCredentials) -> dict[str, Any]:
    metadata = {"name": "status-tls", "namespace": "kubeflow", "annotations": secret_annotations(stored)}
    return {"metadata": metadata, "data": secret_data(stored)}


def serial(credentials: TlsCredentials) -> int:
    return x509.load_pem_x509_certificate(credentials.cert.encode()).serial_number


async def test_the_first_replica_creates_the_secret_and_serves_what_it_holds() -> None:
    api, bundles = ObjectApi(), list[str]()
    first = keeper(api, bundles=bundles)
    await first.sync()
    assert [(m, p) for m, p, _ in api.requests] == [("GET", SECRET), ("POST", SECRETS)]
    assert first.context is not None and first.bundle is not None
    assert bundles == [first.bundle]
    served = served_certificate(first.context, first.bundle, HOST)
    assert served.subject.rfc4514_string() == f"CN={HOST}"


async def test_another_replica_serves_the_same_certificate_without_writing() -> None:
    api = ObjectApi()
    first, second = keeper(api), keeper(api)
    await first.sync()
    api.requests.clear()
    await second.sync()
    assert [m for m, _, _ in api.requests] == ["GET"]
    assert second.context is not None and first.context is not None and first.bundle is not None
    assert served_certificate(second.context, first.bundle, HOST) == served_certificate(
        first.context, first.bundle, HOST
    )


async def test_a_replica_that_loses_the_creation_race_serves_the_winners_secret() -> None:
    api = ObjectApi()
    winner = StoredCredentials(issue(NAMES, NOW))

    def created_meanwhile(request: httpx2.Request) -> httpx2.Response:
        api.put_object(SECRET, secret(winner))
        del api.answers[("POST", SECRETS)]
        return status(409, "AlreadyExists", 'secrets "status-tls" already exists')

    api.answers[("POST", SECRETS)] = created_meanwhile
    loser = keeper(api)
    await loser.sync()
    assert loser.stored == winner


async def test_renewal_is_an_update_guarded_by_the_resource_version_read() -> None:
    api, clock = ObjectApi(), Clock()
    due = StoredCredentials(issue(NAMES, NOW - datetime.timedelta(days=70)))
    version = api.put_object(SECRET, secret(due))["metadata"]["resourceVersion"]
    replica = keeper(api, clock)
    await replica.sync()
    [(_, _, body)] = api.calls("PUT")
    assert body["metadata"]["resourceVersion"] == version
    assert replica.stored is not None and replica.stored.next is not None
    assert replica.stored.current == due.current


async def test_a_renewal_refused_with_a_conflict_takes_what_the_other_replica_wrote() -> None:
    api = ObjectApi()
    due = StoredCredentials(issue(NAMES, NOW - datetime.timedelta(days=70)))
    api.put_object(SECRET, secret(due))
    theirs = StoredCredentials(due.current, issue(NAMES, NOW), NOW)

    def written_meanwhile(request: httpx2.Request) -> httpx2.Response:
        api.put_object(SECRET, secret(theirs))
        del api.answers[("PUT", SECRET)]
        return status(409, "Conflict", "the object has been modified")

    api.answers[("PUT", SECRET)] = written_meanwhile
    replica = keeper(api)
    await replica.sync()
    assert replica.stored == theirs
    assert len(api.calls("PUT")) == 1


async def test_a_promotion_another_replica_wrote_is_served_without_a_restart() -> None:
    api, clock, bundles = ObjectApi(), Clock(), list[str]()
    old, new = issue(NAMES, NOW - datetime.timedelta(days=70)), issue(NAMES, NOW)
    api.put_object(SECRET, secret(StoredCredentials(old)))
    replica = keeper(api, clock, bundles)
    await replica.sync()
    context = replica.context
    assert context is not None
    api.put_object(SECRET, secret(StoredCredentials(new, previous_ca=old.ca_cert)))
    clock.now = NOW + PROMOTE_AFTER
    await replica.sync()
    assert replica.context is context, "the same context, reloaded in place"
    assert replica.reloads == 1
    served = served_certificate(context, new.ca_cert, HOST)
    assert served.serial_number == serial(new)
    assert bundles[-1] == new.ca_cert + old.ca_cert


async def test_an_unreadable_secret_is_replaced_under_its_resource_version() -> None:
    api = ObjectApi()
    version = api.put_object(SECRET, {"metadata": {"name": "status-tls"}, "data": {"x": "eA=="}})
    replica = keeper(api)
    await replica.sync()
    [(_, _, body)] = api.calls("PUT")
    assert body["metadata"]["resourceVersion"] == version["metadata"]["resourceVersion"]
    assert replica.stored is not None and replica.stored.current.covers(NAMES)
