"""An installed kubetrain writes the same Go module that a checkout has committed in tools/envtest."""

from __future__ import annotations

from kubetrain.envtest import binaries, gomodule

UPSTREAM = """module k8s.io/kubernetes

go 1.24.0

require (
\tgithub.com/blang/semver/v4 v4.0.0
\tk8s.io/api v0.0.0
\tk8s.io/kubelet v0.0.0
\tk8s.io/utils v0.0.0-20250604170112-4c0f3b243397
)
"""


def test_staging_modules_are_the_k8s_requirements_at_the_fake_v0_0_0() -> None:
    assert gomodule.staging_modules(UPSTREAM) == ["k8s.io/api", "k8s.io/kubelet"]


def test_each_staging_module_is_pinned_to_the_published_v0_minor_patch_of_the_release() -> None:
    text = gomodule.go_mod("v1.34.4", UPSTREAM)
    assert "\tk8s.io/api => k8s.io/api v0.34.4\n" in text
    assert "k8s.io/utils =>" not in text
    assert "require k8s.io/kubernetes v1.34.4\n" in text


def test_the_pinned_version_is_the_one_the_committed_module_requires() -> None:
    assert binaries.kubernetes_version(binaries.module_dir()) == gomodule.KUBERNETES_VERSION


def test_the_generated_sources_are_the_committed_ones() -> None:
    module = binaries.module_dir()
    assert (module / "cmd" / "etcd" / "main.go").read_text() == gomodule.ETCD_MAIN
    assert (module / "tools.go").read_text() == gomodule.TOOLS_GO
    assert (
        (module / "go.mod")
        .read_text()
        .startswith(gomodule.GO_MOD_HEADER + f"module {gomodule.MODULE_PATH}\n")
    )
