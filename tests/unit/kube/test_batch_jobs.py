"""The patches that keep a launcher batch Job's suspension in step with its MPIJob (§4.12 step 8)."""

from __future__ import annotations

from typing import Any

from kubetrain.kube.batch_jobs import suspension_patches

FRESH = {
    "metadata": {"labels": {"queue": "b"}, "annotations": {"a": "1"}},
    "spec": {"nodeSelector": {"zone": "b"}, "tolerations": [{"key": "gpu"}]},
}


def _job(suspend: bool, **status: Any) -> dict[str, Any]:
    template = {"spec": {"nodeSelector": {"zone": "a", "old": "x"}}}
    return {"spec": {"suspend": suspend, "template": template}, "status": status}


def test_a_job_in_step_needs_no_patch() -> None:
    assert suspension_patches(_job(True), True, FRESH) == []


def test_a_finished_job_is_left_alone() -> None:
    done = _job(True, conditions=[{"type": "Complete", "status": "True"}])
    assert suspension_patches(done, False, FRESH) == []


def test_suspending_only_sets_suspend() -> None:
    assert suspension_patches(_job(False), True, FRESH) == [("", {"spec": {"suspend": True}})]


def test_resuming_a_started_job_clears_its_start_time_first() -> None:
    patches = suspension_patches(_job(True, startTime="2026-01-01T00:00:00Z"), False, FRESH)
    assert patches[0] == ("/status", {"status": {"startTime": None}})


def test_resuming_takes_the_fresh_scheduling_directives_and_replaces_the_node_selector() -> None:
    [(subresource, body)] = suspension_patches(_job(True), False, FRESH)
    template = body["spec"]["template"]
    assert (subresource, body["spec"]["suspend"]) == ("", False)
    assert template["metadata"] == {"labels": {"queue": "b"}, "annotations": {"a": "1"}}
    assert template["spec"] == {
        "nodeSelector": {"old": None, "zone": "b"},
        "tolerations": [{"key": "gpu"}],
        "schedulingGates": None,
    }
