"""Generic validation rules the frameworks compose (upstream webhooks and reconciler checks, §5).

Errors are ``FieldError``s with dotted wire paths and messages in Kubernetes' field-error style
(``Required value: ...``, ``Forbidden: ...``, ``Unsupported value: "x": supported values: ...``,
``Invalid value: "x": ...``). Nothing here knows a framework: names and sets are parameters.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

from kubetrain.api.common import ReplicaSpec, RunPolicy
from kubetrain.api.defaults import template_containers
from kubetrain.api.errors import FieldError

DNS1035_LABEL_MAX_LENGTH = 63
_DNS1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_REGEX_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def quoted(value: object) -> str:
    """A value as Go's ``%q`` / field errors print it: strings quoted, numbers bare."""
    return json.dumps(value) if isinstance(value, str) else str(value)


def required(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Required value: {detail}")


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(path, f"Forbidden: {detail}")


def invalid(path: str, value: object, detail: str) -> FieldError:
    return FieldError(path, f"Invalid value: {quoted(value)}: {detail}")


def not_supported(path: str, value: object, supported: Iterable[str]) -> FieldError:
    values = ", ".join(quoted(s) for s in supported)
    return FieldError(path, f"Unsupported value: {quoted(value)}: supported values: {values}")


def dns1035_label_reasons(value: str) -> list[str]:
    """Why ``value`` is not a DNS-1035 label, in the words of apimachinery's ``IsDNS1035Label``."""
    reasons: list[str] = []
    if len(value) > DNS1035_LABEL_MAX_LENGTH:
        reasons.append(f"must be no more than {DNS1035_LABEL_MAX_LENGTH} characters")
    if not _DNS1035_LABEL.fullmatch(value):
        reasons.append(_DNS1035_REGEX_MESSAGE)
    return reasons


def job_name_errors(name: str) -> list[FieldError]:
    """``metadata.name`` must be a DNS-1035 label (every v1 webhook's first rule)."""
    if not name:
        return [required("metadata.name", "a job needs a name (a DNS-1035 label such as 'mnist')")]
    reasons = dns1035_label_reasons(name)
    if not reasons:
        return []
    return [invalid("metadata.name", name, f"should match: {','.join(reasons)}")]


def derived_name_errors(name: str, derived_names: Iterable[str]) -> list[FieldError]:
    """Pod and service names built from the job name must be DNS-1035 labels too.

    Upstream only finds out when creating the pod fails; kubetrain rejects such a job up front
    and says how long the job name may be. ``derived_names`` are the longest names per replica type
    (``<job>-<type>-<highest index>``); they all start with ``name``. A name that is itself
    invalid is reported by ``job_name_errors`` and not again here.
    """
    if not name or dns1035_label_reasons(name):
        return []
    longest = max(derived_names, key=len, default=None)
    if longest is None or len(longest) <= DNS1035_LABEL_MAX_LENGTH:
        return []
    allowed = DNS1035_LABEL_MAX_LENGTH - (len(longest) - len(name))
    return [
        invalid(
            "metadata.name",
            name,
            f"the replica name {quoted(longest)} built from it is {len(longest)} characters, more than "
            f"the {DNS1035_LABEL_MAX_LENGTH} a DNS-1035 label allows; shorten metadata.name to at most "
            f"{max(allowed, 0)} characters",
        )
    ]


def managed_by_errors(run_policy: RunPolicy, allowed: Iterable[str]) -> list[FieldError]:
    allowed = tuple(allowed)
    if run_policy.managed_by is None or run_policy.managed_by in allowed:
        return []
    return [not_supported("spec.runPolicy.managedBy", run_policy.managed_by, allowed)]


def non_negative_errors(path: str, value: int | None) -> list[FieldError]:
    if value is None or value >= 0:
        return []
    return [invalid(path, value, "must be greater than or equal to 0")]


def replica_keys_errors(
    specs_path: str, specs: Mapping[str, ReplicaSpec], supported: Iterable[str]
) -> list[FieldError]:
    """Every key of the replica map is one of ``supported`` (upstream NotSupported)."""
    supported = tuple(supported)
    return [not_supported(f"{specs_path}.{key}", key, supported) for key in specs if key not in supported]


def containers_errors(role_path: str, spec: ReplicaSpec, default_container: str | None) -> list[FieldError]:
    """At least one container, each with an image, and (when given) one named ``default_container``."""
    containers_path = f"{role_path}.template.spec.containers"
    containers = template_containers(spec.template)
    if not containers:
        return [required(containers_path, "must be specified")]
    errors = [
        required(f"{containers_path}[{index}].image", "must be specified")
        for index, container in enumerate(containers)
        if not container.get("image")
    ]
    if default_container is not None and not any(c.get("name") == default_container for c in containers):
        errors.append(
            required(containers_path, f"must have at least one container with name {default_container}")
        )
    return errors


def container_names_errors(role_path: str, spec: ReplicaSpec) -> list[FieldError]:
    """Every container needs a ``name`` (Kubernetes requires it; MPIJob v1 checks it itself)."""
    containers_path = f"{role_path}.template.spec.containers"
    return [
        required(f"{containers_path}[{index}].name", "must be specified")
        for index, container in enumerate(template_containers(spec.template))
        if not container.get("name")
    ]
