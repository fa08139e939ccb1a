"""The API server's audit log, for tests that must know who did what and when, as the server saw it.

``kubetrain envtest start --audit-log`` starts kube-apiserver with ``WRITES`` as its policy and a JSON log in
``logs/audit.log``. That policy keeps what fault tests ask about and little else: every write (create,
update, patch, delete) at ``Metadata`` level (who, from which User-Agent, on what object, the answer's
code, microsecond timestamps) and the Lease writes at ``Request`` level, whose bodies say who held each
Lease from when. Reads are not logged: a 500-job burst writes about 20 MB of it. A test that needs another
policy (every request of some identity, reads included) passes its own (``EnvtestOptions.audit_policy``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

POLICY_FILE = "audit-policy.yaml"
LOG_FILE = Path("logs") / "audit.log"

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")

WRITES = """\
apiVersion: audit.k8s.io/v1
kind: Policy
# One event per request, when its answer is complete.
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
  # Who holds a Lease is in the request's body.
  - level: Request
    verbs: [create, update, patch]
    resources: [{group: coordination.k8s.io, resources: [leases]}]
  - level: Metadata
    verbs: [create, update, patch, delete, deletecollection]
  - level: None
"""


def policy_path(run_dir: Path) -> Path:
    return run_dir / POLICY_FILE


def log_path(run_dir: Path) -> Path:
    return run_dir / LOG_FILE


def apiserver_args(run_dir: Path, policy_text: str = WRITES) -> list[str]:
    """kube-apiserver's flags for the audit log of ``run_dir``, writing its policy file first."""
    policy = policy_path(run_dir)
    policy.write_text(policy_text)
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log_path(run_dir)}",
        "--audit-log-format=json",
        # Blocking: a request is answered only once its event is written, so the log is complete whenever
        # a test reads it after the answers it waited for.
        "--audit-log-mode=blocking",
        "--audit-log-maxsize=0",
    ]


@dataclass(frozen=True)
class AuditEvent:
    """One request as kube-apiserver recorded it."""

    verb: str
    """``get``, ``list``, ``watch``, ``create``, ``update``, ``patch``, ``delete``, ``deletecollection``."""
    group: str
    """The resource's API group; empty for the core group."""
    resource: str
    subresource: str
    """``status`` for a status write; empty for the object itself."""
    namespace: str
    name: str
    """Empty for a create whose name the server generated, and for collections."""
    user: str
    user_agent: str
    code: int
    """The answer's HTTP status."""
    received: datetime
    """When the request arrived."""
    completed: datetime
    """When its answer was complete (after the write was committed, for a successful write)."""
    request_object: dict[str, Any] | None
    """The body, for the requests the policy logs at ``Request`` level (Lease writes)."""

    @property
    def succeeded(self) -> bool:
        return 200 <= self.code < 300


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def parse_event(line: str) -> AuditEvent | None:
    """One line of the log; None for a line that is not a complete event (the last one, while written)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("stage") != "ResponseComplete":
        return None
    ref = event.get("objectRef") or {}
    request = event.get("requestObject")
    return AuditEvent(
        verb=str(event.get("verb", "")),
        group=str(ref.get("apiGroup", "")),
        resource=str(ref.get("resource", "")),
        subresource=str(ref.get("subresource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        user=str((event.get("user") or {}).get("username", "")),
        user_agent=str(event.get("userAgent", "")),
        code=int((event.get("responseStatus") or {}).get("code", 0)),
        received=_time(str(event["requestReceivedTimestamp"])),
        completed=_time(str(event["stageTimestamp"])),
        request_object=request if isinstance(request, dict) else None,
    )


def read_events(run_dir: Path) -> Iterator[AuditEvent]:
    """Every complete event of ``run_dir``'s audit log, in the order written; nothing when there is none."""
    try:
        with log_path(run_dir).open(errors="replace") as log:
            for line in log:
                event = parse_event(line)
                if event is not None:
                    yield event
    except FileNotFoundError:
        return
