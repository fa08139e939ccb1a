"""Progress reports (Kubeflow Trainer v2's trainerStatus) and their bounded history (api/progress.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api.common import JobStatus
from kubetrain.api.progress import (
    MAX_HISTORY_METRICS,
    MAX_METRICS,
    MAX_REPORT_BYTES,
    TRAINJOB_REPORT_LIMITS,
    Metric,
    ProgressHistory,
    ReportError,
    StatusRoute,
    StatusRoutes,
    StatusTarget,
    TrainerStatus,
    parse_report,
    parse_status_path,
)

RECEIVED = datetime(2026, 11, 26, 10, 0, 0, tzinfo=UTC)


def report(body: object) -> TrainerStatus:
    status = parse_report(json.dumps(body).encode(), RECEIVED).status
    assert status is not None
    return status


def refusal(body: object | bytes) -> str:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(ReportError) as raised:
        parse_report(raw, RECEIVED)
    return str(raised.value)


def test_a_trainer_v2_report_is_read_as_it_is_written() -> None:
    status = report(
        {
            "trainerStatus": {
                "progressPercentage": 45,
                "estimatedRemainingSeconds": 795649,
                "metrics": [{"name": "loss", "value": "0.2347"}, {"name": "eval_loss", "value": "0.2451"}],
                "lastUpdatedTime": "2025-01-23T10:30:45Z",
            }
        }
    )
    assert status == TrainerStatus(
        progress_percentage=45,
        estimated_remaining_seconds=795649,
        metrics=[Metric(name="loss", value="0.2347"), Metric(name="eval_loss", value="0.2451")],
        last_updated_time=RECEIVED,
    )


def test_the_time_of_a_report_is_when_it_was_received_not_what_the_reporter_says() -> None:
    status = report({"trainerStatus": {"lastUpdatedTime": "1999-01-01T00:00:00Z"}})
    assert status.last_updated_time == RECEIVED


def test_the_time_a_reporter_sends_may_be_any_rfc_3339_time_pythons_isoformat_included() -> None:
    for sent in ("2026-11-26T09:59:58Z", "2026-11-26T09:59:58.123456+00:00", "2026-11-26T10:59:58+01:00"):
        assert report({"trainerStatus": {"lastUpdatedTime": sent}}).last_updated_time == RECEIVED


def test_a_body_without_a_trainer_status_is_a_report_of_nothing() -> None:
    for body in (b"null", b"{}", b'{"trainerStatus": null}'):
        assert parse_report(body, RECEIVED).status is None


def test_unknown_fields_are_ignored_and_listed_where_they_were() -> None:
    body = {
        "step": 1,
        "trainerStatus": {
            "progressPercentage": 5,
            "epoch": 2,
            "metrics": [{"name": "a", "value": "1", "unit": "s"}],
        },
    }
    parsed = parse_report(json.dumps(body).encode(), RECEIVED)
    assert parsed.ignored == ("step", "trainerStatus.epoch", "trainerStatus.metrics[0].unit")
    assert parsed.status is not None and parsed.status.progress_percentage == 5


def test_field_names_match_in_any_case_the_later_key_winning_as_in_gos_decoder() -> None:
    status = report({"trainerstatus": {"progressPercentage": 5, "PROGRESSPERCENTAGE": 6}})
    assert status.progress_percentage == 6


def test_metrics_of_one_name_are_kept_as_sent_as_trainer_v2_3s_atomic_list_keeps_them() -> None:
    status = report(
        {"trainerStatus": {"metrics": [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]}}
    )
    assert status.metrics == [Metric(name="a", value="1"), Metric(name="a", value="2")]


def test_a_trainjob_takes_trainer_v2_3s_bounds() -> None:
    def metrics(count: int, name: str = "m", value: str = "1") -> bytes:
        listed = [{"name": f"{name}{i}", "value": value} for i in range(count)]
        return json.dumps({"trainerStatus": {"metrics": listed}}).encode()

    assert parse_report(metrics(256, value="v" * 64), RECEIVED, TRAINJOB_REPORT_LIMITS).status is not None
    for body, message in [
        (metrics(257), "trainerStatus.metrics: Too many: 257: must have at most 256 items"),
        (metrics(1, name="n" * 64), "trainerStatus.metrics[0].name: must be a string of 1 to 64 characters"),
        (
            metrics(1, value="v" * 65),
            "trainerStatus.metrics[0].value: must be a string of 1 to 64 characters",
        ),
    ]:
        with pytest.raises(ReportError) as raised:
            parse_report(body, RECEIVED, TRAINJOB_REPORT_LIMITS)
        assert str(raised.value) == message


def test_every_field_of_a_report_is_optional() -> None:
    assert report({"trainerStatus": {}}) == TrainerStatus(last_updated_time=RECEIVED)


def test_numbers_sent_bare_are_kept_as_the_strings_trainer_v2_stores() -> None:
    status = report(
        {"trainerStatus": {"metrics": [{"name": "loss", "value": 0.25}, {"name": "step", "value": 7}]}}
    )
    assert status.metrics == [Metric(name="loss", value="0.25"), Metric(name="step", value="7")]


def test_a_whole_float_percentage_is_accepted() -> None:
    assert report({"trainerStatus": {"progressPercentage": 50.0}}).progress_percentage == 50


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "the body is not JSON"),
        (b"", "the body is not JSON"),
        ([1, 2], 'the body must be a JSON object: {"trainerStatus": {...}}'),
        ({"trainerStatus": 5}, "trainerStatus: must be an object"),
        (
            {"trainerStatus": {"progressPercentage": 101}},
            "trainerStatus.progressPercentage: Invalid value: 101: must be between 0 and 100",
        ),
        (
            {"trainerStatus": {"progressPercentage": "45"}},
            'trainerStatus.progressPercentage: Invalid value: "45": must be a whole number',
        ),
        (
            {"trainerStatus": {"progressPercentage": True}},
            "trainerStatus.progressPercentage: Invalid value: true: must be a whole number",
        ),
        (
            {"trainerStatus": {"estimatedRemainingSeconds": -1}},
            "trainerStatus.estimatedRemainingSeconds: Invalid value: -1: must be between 0 and 2147483647",
        ),
        (
            {"trainerStatus": {"lastUpdatedTime": "yesterday"}},
            'trainerStatus.lastUpdatedTime: Invalid value: "yesterday": must be an RFC 3339 time',
        ),
        (
            {"trainerStatus": {"lastUpdatedTime": "2026-11-26T10:00:00"}},
            'trainerStatus.lastUpdatedTime: Invalid value: "2026-11-26T10:00:00": must be an RFC 3339 time',
        ),
        ({"trainerStatus": {"lastUpdatedTime": 5}}, "trainerStatus.lastUpdatedTime: Invalid value: 5"),
        ({"trainerStatus": {"metrics": {"loss": 1}}}, "trainerStatus.metrics: must be a list"),
        ({"trainerStatus": {"metrics": [None]}}, 'trainerStatus.metrics[0]: must be an object with "name"'),
        (
            {"trainerStatus": {"metrics": [{"name": "", "value": "1"}]}},
            "trainerStatus.metrics[0].name: must be a string of 1 to 128 characters",
        ),
        (
            {"trainerStatus": {"metrics": [{"name": "loss", "value": ""}]}},
            "trainerStatus.metrics[0].value: must be a string of 1 to 256 characters",
        ),
        (
            {"trainerStatus": {"metrics": [{"name": "loss", "value": None}]}},
            "trainerStatus.metrics[0].value: must be a string",
        ),
        (
            {"trainerStatus": {"metrics": [{"name": "loss"}]}},
            "trainerStatus.metrics[0].value: must be a string",
        ),
        (
            {"trainerStatus": {"metrics": [{"name": f"m{i}", "value": "1"} for i in range(MAX_METRICS + 1)]}},
            f"trainerStatus.metrics: Too many: {MAX_METRICS + 1}: must have at most {MAX_METRICS} items",
        ),
    ],
)
def test_a_malformed_report_is_refused_naming_the_field(body: object, message: str) -> None:
    assert refusal(body).startswith(message)


def test_a_body_over_the_cap_is_refused_before_it_is_parsed() -> None:
    assert refusal(b" " * (MAX_REPORT_BYTES + 1)).startswith(f"the body is {MAX_REPORT_BYTES + 1} bytes")


def test_a_route_serves_its_kinds_paths_alone() -> None:
    routes = StatusRoutes(
        [StatusRoute.of("kubeflow.org/v1", "pytorchjobs"), StatusRoute.of("kubeflow.org/v2beta1", "mpijobs")]
    )
    matched = routes.match("/apis/kubeflow.org/v2beta1/namespaces/team-a/mpijobs/pi/status")
    assert matched is not None
    route, target = matched
    assert (route.group, route.version, route.plural) == ("kubeflow.org", "v2beta1", "mpijobs")
    assert target == StatusTarget("kubeflow.org/v2beta1", "team-a", "mpijobs", "pi")
    assert routes.match("/apis/kubeflow.org/v1/namespaces/team-a/mpijobs/pi/status") is None
    assert routes.match("/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/pi/status") is None


def test_the_status_path_names_the_job() -> None:
    target = parse_status_path("/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status")
    assert target == StatusTarget("kubeflow.org/v1", "team-a", "pytorchjobs", "mnist")
    assert target.key == "team-a/mnist"
    assert target.path == "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status"


@pytest.mark.parametrize(
    "path",
    [
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist",
        "/apis/kubeflow.org/v1/namespaces/team-a/pytorchjobs/mnist/status/extra",
        "/apis/kubeflow.org/v1/namespaces/Team/pytorchjobs/mnist/status",
        "/healthz",
    ],
)
def test_other_paths_name_no_job(path: str) -> None:
    assert parse_status_path(path) is None


def test_the_trainer_status_round_trips_through_the_job_status() -> None:
    wire = {
        "trainerStatus": {
            "progressPercentage": 3,
            "metrics": [{"name": "loss", "value": "1.5"}],
            "lastUpdatedTime": "2026-11-26T10:00:00Z",
        }
    }
    status = JobStatus.model_validate(wire)
    assert status.trainer_status is not None and status.trainer_status.metric("loss") == "1.5"
    assert status.to_wire()["trainerStatus"] == wire["trainerStatus"]


# --- history ---------------------------------------------------------------------------------------


def reported(seconds: float, progress: int | None = None, **metrics: str) -> TrainerStatus:
    return TrainerStatus(
        progress_percentage=progress,
        metrics=[Metric(name=k, value=v) for k, v in metrics.items()],
        last_updated_time=RECEIVED + timedelta(seconds=seconds),
    )


def test_the_history_keeps_every_report_while_there_is_room() -> None:
    history = ProgressHistory(limit=8)
    for second in range(5):
        history.add(reported(second, second * 10, loss=str(1.0 / (second + 1))))
    assert [p.progress for p in history.points] == [0, 10, 20, 30, 40]
    assert history.points[-1].metrics == {"loss": 0.2}


def test_a_full_history_thins_to_cover_the_whole_life_and_ends_with_the_latest_report() -> None:
    history = ProgressHistory(limit=16)
    for second in range(1000):
        history.add(reported(second, loss=str(second)))
    assert len(history.points) <= 16
    assert history.points[0].at == RECEIVED.timestamp()
    assert history.points[-1].metrics == {"loss": 999.0}
    gaps = [b.at - a.at for a, b in zip(history.points, history.points[1:-1], strict=False)]
    assert max(gaps) <= 4 * min(gaps)


@given(st.lists(st.floats(min_value=0, max_value=1e6, allow_nan=False), min_size=1, max_size=300))
def test_a_history_never_exceeds_its_limit_and_always_ends_with_the_newest_report(times: list[float]) -> None:
    history = ProgressHistory(limit=10)
    for second in sorted(times):
        history.add(reported(second, loss="1"))
    assert len(history.points) <= 10
    assert history.points[-1].at == pytest.approx((RECEIVED + timedelta(seconds=max(times))).timestamp())
    assert [p.at for p in history.points] == sorted(p.at for p in history.points)


def test_a_report_older_than_the_newest_point_is_ignored() -> None:
    history = ProgressHistory()
    history.add(reported(10, 10))
    history.add(reported(5, 5))
    assert [p.progress for p in history.points] == [10]


def test_only_numeric_metrics_are_followed_and_at_most_sixteen_names() -> None:
    history = ProgressHistory()
    metrics = {"phase": "warmup", **{f"m{i}": str(i) for i in range(MAX_HISTORY_METRICS + 4)}}
    history.add(reported(0, None, **metrics))
    assert history.metric_names() == [f"m{i}" for i in range(MAX_HISTORY_METRICS)]


def test_histories_kept_by_two_writers_merge_in_time_order() -> None:
    first, second = ProgressHistory(), ProgressHistory()
    first.add(reported(0, 0))
    second.add(reported(5, 50))
    first.add(reported(10, 100))
    first.merge(second)
    assert [p.progress for p in first.points] == [0, 50, 100]


def test_a_history_round_trips_through_json_and_garbage_reads_as_empty() -> None:
    history = ProgressHistory()
    history.add(reported(0, 1, loss="2.5"))
    assert ProgressHistory.from_json(json.loads(json.dumps(history.to_json()))).points == history.points
    assert ProgressHistory.from_json({"points": "nope"}).points == []
    assert ProgressHistory.from_json(None).points == []
