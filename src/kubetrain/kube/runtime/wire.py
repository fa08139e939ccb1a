"""Decoding the API server's JSON: orjson, with the standard library's decoder behind it; and, for the kinds
whose caches keep a small part of each object, msgspec decoding only that part (``KeptFields``).

At start-up the operator decodes every object it caches: 80 MB of JSON for 2,000 finished jobs with their
10,000 pods and 10,000 services (``bench/many_jobs.py``), where the standard library's decoder, with the
collections it set off, was a third of the start-up's CPU (py-spy). orjson (Rust, Apache-2.0 OR MIT, wheels
for every platform the operator's image is built for) decodes the same bytes to the same dicts in less
time (docs/benchmarks.md, "Many jobs"), and shares the keys it decodes through a cache of its own.

orjson refuses two things the standard library reads: a lone surrogate escape (``"\\ud800"``) and a number
beyond a double's range. The API server (Go) should never send either, but a document that has one is
decoded again by the standard library rather than failing the list that holds it (a list that fails keeps
the cache from ever syncing). An integer beyond 64 bits becomes a float under orjson, as the API server's
own decoder already made it before storing a custom resource.

Most of a pod's JSON is what the operator's cache drops (``kube.compact``): its ``managedFields`` (2.2 of
5.6 KB for a finished pod of ``bench/many_jobs.py``) and the spec the operator wrote. Decoding all of it into
dicts and strings only to drop them was half the start-up's decoding. ``KeptFields`` decodes a kind with
msgspec (BSD-3-Clause, C, wheels for every platform the image is built for) against a schema of what is
kept: what the schema leaves out is skipped by the parser and never becomes a Python object. Whatever the
schema does not expect (an unknown field where every field is known, a value of another type) makes that
page or event go the general way instead (decoded whole, then ``fallback``), so the cache holds exactly
what it held before, whatever the API server sends.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import msgspec
import orjson

Item = TypeVar("Item")

OBJECT_EVENTS = frozenset({"ADDED", "MODIFIED", "DELETED"})
"""Watch events that carry an object of the watched kind (BOOKMARK carries only its metadata, ERROR a
Status)."""


def decode(content: bytes | str) -> Any:
    """The JSON document in ``content``; raises ValueError (``json.JSONDecodeError``) if it is not one."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)


class _ListMeta(msgspec.Struct, rename="camel"):
    resource_version: Any = None
    continue_: Any = msgspec.field(default=None, name="continue")


class _Event(msgspec.Struct):
    type: Any = None
    object: msgspec.Raw = msgspec.field(default_factory=msgspec.Raw)


class KeptFields(Generic[Item]):
    """One kind decoded straight to what its cache keeps: ``schema`` (a msgspec Struct) names what is read,
    ``kept`` turns one decoded item into the cached dict, and ``fallback`` turns a whole decoded object into
    the same dict for what the schema refuses."""

    def __init__(
        self,
        schema: type[Item],
        kept: Callable[[Item], dict[str, Any]],
        fallback: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        page = msgspec.defstruct(
            f"{schema.__name__}List",
            [("metadata", _ListMeta | None, None), ("items", list[schema] | None, None)],  # type: ignore[valid-type]
        )
        self._page: msgspec.json.Decoder[Any] = msgspec.json.Decoder(page)
        self._item: msgspec.json.Decoder[Item] = msgspec.json.Decoder(schema)
        self._event = msgspec.json.Decoder(_Event)
        self._kept = kept
        self.fallback = fallback

    def list_page(self, content: bytes) -> tuple[list[dict[str, Any]], str, str | None] | None:
        """A list page's kept items, its resourceVersion and continue token; None when the schema refuses
        something in it (decode it whole and apply ``fallback``)."""
        try:
            page = self._page.decode(content)
        except (msgspec.ValidationError, msgspec.DecodeError):
            return None
        metadata = page.metadata or _ListMeta()
        items = [self._kept(item) for item in page.items or ()]
        return items, str(metadata.resource_version or ""), metadata.continue_ or None

    def event(self, line: bytes | str) -> tuple[str, dict[str, Any]]:
        """A watch event's type and object: an object of the kind as kept, anything else (a bookmark, an
        error's Status) decoded whole."""
        try:
            event = self._event.decode(line)
            if event.type in OBJECT_EVENTS:
                return str(event.type), self._kept(self._item.decode(event.object))
        except (msgspec.ValidationError, msgspec.DecodeError):
            pass
        whole = decode(line)
        kind = str(whole.get("type"))
        obj = whole.get("object") or {}
        return kind, self.fallback(obj) if kind in OBJECT_EVENTS else obj
