"""Installing CustomResourceDefinitions from YAML files and waiting until the API server serves them."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import yaml

from kubetrain.envtest.kubeapi import ApiError, KubeApi, KubeObject

CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it: a release's CRDs run to megabytes (JobSet's is
0.8 MB, 3.6 s to parse in pure Python on a loaded machine, 0.4 s with libyaml)."""


def read_crds(paths: Iterable[Path]) -> list[KubeObject]:
    crds: list[KubeObject] = []
    for path in sorted(paths):
        for document in yaml.load_all(path.read_text(), Loader=SAFE_LOADER):
            if document and document.get("kind") == "CustomResourceDefinition":
                crds.append(document)
    return crds


def install_crds(api: KubeApi, directory: Path, timeout: float = 30.0) -> list[str]:
    """Create or replace every CRD in ``directory/*.yaml``; return their names once all are Established and
    listed by discovery (right after Established, discovery can lag for a moment)."""
    return install_crd_files(api, [*directory.glob("*.yaml"), *directory.glob("*.yml")], timeout, directory)


def install_crd_files(
    api: KubeApi, files: Iterable[Path], timeout: float = 30.0, where: Path | None = None
) -> list[str]:
    """``install_crds`` for the CRDs in ``files``."""
    files = list(files)
    crds = read_crds(files)
    if not crds:
        raise FileNotFoundError(f"no CRD manifests in {where or [str(f) for f in files]}")
    for crd in crds:
        name = crd["metadata"]["name"]
        try:
            existing = api.get(f"{CRD_PATH}/{name}")
        except ApiError as error:
            if error.code != 404:
                raise
            api.create(CRD_PATH, crd)
        else:
            crd = {
                **crd,
                "metadata": {**crd["metadata"], "resourceVersion": existing["metadata"]["resourceVersion"]},
            }
            api.replace(f"{CRD_PATH}/{name}", crd)
    for crd in crds:
        _wait_served(api, crd, timeout)
    return [crd["metadata"]["name"] for crd in crds]


def _wait_served(api: KubeApi, crd: KubeObject, timeout: float) -> None:
    name = crd["metadata"]["name"]
    group = crd["spec"]["group"]
    plural = crd["spec"]["names"]["plural"]
    versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
    deadline = time.monotonic() + timeout
    while True:
        current = api.get(f"{CRD_PATH}/{name}")
        established = any(
            c["type"] == "Established" and c["status"] == "True"
            for c in current.get("status", {}).get("conditions") or []
        )
        if established and all(_discovered(api, group, version, plural) for version in versions):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {name} not Established and served within {timeout:.0f} s")
        time.sleep(0.1)


def _discovered(api: KubeApi, group: str, version: str, plural: str) -> bool:
    try:
        resources = api.get(f"/apis/{group}/{version}")["resources"]
    except ApiError:
        return False
    return any(resource["name"] == plural for resource in resources)
