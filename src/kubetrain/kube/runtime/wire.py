"""Decoding the API server's JSON: orjson, with the standard library's decoder behind it.

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
"""

from __future__ import annotations

import json
from typing import Any

import orjson


def decode(content: bytes | str) -> Any:
    """The JSON document in ``content``; raises ValueError (``json.JSONDecodeError``) if it is not one."""
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        return json.loads(content)
