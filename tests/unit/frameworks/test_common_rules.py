"""The generic defaulting and validation helpers every framework composes (api.defaults, api.validation)."""

from __future__ import annotations

from kubetrain.api.common import CleanPodPolicy, ReplicaSpec, RestartPolicy, RunPolicy
from kubetrain.api.defaults import (
    default_replica_spec,
    normalise_replica_keys,
    with_default_clean_pod_policy,
    with_default_port,
)
from kubetrain.api.validation import (
    containers_errors,
    derived_name_errors,
    dns1035_label_reasons,
    job_name_errors,
    not_supported,
)

DNS1035_REGEX_REASON = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)


def spec_with(*containers: dict[str, object]) -> ReplicaSpec:
    return ReplicaSpec(template={"spec": {"containers": list(containers)}})


def test_replica_keys_match_canonical_types_case_insensitively() -> None:
    specs = {"worker": ReplicaSpec(), "PS": ReplicaSpec(), "Other": ReplicaSpec()}
    assert list(normalise_replica_keys(specs, ("Worker", "PS"))) == ["Worker", "PS", "Other"]


def test_unset_replicas_and_restart_policy_take_the_given_defaults() -> None:
    spec = default_replica_spec(ReplicaSpec(), replicas=1, restart_policy=RestartPolicy.NEVER)
    assert (spec.replicas, spec.restart_policy) == (1, RestartPolicy.NEVER)


def test_given_replicas_and_restart_policy_are_kept() -> None:
    given = ReplicaSpec(replicas=0, restart_policy=RestartPolicy.ALWAYS)
    assert default_replica_spec(given, replicas=1, restart_policy=RestartPolicy.NEVER) == given


def test_the_default_port_is_appended_after_the_containers_own_ports() -> None:
    spec = with_default_port(spec_with({"name": "x", "ports": [{"containerPort": 80}]}), "x", "p", 1)
    assert spec.template["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80},
        {"name": "p", "containerPort": 1},
    ]


def test_a_template_without_containers_gets_no_port() -> None:
    assert with_default_port(ReplicaSpec(), "x", "p", 1) == ReplicaSpec()


def test_unset_clean_pod_policy_takes_the_default_and_a_set_one_stays() -> None:
    assert (
        with_default_clean_pod_policy(RunPolicy(), CleanPodPolicy.NONE).clean_pod_policy
        == CleanPodPolicy.NONE
    )
    kept = RunPolicy(clean_pod_policy=CleanPodPolicy.ALL)
    assert with_default_clean_pod_policy(kept, CleanPodPolicy.NONE) == kept


def test_dns_1035_reasons_are_apimachinerys_words() -> None:
    assert dns1035_label_reasons("Mnist") == [DNS1035_REGEX_REASON]
    assert dns1035_label_reasons("a" * 64) == ["must be no more than 63 characters"]
    assert dns1035_label_reasons("mnist-1") == []


def test_an_invalid_job_name_joins_the_reasons_as_the_webhooks_do() -> None:
    name = "-" + "a" * 63
    [error] = job_name_errors(name)
    reasons = f"must be no more than 63 characters,{DNS1035_REGEX_REASON}"
    assert error.message == f'Invalid value: "{name}": should match: {reasons}'


def test_a_missing_job_name_is_required() -> None:
    assert [str(e) for e in job_name_errors("")] == [
        "metadata.name: Required value: a job needs a name (a DNS-1035 label such as 'mnist')"
    ]


def test_derived_names_within_63_characters_pass() -> None:
    assert derived_name_errors("job", ["job-worker-0", "x" * 63]) == []


def test_derived_names_are_not_checked_for_an_invalid_job_name() -> None:
    assert derived_name_errors("Job", ["Job-worker-" + "0" * 60]) == []


def test_unsupported_values_list_the_supported_ones_quoted() -> None:
    assert (
        str(not_supported("spec.x", "Foo", ["A", "B"]))
        == 'spec.x: Unsupported value: "Foo": supported values: "A", "B"'
    )


def test_containers_are_checked_for_an_image_each_and_the_default_name() -> None:
    errors = containers_errors("spec.r.Worker", spec_with({"name": "a"}, {"name": "b", "image": "i"}), "main")
    assert [str(e) for e in errors] == [
        "spec.r.Worker.template.spec.containers[0].image: Required value: must be specified",
        "spec.r.Worker.template.spec.containers: "
        "Required value: must have at least one container with name main",
    ]
