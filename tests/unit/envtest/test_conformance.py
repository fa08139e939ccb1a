"""Comparing what two operators made of one job: snapshots normalised alike, differences field by field, the
allow-list of docs/migration.md parsed and applied, and what a peer's event budget explains."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.envtest.conformance import (
    ABSENT,
    WHOLE,
    Allowance,
    AllowList,
    AllowListError,
    Comparison,
    Difference,
    Snapshot,
    compare,
    field_paths,
    glob,
    mark_spam_filtered,
    parse_allow_list,
)


def _pod(name: str, env: list[dict[str, str]], uid: str = "u-pod", namespace: str = "ns-a") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "resourceVersion": "42",
            "creationTimestamp": "2026-11-26T00:00:00Z",
            "ownerReferences": [{"kind": "PyTorchJob", "name": "j", "uid": "u-job"}],
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "pytorch", "env": env}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"},
    }


def test_named_list_items_are_paths_by_name_so_an_added_item_is_one_difference() -> None:
    before = {"env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}
    after = {"env": [{"name": "A", "value": "1"}, {"name": "NEW", "value": "x"}, {"name": "B", "value": "2"}]}
    assert set(field_paths(after)) - set(field_paths(before)) == {"env[NEW].name", "env[NEW].value"}
    assert [d.field for d in compare("c", {"o": before}, {"o": after}).differences] == [
        "env[NEW].name",
        "env[NEW].value",
    ]


def test_lists_without_distinct_names_are_paths_by_index() -> None:
    assert field_paths({"args": ["-n", "2"]}) == {"args[0]": "-n", "args[1]": "2"}


def test_an_object_on_one_side_only_is_one_difference_counting_all_its_fields() -> None:
    result = compare("c", {"Pod a": {"x": 1, "y": {"z": 2}}}, {})
    assert [(d.object, d.field, d.kubetrain) for d in result.differences] == [("Pod a", WHOLE, ABSENT)]
    assert (result.objects, result.fields) == (1, 2)


def test_equal_objects_count_their_fields_and_differ_in_nothing() -> None:
    result = compare("c", {"o": {"a": 1, "b": [1, 2]}}, {"o": {"a": 1, "b": [1, 2]}})
    assert (result.objects, result.fields, result.differences) == (1, 3, [])


def test_a_snapshot_drops_what_the_api_server_and_the_kubelet_set_and_names_the_namespace_alike() -> None:
    peer = Snapshot.of(None, [_pod("j-master-0", [{"name": "NS", "value": "ns-a"}])], [], [("ns-a", "$NS")])
    ours = Snapshot.of(
        None,
        [_pod("j-master-0", [{"name": "NS", "value": "ns-b"}], uid="u-other", namespace="ns-b")],
        [],
        [("ns-b", "$NS")],
    )
    assert compare("c", peer.objects, ours.objects).differences == []
    pod = peer.objects["Pod j-master-0"]
    assert "status" not in pod and "nodeName" not in pod["spec"] and "uid" not in pod["metadata"]


def test_a_generated_name_is_its_prefix_wherever_it_appears() -> None:
    pod = _pod("pi-launcher-x7k2p", [{"name": "SELF", "value": "pi-launcher-x7k2p"}])
    pod["metadata"]["generateName"] = "pi-launcher-"
    snapshot = Snapshot.of(None, [pod], [], [])
    assert (
        snapshot.objects["Pod pi-launcher-*"]["spec"]["containers"][0]["env"][0]["value"] == "pi-launcher-*"
    )


def test_a_secret_is_compared_by_its_keys_not_their_random_bytes() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "pi-ssh"},
        "data": {"b": "x", "a": "y"},
    }
    assert Snapshot.of(None, [secret], [], []).objects["Secret pi-ssh"]["data"] == ["a", "b"]


def test_a_jobs_status_is_compared_without_times_with_its_conditions_order() -> None:
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "j"},
        "spec": {},
        "status": {
            "conditions": [
                {"type": "Created", "status": "True", "reason": "R", "lastTransitionTime": "t1"},
                {"type": "Running", "status": "True", "reason": "R", "lastUpdateTime": "t2"},
            ],
            "startTime": "2026-11-26T00:00:00Z",
        },
    }
    status = Snapshot.of(job, [], [], []).objects["PyTorchJob j"]["status"]
    assert status["conditionOrder"] == ["Created", "Running"]
    assert status["conditions"]["Running"] == {"status": "True", "reason": "R"}
    assert status["startTime"] == "<set>" and "completionTime" not in status


def test_events_are_one_object_per_reason_and_message_with_their_repeats_added_up() -> None:
    involved = {"kind": "PyTorchJob", "name": "j", "uid": "u-job"}
    event = {
        "involvedObject": involved,
        "reason": "ExitedWithCode",
        "message": "m",
        "type": "Normal",
        "count": 2,
    }
    objects = Snapshot.of(None, [], [event, {**event, "count": 3}], []).objects
    assert objects == {"Event PyTorchJob/j ExitedWithCode: m": {"type": "Normal", "count": 5, "source": None}}


def test_an_event_recorded_through_events_k8s_io_compares_as_core_v1s_with_its_series_count() -> None:
    involved = {"kind": "TrainJob", "name": "t", "uid": "u-job"}
    core = {
        "involvedObject": involved,
        "reason": "R",
        "message": "m",
        "type": "Warning",
        "count": 2,
        "source": {"component": "trainer-trainjob-controller"},
    }
    # What the API serves through core/v1 for an events.k8s.io/v1 Event repeated in a series.
    series = {
        "involvedObject": involved,
        "reason": "R",
        "message": "m",
        "type": "Warning",
        "reportingComponent": "trainer-trainjob-controller",
        "series": {"count": 2, "lastObservedTime": "2026-11-27T00:00:00.000000Z"},
    }
    assert Snapshot.of(None, [], [core], []).objects == Snapshot.of(None, [], [series], []).objects


def _snapshot_configmap(runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "t-runtime-snapshot"},
        "data": {"runtime": runtime},
    }


def test_a_runtime_snapshot_is_compared_as_the_runtime_it_holds_less_what_the_api_server_set() -> None:
    stored = (
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: ClusterTrainingRuntime\n"
        "metadata:\n  name: torch\n  uid: u-1\n  resourceVersion: '7'\n  managedFields: []\n"
        "spec:\n  mlPolicy: {numNodes: 1}\n"
    )
    written_otherwise = (
        '{"kind": "ClusterTrainingRuntime", "apiVersion": "trainer.kubeflow.org/v1alpha1",'
        ' "metadata": {"uid": "u-2", "name": "torch"}, "spec": {"mlPolicy": {"numNodes": 1}}}'
    )
    one = Snapshot.of(None, [_snapshot_configmap(stored)], [], []).objects
    other = Snapshot.of(None, [_snapshot_configmap(written_otherwise)], [], []).objects
    assert one == other
    assert one["ConfigMap t-runtime-snapshot"]["data"]["runtime"]["spec"] == {"mlPolicy": {"numNodes": 1}}


def test_a_runtime_snapshot_that_is_not_yaml_is_compared_as_its_text() -> None:
    objects = Snapshot.of(None, [_snapshot_configmap("a: [")], [], []).objects
    assert objects["ConfigMap t-runtime-snapshot"]["data"] == {"runtime": "a: ["}


def test_glob_matches_brackets_and_dots_literally() -> None:
    pattern = glob("spec.containers[*].env[KUBEFLOW_*]")
    assert pattern.match("spec.containers[pytorch].env[KUBEFLOW_TRAINER_STATUS_SERVER_URL]")
    assert not pattern.match("spec.containersXpytorch].env[KUBEFLOW_X]")


ALLOW_LIST = """# Page

### The allow-list

Some words.

| peer | case | object | field | why |
|---|---|---|---|---|
| `training-operator` | `*` | `Event * ExitedWithCode: *` | `count` | timing |
| `*` | `*-ttl` | `* *` | `status.completionTime` | a reason |

## Next section
"""


def test_the_allow_list_is_the_table_under_its_heading_without_the_backticks() -> None:
    assert parse_allow_list(ALLOW_LIST, "### The allow-list") == [
        Allowance("training-operator", "*", "Event * ExitedWithCode: *", "count", "timing"),
        Allowance("*", "*-ttl", "* *", "status.completionTime", "a reason"),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("# Page\n", "no line"),
        ("### The allow-list\n\nno table\n", "no table"),
        ("### The allow-list\n| a | b |\n", "header"),
        (
            "### The allow-list\n| peer | case | object | field | why |\n|---|\n| x | y | | f | w |\n",
            "non-empty",
        ),
    ],
)
def test_a_missing_or_malformed_allow_list_is_an_error_saying_what(text: str, says: str) -> None:
    with pytest.raises(AllowListError, match=says):
        parse_allow_list(text, "### The allow-list")


def test_applying_the_allow_list_keeps_what_no_row_allows_and_counts_what_each_allowed() -> None:
    allow = AllowList(parse_allow_list(ALLOW_LIST, "### The allow-list"))
    counted = Difference("pytorch-succeeds", "Event PyTorchJob/j ExitedWithCode: m", "count", 3, 2)
    other_peer = Difference("pi", "Event MPIJob/pi ExitedWithCode: m", "count", 3, 2)
    completion = Difference("jax-ttl", "JAXJob jax-ttl", "status.completionTime", ABSENT, "<set>")
    assert allow.apply("training-operator", [counted, completion]) == []
    assert allow.apply("mpi-operator", [other_peer]) == [other_peer]
    assert [line.split()[0] for line in allow.report()] == ["1", "1"]


def test_events_a_peer_dropped_explain_what_it_lacks_and_counts_fewer() -> None:
    peer = {"Event J/j R: m": {"type": "Normal", "count": 1, "source": "c"}}
    ours = {
        "Event J/j R: m": {"type": "Normal", "count": 3, "source": "c"},
        "Event J/j Late: m": {"type": "Normal", "count": 1, "source": "c"},
    }
    marked = mark_spam_filtered(compare("c", peer, ours))
    assert sorted(d.field for d in marked.differences) == [
        "(the object) past the peer's first 25 events",
        "count past the peer's first 25 events",
    ]


def test_what_dropped_events_cannot_explain_is_not_marked() -> None:
    peer = {"Event J/j R: m": {"type": "Normal", "count": 2, "source": "c"}, "Pod p": {"x": 1}}
    ours = {"Event J/j R: m": {"type": "Warning", "count": 1, "source": "c"}, "Pod p": {"x": 2}}
    assert [d.field for d in mark_spam_filtered(compare("c", peer, ours)).differences] == [
        "count",
        "type",
        "x",
    ]


def test_comparisons_add_up() -> None:
    total = Comparison()
    total.add(compare("a", {"o": {"x": 1}}, {"o": {"x": 2}}))
    total.add(compare("b", {"o": {"x": 1}}, {"o": {"x": 1}}))
    assert (total.objects, total.fields, len(total.differences)) == (2, 2, 1)


def test_a_runtime_snapshot_compares_go_zero_structs_and_quantities_as_they_read_back() -> None:
    # Trainer writes its runtime from Go types; kubetrain writes it as the API server stored it.
    from_go = (
        "kind: ClusterTrainingRuntime\nmetadata: {name: tune}\nspec:\n  template:\n    metadata: {}\n"
        "    spec:\n      replicatedJobs:\n      - template:\n          spec:\n            template:\n"
        "              metadata: {}\n              spec:\n                containers:\n"
        "                - {name: node, resources: {limits: {nvidia.com/gpu: '2'}}}\n"
        "                - {name: other, resources: {}}\n"
        "      volumeClaimPolicies:\n      - templates:\n"
        "        - {metadata: {name: initializer}, status: {}}\n"
    )
    as_stored = (
        "kind: ClusterTrainingRuntime\nmetadata: {name: tune}\nspec:\n  template:\n"
        "    spec:\n      replicatedJobs:\n      - template:\n          spec:\n            template:\n"
        "              spec:\n                containers:\n"
        "                - {name: node, resources: {limits: {nvidia.com/gpu: 2}}}\n"
        "                - {name: other}\n"
        "      volumeClaimPolicies:\n      - templates:\n        - {metadata: {name: initializer}}\n"
    )
    one = Snapshot.of(None, [_snapshot_configmap(from_go)], [], []).objects
    other = Snapshot.of(None, [_snapshot_configmap(as_stored)], [], []).objects
    assert one == other


def test_a_runtime_snapshot_still_tells_an_empty_volume_source_from_none() -> None:
    with_source = "kind: X\nmetadata: {name: r}\nspec: {volumes: [{name: v, emptyDir: {}}]}\n"
    without = "kind: X\nmetadata: {name: r}\nspec: {volumes: [{name: v}]}\n"
    one = Snapshot.of(None, [_snapshot_configmap(with_source)], [], []).objects
    other = Snapshot.of(None, [_snapshot_configmap(without)], [], []).objects
    assert one != other
