"""Decoding the API server's JSON: orjson's speed, the standard library's reach."""

from __future__ import annotations

import json
import math

import pytest

from kubetrain.kube.runtime import wire

POD = {
    "kind": "Pod",
    "metadata": {"name": "job-worker-0", "labels": {"training.kubeflow.org/replica-index": "0"}},
    "spec": {"containers": [{"name": "pytorch", "resources": {"limits": {"cpu": 1}}}]},
    "status": {"phase": "Succeeded", "ready": False, "restartCount": 0, "score": 0.5, "message": None},
}


def test_a_document_decodes_to_what_the_standard_library_makes_of_it() -> None:
    text = json.dumps(POD)
    assert wire.decode(text.encode()) == json.loads(text)
    assert wire.decode(text) == json.loads(text)


def test_a_lone_surrogate_escape_is_decoded_rather_than_refused() -> None:
    # orjson refuses it; JSON allows it, and a list holding one object with it must not fail for good.
    assert wire.decode(b'{"note": "\\ud800"}') == {"note": "\ud800"}


def test_a_number_beyond_a_doubles_range_is_decoded_rather_than_refused() -> None:
    assert wire.decode(b'{"value": 1e400}') == {"value": math.inf}


def test_what_is_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="property name"):
        wire.decode(b"{not json")
