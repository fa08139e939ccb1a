"""Installing CRDs from a directory."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from kubetrain.envtest.crds import install_crds
from kubetrain.envtest.kubeapi import KubeApi


def test_a_directory_without_crd_manifests_is_refused_by_name(tmp_path: Path) -> None:
    # Before anything is sent: an empty directory (a module not downloaded) would otherwise install nothing,
    # and the operator would wait for kinds the API server never learns.
    with pytest.raises(FileNotFoundError, match=str(tmp_path)):
        install_crds(cast(KubeApi, None), tmp_path)
