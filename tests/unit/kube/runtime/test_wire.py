"""Decoding the API server's JSON: orjson's speed, the standard library's reach."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
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


class Named(msgspec.Struct, forbid_unknown_fields=True):
    """A schema that keeps an object's name and skips its spec unread."""

    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    spec: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


def name_only(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": obj.get("metadata", {}).get("name")}, "fallback": True}


NAMED = wire.KeptFields(Named, lambda item: {"metadata": {"name": item.metadata.get("name")}}, name_only)


def test_a_list_page_is_decoded_to_what_is_kept_with_its_version_and_continue_token() -> None:
    page = (
        b'{"metadata": {"resourceVersion": "7", "continue": "next"}, "items": [{"metadata": {"name": "a"}, '
    )
    page += b'"spec": {"big": [1, 2, 3]}}]}'
    assert NAMED.list_page(page) == ([{"metadata": {"name": "a"}}], "7", "next")


def test_a_list_page_the_schema_refuses_is_left_to_the_general_way() -> None:
    page = b'{"metadata": {"resourceVersion": "7"}, "items": [{"metadata": {"name": "a"}, "other": 1}]}'
    assert NAMED.list_page(page) is None


def test_an_event_object_is_decoded_to_what_is_kept() -> None:
    line = '{"type": "MODIFIED", "object": {"metadata": {"name": "a"}, "spec": {"big": true}}}'
    assert NAMED.event(line) == ("MODIFIED", {"metadata": {"name": "a"}})


def test_an_event_object_the_schema_refuses_goes_through_the_fallback() -> None:
    line = '{"type": "ADDED", "object": {"metadata": {"name": "a"}, "other": 1}}'
    assert NAMED.event(line) == ("ADDED", {"metadata": {"name": "a"}, "fallback": True})


def test_bookmarks_and_errors_are_decoded_whole() -> None:
    bookmark = '{"type": "BOOKMARK", "object": {"kind": "Pod", "metadata": {"resourceVersion": "9"}}}'
    error = '{"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}'
    assert NAMED.event(bookmark) == ("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "9"}})
    assert NAMED.event(error) == ("ERROR", {"kind": "Status", "code": 410, "message": "too old"})


def test_an_event_that_is_not_json_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="property name"):
        NAMED.event("{not json")
