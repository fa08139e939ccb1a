"""The cache of one kind: keys, owner and label indexes, atomic replace and watch events."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.kube.runtime.store import (
    CHANGE_LOG_MIN_BOUND,
    ChangeType,
    KubeObject,
    Store,
    controller_reference,
    object_key,
)

JOB_LABEL = "training.kubeflow.org/job-name"


def pod(
    name: str,
    *,
    namespace: str = "ns",
    version: str = "1",
    owner: str | None = None,
    job: str | None = None,
    controller: bool = True,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace, "resourceVersion": version}
    if owner is not None:
        metadata["ownerReferences"] = [{"uid": owner, "controller": controller, "kind": "PyTorchJob"}]
    if job is not None:
        metadata["labels"] = {JOB_LABEL: job}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata}


def names(objects: list[KubeObject]) -> list[str]:
    return [obj["metadata"]["name"] for obj in objects]


def test_objects_are_keyed_by_namespace_and_name() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", namespace="team"))
    assert store.get("team/a") is not None
    assert store.get_named("team", "a") is store.get("team/a")
    assert "team/a" in store


def test_a_cluster_scoped_object_is_keyed_by_name_alone() -> None:
    assert object_key({"metadata": {"name": "node-1"}}) == "node-1"


def test_objects_can_be_listed_per_namespace() -> None:
    store = Store()
    store.replace([pod("a", namespace="one"), pod("b", namespace="two")], "5")
    assert names(store.objects("one")) == ["a"]
    assert sorted(names(store.objects())) == ["a", "b"]


def test_objects_are_indexed_by_their_controller_owner_uid() -> None:
    store = Store()
    store.replace([pod("a", owner="job-1"), pod("b", owner="job-2"), pod("c", owner="job-1")], "5")
    assert names(store.by_owner("job-1")) == ["a", "c"]


def test_an_owner_that_is_not_the_controller_is_not_indexed() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", owner="job-1", controller=False))
    assert store.by_owner("job-1") == []


def test_objects_are_indexed_by_a_chosen_label() -> None:
    store = Store(indexed_labels=[JOB_LABEL])
    store.replace([pod("a", job="mnist"), pod("b", job="other"), pod("c")], "5")
    assert names(store.by_label(JOB_LABEL, "mnist")) == ["a"]


def test_asking_for_an_unindexed_label_names_the_fix() -> None:
    with pytest.raises(KeyError, match="indexed_labels"):
        Store().by_label(JOB_LABEL, "mnist")


def test_a_modification_moves_the_object_between_index_entries() -> None:
    store = Store(indexed_labels=[JOB_LABEL])
    store.apply(ChangeType.ADDED, pod("a", owner="job-1", job="mnist"))
    store.apply(ChangeType.MODIFIED, pod("a", version="2", owner="job-2", job="other"))
    assert store.by_owner("job-1") == []
    assert store.by_label(JOB_LABEL, "mnist") == []
    assert names(store.by_owner("job-2")) == ["a"]
    assert names(store.by_label(JOB_LABEL, "other")) == ["a"]


def test_a_deletion_removes_the_object_from_every_index() -> None:
    store = Store(indexed_labels=[JOB_LABEL])
    store.apply(ChangeType.ADDED, pod("a", owner="job-1", job="mnist"))
    change = store.apply(ChangeType.DELETED, pod("a", version="2", owner="job-1", job="mnist"))
    assert change is not None and change.type is ChangeType.DELETED
    assert change.object["metadata"]["resourceVersion"] == "2"
    assert len(store) == 0
    assert store.by_owner("job-1") == []
    assert store.by_label(JOB_LABEL, "mnist") == []


def test_an_event_the_cache_already_reflects_is_no_change() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="3"))
    assert store.apply(ChangeType.MODIFIED, pod("a", version="3")) is None
    assert store.apply(ChangeType.DELETED, pod("unknown")) is None


def test_an_update_reports_old_and_new_state() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="1"))
    change = store.apply(ChangeType.MODIFIED, pod("a", version="2"))
    assert change is not None and change.type is ChangeType.MODIFIED
    assert change.old is not None and change.old["metadata"]["resourceVersion"] == "1"
    assert change.object["metadata"]["resourceVersion"] == "2"


def test_an_added_event_for_a_known_object_is_a_modification() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="1"))
    change = store.apply(ChangeType.ADDED, pod("a", version="2"))
    assert change is not None and change.type is ChangeType.MODIFIED


def test_watch_events_advance_the_cache_resource_version() -> None:
    store = Store()
    store.replace([], "10")
    store.apply(ChangeType.ADDED, pod("a", version="11"))
    assert store.resource_version == "11"


def test_a_writes_answer_newer_than_the_cache_is_kept_and_its_watch_event_is_then_no_change() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="3"))
    change = store.apply_written(pod("a", version="4"))
    assert change is not None and change.type is ChangeType.MODIFIED
    assert store.get("ns/a") == pod("a", version="4")
    assert store.apply(ChangeType.MODIFIED, pod("a", version="4")) is None


def test_a_writes_answer_older_than_what_the_watch_brought_leaves_the_cache_as_it_is() -> None:
    # The write answered "4"; before the writer read the answer, the watch brought "4" and then "5", another
    # client's change: the cache must stay at "5", whose watch event will not come again.
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="3"))
    store.apply(ChangeType.MODIFIED, pod("a", version="4"))
    store.apply(ChangeType.MODIFIED, pod("a", version="5", job="suspended"))
    assert store.apply_written(pod("a", version="4")) is None
    assert store.get("ns/a") == pod("a", version="5", job="suspended")
    assert store.apply_written(pod("a", version="5")) is None


def test_resource_versions_compare_as_numbers_not_text() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="99"))
    assert store.apply_written(pod("a", version="100")) is not None
    assert store.apply_written(pod("a", version="99")) is None


def test_a_writes_answer_for_an_object_deleted_meanwhile_does_not_bring_it_back() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="3", owner="job-1"))
    store.apply(ChangeType.DELETED, pod("a", version="5", owner="job-1"))
    assert store.apply_written(pod("a", version="4", owner="job-1")) is None
    assert "ns/a" not in store
    assert store.by_owner("job-1") == []


def test_a_writes_answer_with_a_version_that_is_no_number_is_left_to_the_watch() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a", version="3"))
    assert store.apply_written(pod("a", version="opaque")) is None
    assert store.get("ns/a") == pod("a", version="3")


def test_a_writes_answer_does_not_move_the_version_the_watch_resumes_from() -> None:
    store = Store()
    store.replace([pod("a", version="3")], "3")
    store.apply_written(pod("a", version="4"))
    assert store.resource_version == "3"


def test_replace_swaps_the_whole_content_and_reports_the_difference() -> None:
    store = Store(indexed_labels=[JOB_LABEL])
    store.replace([pod("kept", version="1"), pod("changed", version="1"), pod("gone", owner="job-1")], "5")
    changes = store.replace([pod("kept", version="1"), pod("changed", version="2"), pod("new")], "9")
    reported = sorted((change.type.value, change.object["metadata"]["name"]) for change in changes)
    assert reported == [("ADDED", "new"), ("DELETED", "gone"), ("MODIFIED", "changed")]
    assert sorted(store.keys()) == ["ns/changed", "ns/kept", "ns/new"]
    assert store.by_owner("job-1") == []
    assert store.resource_version == "9"


def test_iterating_while_the_cache_changes_is_safe() -> None:
    store = Store()
    store.replace([pod("a"), pod("b")], "1")
    for obj in store:
        store.apply(ChangeType.DELETED, obj)
    assert len(store) == 0


def test_the_controller_reference_names_the_owning_object() -> None:
    reference = controller_reference(pod("a", owner="job-1"))
    assert reference is not None
    assert (reference["kind"], reference["uid"]) == ("PyTorchJob", "job-1")


def test_an_object_without_a_controller_has_no_controller_reference() -> None:
    assert controller_reference(pod("a", owner="job-1", controller=False)) is None
    assert controller_reference(pod("b")) is None


def test_an_owners_version_changes_with_each_of_its_objects_added_changed_or_removed() -> None:
    store = Store()
    seen = [store.owner_version("job-a")]
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    seen.append(store.owner_version("job-a"))
    store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a", version="2"))
    seen.append(store.owner_version("job-a"))
    store.apply(ChangeType.ADDED, pod("a-1", owner="job-a"))
    seen.append(store.owner_version("job-a"))
    store.apply(ChangeType.DELETED, pod("a-1", owner="job-a"))
    seen.append(store.owner_version("job-a"))
    assert len(set(seen)) == len(seen)


def test_an_owners_version_stays_while_only_other_owners_objects_change() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    before = store.owner_version("job-a")
    store.apply(ChangeType.ADDED, pod("b-0", owner="job-b"))
    store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a"))  # the version the cache already has
    assert store.owner_version("job-a") == before


def test_a_relist_changes_the_version_of_every_owner_it_touches() -> None:
    store = Store()
    store.replace([pod("a-0", owner="job-a"), pod("b-0", owner="job-b")], "5")
    a, b = store.owner_version("job-a"), store.owner_version("job-b")
    store.replace([pod("a-0", owner="job-a", version="2")], "6")
    assert store.owner_version("job-a") != a
    assert store.owner_version("job-b") == 0 != b, "an owner left with nothing reads as never seen"


def test_an_owners_keys_are_the_same_list_while_none_joins_or_leaves() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-1", owner="job-a"))
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    keys = store.owned_keys("job-a")
    store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a", version="2"))
    assert store.owned_keys("job-a") is keys == ["ns/a-0", "ns/a-1"]
    store.apply(ChangeType.ADDED, pod("a-2", owner="job-a"))
    assert store.owned_keys("job-a") == ["ns/a-0", "ns/a-1", "ns/a-2"]
    assert keys == ["ns/a-0", "ns/a-1"], "the list handed out earlier is not changed"


def test_an_owners_changes_are_unknown_until_asked_about_then_listed_in_order() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    changed, cursor = store.changes_since("job-a", None)
    assert changed is None
    store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a", version="2"))
    store.apply(ChangeType.ADDED, pod("b-0", owner="job-b"))
    store.apply(ChangeType.ADDED, pod("a-1", owner="job-a"))
    store.apply(ChangeType.DELETED, pod("a-0", owner="job-a", version="3"))
    changed, cursor = store.changes_since("job-a", cursor)
    assert changed == ["ns/a-0", "ns/a-1", "ns/a-0"]
    assert store.changes_since("job-a", cursor) == ([], cursor)


def test_after_a_relist_an_owners_changes_are_unknown() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    _, cursor = store.changes_since("job-a", None)
    store.replace([pod("a-0", owner="job-a", version="2")], "5")
    assert store.changes_since("job-a", cursor)[0] is None


def test_a_cursor_into_an_owners_earlier_log_reads_as_unknown() -> None:
    # Every pod of the job deleted (a suspension), then made again: the old cursor must not alias the new log.
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    _, cursor = store.changes_since("job-a", None)
    for version in range(2, 6):
        store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a", version=str(version)))
    store.apply(ChangeType.DELETED, pod("a-0", owner="job-a", version="6"))
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a", version="7"))
    assert store.changes_since("job-a", cursor)[0] is None


def test_a_reader_too_far_behind_its_owners_bounded_log_reads_as_unknown() -> None:
    store = Store()
    store.apply(ChangeType.ADDED, pod("a-0", owner="job-a"))
    _, cursor = store.changes_since("job-a", None)
    for version in range(2, CHANGE_LOG_MIN_BOUND + 3):
        store.apply(ChangeType.MODIFIED, pod("a-0", owner="job-a", version=str(version)))
    assert store.changes_since("job-a", cursor)[0] is None
