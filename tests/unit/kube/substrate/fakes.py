"""A fake API server for the operator's unit tests: records requests, answers with one status code."""

from __future__ import annotations

import json
from typing import Any

import httpx2


class FakeApi:
    def __init__(self, status_code: int = 201) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self.status_code = status_code

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else None
        self.requests.append((request.method, request.url.path, body))
        if self.status_code >= 400:
            return httpx2.Response(self.status_code, json={"reason": "Boom", "message": "no"})
        return httpx2.Response(self.status_code, json=body or {})
