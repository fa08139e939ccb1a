"""Malformed job manifests, generated: the example manifests and rich builder manifests of every kind,
mutated at any depth (wrong types, missing and extra keys, lists for maps, huge/negative/NaN/inf
numbers, long and non-ASCII names) and, as YAML text, with duplicated keys.

Shared by the property tests (``tests/unit/test_malformed_manifests.py``) and the benchmark
(``bench/malformed_manifests.py``), so both speak of the same manifests. ``outcome`` runs one manifest
through ``load → parse → admit → plan`` for a target and checks the contract: a plan, or an
``InvalidJobError`` whose every error names a path found in the input.
"""

from __future__ import annotations

import copy
import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from builders import container, manifest
from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import V2BETA1
from kubetrain.api.manifest import load_documents, parse_job
from kubetrain.kube.plan import kubernetes_plan
from kubetrain.local.plan import local_plan

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*/job.yaml"))

TARGETS: dict[str, Callable[[Any], object]] = {
    "kubernetes": kubernetes_plan,
    "local": lambda job: local_plan(job, Path("/work/run"), {}),
}


def _rich_container(name: str) -> dict[str, Any]:
    """A container using every field kubetrain reads or writes, so mutations reach each of them."""
    return container(
        name,
        command=["python", "train.py"],
        args=["--epochs", "1"],
        workingDir="/work",
        env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
        envFrom=[{"configMapRef": {"name": "cfg"}}],
        ports=[{"name": "extra", "containerPort": 9999, "protocol": "TCP"}],
        resources={"limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": 1}, "requests": {"cpu": "500m"}},
        volumeMounts=[{"name": "data", "mountPath": "/data"}],
    )


def _enrich(document: dict[str, Any], container_name: str) -> dict[str, Any]:
    for spec in next(iter(v for k, v in document["spec"].items() if k.endswith("ReplicaSpecs"))).values():
        template = spec["template"]
        template["metadata"] = {"labels": {"team": "ml"}, "annotations": {"note": "x"}}
        template["spec"].update(
            containers=[_rich_container(container_name)],
            initContainers=[container("init", command=["true"])],
            volumes=[{"name": "data", "emptyDir": {}}],
            nodeSelector={"pool": "gpu"},
            tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            schedulerName="default-scheduler",
            priorityClassName="high",
        )
    return document


def _run_policy() -> dict[str, Any]:
    return {
        "runPolicy": {
            "cleanPodPolicy": "Running",
            "backoffLimit": 3,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 60,
            "schedulingPolicy": {"minAvailable": 2, "queue": "q", "minResources": {"cpu": "2"}},
        }
    }


def _builder_manifests() -> list[dict[str, Any]]:
    policy = _run_policy()
    return [
        _enrich(
            manifest(
                "PyTorchJob",
                {"Master": 1, "Worker": 2},
                spec={**policy, "nprocPerNode": "2", "elasticPolicy": {"minReplicas": 1, "maxReplicas": 3}},
            ),
            "pytorch",
        ),
        _enrich(manifest("TFJob", {"Chief": 1, "PS": 1, "Worker": 2}, spec=policy), "tensorflow"),
        _enrich(manifest("XGBoostJob", {"Master": 1, "Worker": 2}, spec=policy), "xgboost"),
        _enrich(manifest("PaddleJob", {"Master": 1, "Worker": 2}, spec=policy), "paddle"),
        _enrich(manifest("JAXJob", {"Worker": 2}, spec=policy), "jax"),
        _enrich(manifest("MXJob", {"Scheduler": 1, "Server": 1, "Worker": 2}, spec=policy), "mxnet"),
        _enrich(
            manifest("MPIJob", {"Launcher": 1, "Worker": 2}, spec={**policy, "slotsPerWorker": 2}), "mpi"
        ),
        _enrich(
            manifest(
                "MPIJob",
                {"Launcher": 1, "Worker": 2},
                api_version=V2BETA1,
                spec={"slotsPerWorker": 2, "mpiImplementation": "OpenMPI", **policy},
            ),
            "mpi",
        ),
    ]


BASES: list[dict[str, Any]] = [
    *(doc for path in EXAMPLES for doc in load_documents(path.read_text())),
    *_builder_manifests(),
]
_BASE = st.sampled_from(BASES)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

# --- hostile values ---------------------------------------------------------------------------------

HUGE, NAN, INF, NEG_INF = "@@HUGE@@", "@@NAN@@", "@@INF@@", "@@NEG_INF@@"
"""Stand for a 5,000-digit integer (Python can neither dump nor print one) and the non-finite floats
(JSON has none), written into the text as YAML reads them."""
_LITERALS = {HUGE: "1" + "0" * 5000, NAN: ".nan", INF: ".inf", NEG_INF: "-.inf"}

_NUMBERS = st.one_of(
    st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**8, 10**30, HUGE]),
    st.integers(),
    st.sampled_from([NAN, INF, NEG_INF, 0.5, -0.0, 1e308]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_TEXTS = st.one_of(
    st.sampled_from(
        ["", "oops", "Worker", "worker", "Always", "-1", "1Gi", "$(X)", "a" * 300, "Ünïcødé-名前"]
    ),
    st.text(max_size=20),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-0123456789", min_size=60, max_size=260),
)
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _TEXTS)
HOSTILE = st.one_of(
    _SCALARS,
    st.lists(_SCALARS, max_size=3),
    st.dictionaries(_TEXTS, _SCALARS, max_size=3),
    # builds, not just: a fresh object each time, or a mutation of it would persist between examples.
    st.builds(lambda: [{}]),
    st.builds(lambda: {"": None}),
)

# --- mutations --------------------------------------------------------------------------------------


def _locations(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (dict keys and list indices), its root included."""
    found = [path]
    if isinstance(value, dict):
        for key, child in value.items():
            found += _locations(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += _locations(child, (*path, index))
    return found


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


_SEEDS = st.integers(0, 2**32 - 1)
_HOW = ("replace", "delete", "extra", "wrap", "map-as-list", "scalar-for-container")


@st.composite
def _mutated(draw: st.DrawFn, document: dict[str, Any]) -> dict[str, Any]:
    result = copy.deepcopy(document)
    # Hypothesis draws small values most often (its own Random too), which would mutate the first keys
    # (apiVersion, kind) over and over; a Random seeded by a drawn seed picks every location alike.
    choose = random.Random(draw(_SEEDS))
    for _ in range(draw(st.integers(1, 3))):
        paths = _locations(result)[1:]
        if not paths:
            break
        path = choose.choice(paths)
        parent, key = (_get(result, path[:-1]), path[-1]) if path else (None, None)
        current = _get(result, path)
        how = choose.choice(_HOW)
        if parent is None:
            break
        if how == "replace":
            parent[key] = draw(HOSTILE)
        elif how == "delete":
            del parent[key]
        elif how == "extra" and isinstance(current, dict):
            current[draw(_TEXTS)] = draw(HOSTILE)
        elif how == "extra" and isinstance(current, list):
            current.append(draw(HOSTILE))
        elif how == "wrap":
            parent[key] = [current]
        elif how == "map-as-list" and isinstance(current, dict):
            parent[key] = [{"name": k, "value": v} for k, v in current.items()]
        else:
            parent[key] = draw(_SCALARS)
    return result


def _duplicate_a_line(text: str, line: int) -> str:
    """Repeat one ``key: value`` line: a duplicated YAML key (or, for a list item, one more item)."""
    lines = text.splitlines()
    if not lines:
        return text
    index = line % len(lines)
    return "\n".join([*lines[: index + 1], lines[index], *lines[index + 1 :]]) + "\n"


@st.composite
def malformed_manifests(draw: st.DrawFn) -> str:
    """One YAML manifest: a base (example or builder) with 1-3 mutations, sometimes a duplicated line."""
    document = draw(_BASE)
    mutated = draw(_mutated(document))
    choose = random.Random(draw(_SEEDS))
    if choose.random() < 0.1:
        text = yaml.dump(mutated, Dumper=_DUMPER, sort_keys=False, allow_unicode=True)
        text = _duplicate_a_line(text, choose.randrange(max(text.count("\n"), 1)))
        quotes = "'"
    else:
        # JSON is YAML too, in flow style, and dumping it is ten times faster than block YAML.
        text = json.dumps(mutated, ensure_ascii=False)
        quotes = '"'
    for sentinel, literal in _LITERALS.items():
        text = text.replace(f"{quotes}{sentinel}{quotes}", literal).replace(sentinel, literal)
    return text


# --- the contract -----------------------------------------------------------------------------------

DOCUMENT_LEVEL = ("not valid YAML", "each YAML document must be a mapping", "Too many: the manifest holds")


def outcome(text: str, target: str) -> str:
    """``accepted`` or ``rejected``; raises ``AssertionError`` when the contract is broken.

    Any exception other than ``InvalidJobError`` escapes, as the crash it is.
    """
    try:
        documents = load_documents(text)
    except InvalidJobError as error:
        assert error.errors and all(e.message.startswith(DOCUMENT_LEVEL) for e in error.errors), error
        return "rejected"
    for document in documents:
        try:
            TARGETS[target](parse_job(document, strict=True))
        except InvalidJobError as error:
            assert error.errors, "an InvalidJobError without errors"
            for field_error in error.errors:
                assert_names_input(field_error, document)
            return "rejected"
    return "accepted"


def assert_names_input(error: FieldError, document: dict[str, Any]) -> None:
    """The error's path leads through the input: each step is there, or (a missing field) the path
    leaves the input at an object that lacks the key. It never steps into a scalar or past a list."""
    assert error.path, f"error without a path: {error}"
    assert _resolves(document, _steps(error.path)), f"{error.path!r} is not in the input: {error}"


_TOKEN = re.compile(r'\[("(?:[^"\\]|\\.)*"|[^\]]*)\]|([^.\[]+)')


def _steps(path: str) -> list[tuple[str, str]]:
    """``a.b[0][x.y]`` → ``[("name", "a"), ("name", "b"), ("index", "0"), ("index", "x.y")]``;
    a map key holding brackets is quoted: ``["a]b"]``."""
    return [
        ("index", _unquoted(m.group(1))) if m.group(1) is not None else ("name", m.group(2))
        for m in _TOKEN.finditer(path)
    ]


def _unquoted(step: str) -> str:
    return str(json.loads(step)) if step.startswith('"') else step


def _resolves(value: Any, steps: list[tuple[str, str]]) -> bool:
    if not steps:
        return True
    kind, text = steps[0]
    if isinstance(value, list) and kind == "index" and text.lstrip("-").isdigit():
        index = int(text)
        return 0 <= index < len(value) and _resolves(value[index], steps[1:])
    if not isinstance(value, dict):
        return False
    if kind == "index":
        return any(str(key) == text and _resolves(child, steps[1:]) for key, child in value.items())
    # A map key may itself hold dots (a replica type, a label): join name steps greedily.
    found = False
    for end in range(len(steps), 0, -1):
        if any(kind != "name" for kind, _ in steps[:end]):
            continue
        key = ".".join(text for _, text in steps[:end])
        for candidate, child in value.items():
            if str(candidate) == key:
                # A null is an unset field on the wire: an error may name a field below it.
                found = child is not None or end == len(steps)
                if _resolves(child, steps[end:]):
                    return True
    # An object without the key: the error names a missing field (or one below it).
    return not found
