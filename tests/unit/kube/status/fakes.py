"""An in-memory API server for the status endpoint's unit tests: objects by path, resourceVersions that
guard updates, 409 for a name taken, JSON patches with ``test``, and canned answers for anything else."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import httpx2

Handler = Callable[[httpx2.Request], httpx2.Response]


def status(code: int, reason: str, message: str) -> httpx2.Response:
    body = {"kind": "Status", "status": "Failure", "code": code, "reason": reason, "message": message}
    return httpx2.Response(code, json=body)


class ObjectApi:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.answers: dict[tuple[str, str], Handler] = {}
        """(method, path) → a handler that answers instead of the object store."""
        self._version = 0

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle), base_url="https://api")

    def put_object(self, path: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store ``obj`` at ``path`` as the server would (a new resourceVersion), unlogged."""
        stored = copy.deepcopy(obj)
        self._version += 1
        stored.setdefault("metadata", {})["resourceVersion"] = str(self._version)
        self.objects[path] = stored
        return stored

    def calls(self, method: str, path_prefix: str = "") -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] == method and r[1].startswith(path_prefix)]

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        body: Any = json.loads(request.content) if request.content else None
        self.requests.append((request.method, path, body))
        answer = self.answers.get((request.method, path))
        if answer is not None:
            return answer(request)
        if request.method == "GET":
            found = self.objects.get(path)
            return httpx2.Response(200, json=found) if found else status(404, "NotFound", f"{path} not found")
        if request.method == "POST":
            target = f"{path}/{body['metadata']['name']}"
            if target in self.objects:
                return status(409, "AlreadyExists", f"{target} already exists")
            return httpx2.Response(201, json=self.put_object(target, body))
        if request.method == "PUT":
            current = self.objects.get(path)
            if current is None:
                return status(404, "NotFound", f"{path} not found")
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return status(409, "Conflict", "the object has been modified")
            return httpx2.Response(200, json=self.put_object(path, body))
        if request.method == "PATCH":
            return self._patch(path.removesuffix("/status"), body)
        return status(405, "MethodNotAllowed", request.method)

    def _patch(self, path: str, operations: list[dict[str, Any]]) -> httpx2.Response:
        current = self.objects.get(path)
        if current is None:
            return status(404, "NotFound", f"{path} not found")
        patched = copy.deepcopy(current)
        for operation in operations:
            *parents, last = operation["path"].strip("/").split("/")
            node: Any = patched
            for part in parents:
                if part not in node:
                    return status(422, "Invalid", f"missing path {operation['path']}")
                node = node[part]
            if operation["op"] == "test":
                if node.get(last) != operation["value"]:
                    return status(422, "Invalid", f"the test at {operation['path']} failed")
            elif operation["op"] in ("add", "replace"):
                node[last] = operation["value"]
        return httpx2.Response(200, json=self.put_object(path, patched))
