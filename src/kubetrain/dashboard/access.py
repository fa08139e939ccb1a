"""Who is asking, and may they: the two ways the dashboard decides.

- Run by a person (``kubetrain dashboard``): the kubeconfig's credentials decide. Every read and action is
  that user's own request to the API server, which refuses what they may not do (``OwnCredentials``).
- Deployed behind the Kubeflow Central Dashboard: the gateway authenticates the user and sends their name in
  a trusted header (Kubeflow's ``kubeflow-userid``, less a configured prefix). The dashboard's own
  ServiceAccount reads the cluster, so every read and action is first put to the API server as a
  SubjectAccessReview for that user (``ReviewedAccess``). A request without the header is refused (401); a
  review that fails is a refusal, never a pass.

Decisions are cached for ``TTL`` seconds, as the API server's own webhook authorizer caches them: a page
listing a thousand jobs in twenty namespaces asks twenty questions, not a thousand, and a revoked binding
takes effect within the TTL.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Protocol

log = logging.getLogger(__name__)

TTL = 10.0
CACHE_LIMIT = 10_000
KUBEFLOW_USER_HEADER = "kubeflow-userid"


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class Attributes:
    """A SubjectAccessReview's resourceAttributes: may the user ``verb`` this?"""

    verb: str
    resource: str
    namespace: str
    group: str = ""
    name: str = ""
    subresource: str = ""

    def describe(self) -> str:
        what = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        if self.group:
            what = f"{what}.{self.group}"
        target = f' "{self.name}"' if self.name else ""
        return f'{self.verb} {what}{target} in namespace "{self.namespace}"'


class Reviewer(Protocol):
    """``KubernetesBackend.review_access``: the API server's answer; raises when it cannot be asked."""

    def review_access(
        self,
        user: str,
        groups: tuple[str, ...],
        *,
        verb: str,
        resource: str,
        namespace: str,
        group: str = "",
        name: str = "",
        subresource: str = "",
    ) -> bool: ...


class Access(Protocol):
    needs_identity: bool
    """Requests without the identity header are refused (401)."""

    def identify(self, headers: Mapping[str, str]) -> User | None: ...

    async def allowed(self, user: User | None, attributes: Attributes) -> bool: ...


class OwnCredentials:
    """The kubeconfig's user acts, and the API server decides each request."""

    needs_identity = False

    def identify(self, headers: Mapping[str, str]) -> User | None:
        return None

    async def allowed(self, user: User | None, attributes: Attributes) -> bool:
        return True


class ReviewedAccess:
    """The user named by a trusted header, each request reviewed by the API server."""

    needs_identity = True

    def __init__(
        self,
        reviewer: Reviewer,
        header: str = KUBEFLOW_USER_HEADER,
        prefix: str = "",
        groups_header: str | None = None,
        ttl: float = TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.reviewer = reviewer
        self.header = header
        self.prefix = prefix
        self.groups_header = groups_header
        self.ttl = ttl
        self.clock = clock
        self._decisions: OrderedDict[tuple[User, Attributes], tuple[float, bool]] = OrderedDict()
        self._asking: dict[tuple[User, Attributes], asyncio.Future[bool]] = {}

    def identify(self, headers: Mapping[str, str]) -> User | None:
        value = (headers.get(self.header) or "").strip()
        if self.prefix and value.startswith(self.prefix):
            value = value[len(self.prefix) :]
        if not value:
            return None
        groups: tuple[str, ...] = ()
        if self.groups_header:
            groups = tuple(g.strip() for g in (headers.get(self.groups_header) or "").split(",") if g.strip())
        return User(value, groups)

    async def allowed(self, user: User | None, attributes: Attributes) -> bool:
        if user is None:
            return False
        key = (user, attributes)
        now = self.clock()
        cached = self._decisions.get(key)
        if cached is not None and now - cached[0] < self.ttl:
            return cached[1]
        asking = self._asking.get(key)
        if asking is not None:  # the same question in flight (a page's burst): one review answers all
            return await asyncio.shield(asking)
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._asking[key] = future
        try:
            decision = await asyncio.to_thread(
                functools.partial(self.reviewer.review_access, user.name, user.groups, **asdict(attributes))
            )
        except Exception as error:
            log.warning("cannot review %s for %s (refused): %s", attributes.describe(), user.name, error)
            decision = False  # fail closed: an unanswered review is a refusal
        finally:
            del self._asking[key]
        future.set_result(decision)
        self._decisions[key] = (now, decision)
        self._decisions.move_to_end(key)
        while len(self._decisions) > CACHE_LIMIT:
            self._decisions.popitem(last=False)
        return decision
