"""The chart's JobSet dependency is JobSet's own chart as its release publishes it, from the module pinned in
tools/jobset (the vendored copy must be what `make jobset-manifests` writes), and the chart installs it."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubetrain.envtest import jobset, jobset_release

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "kubetrain"


def test_the_vendored_jobset_chart_is_what_the_pinned_release_packages() -> None:
    expected = jobset_release.chart_files()
    found = {
        path.relative_to(jobset_release.VENDORED_CHART).as_posix(): path.read_text()
        for path in jobset_release.VENDORED_CHART.rglob("*")
        if path.is_file()
    }
    stale = sorted(name for name in expected.keys() | found.keys() if expected.get(name) != found.get(name))
    assert not stale, (
        f"charts/kubetrain/charts/jobset: {', '.join(stale)} out of date; run `make jobset-manifests`"
    )


def test_the_vendored_chart_runs_the_release_image() -> None:
    values = yaml.safe_load((jobset_release.VENDORED_CHART / "values.yaml").read_text())
    assert values["image"] == {
        "repository": "registry.k8s.io/jobset/jobset",
        "pullPolicy": "IfNotPresent",
        "pullSecrets": [],
        "tag": jobset.version(),
    }


def test_the_chart_depends_on_the_vendored_jobset_behind_jobset_enabled() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    vendored = yaml.safe_load((jobset_release.VENDORED_CHART / "Chart.yaml").read_text())
    [dependency] = chart["dependencies"]
    assert (dependency["name"], dependency["version"]) == ("jobset", vendored["version"])
    assert dependency["condition"] == "jobset.enabled"
    assert yaml.safe_load((CHART / "values.yaml").read_text())["jobset"]["enabled"] is True
