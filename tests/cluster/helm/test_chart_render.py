"""charts/kubetrain through helm: it lints, renders the operator's flags from values, chooses the MPIJob
CRD, refuses contradictory values with a message naming the value, and grants the kustomize base's RBAC."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from helm_chart import CHART, ROOT, Helm, build_helm, find, kustomize_standalone, operator_args

from kubetrain.frameworks.registry import framework_for_kind

pytestmark = pytest.mark.cluster

NON_DEFAULT = (
    '--set-json=operator.enabledSchemes=["pytorchjob","mpijob"]',
    "--set=operator.namespace=team-a",
    "--set=operator.gangSchedulerName=volcano",
    "--set=operator.controllerThreads=4",
    "--set=operator.kubeApiQPS=25",
    "--set=operator.kubeApiBurst=80",
    "--set=operator.resyncPeriod=60",
    "--set=operator.maxReplicasPerType=64",
    "--set=operator.maxReplicasPerJob=128",
    "--set=operator.gcYoungThreshold=0",
    "--set=operator.logLevel=debug",
    "--set=operator.leaderElection.id=kt-lease",
    "--set=operator.healthProbePort=9091",
    "--set=operator.pytorchInitContainerImage=busybox:1.36",
    "--set=operator.pytorchInitContainerMaxTries=7",
    "--set=operator.mpiKubectlDeliveryImage=example.org/delivery:1",
    '--set-json=operator.extraArgs=["--log-level=warning"]',
    "--set=metrics.port=9090",
    "--set=metrics.serviceMonitor.enabled=true",
    "--set=operator.replicas=3",
    "--set=image.repository=registry.example.org/kubetrain",
    "--set=image.tag=9.9.9",
    "--set=resources.limits.memory=1Gi",
    "--set=mpiJobAPI=v1",
    "--set=statusServer.port=9443",
    "--set=statusServer.url=https://status.example.org:9443",
    "--set=statusServer.secretName=kt-status-tls",
)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def default(helm: Helm) -> list[dict[str, Any]]:
    return helm.template()


@pytest.fixture(scope="module")
def non_default(helm: Helm) -> list[dict[str, Any]]:
    return helm.template(*NON_DEFAULT)


def test_helm_lint_passes_strictly_with_default_values(helm: Helm) -> None:
    done = helm.run("lint", "--strict", str(CHART))
    assert done.returncode == 0, done.stdout + done.stderr


def test_helm_lint_passes_strictly_with_non_default_values(helm: Helm) -> None:
    done = helm.run("lint", "--strict", str(CHART), *NON_DEFAULT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_default_values_give_the_operators_default_flags(default: list[dict[str, Any]]) -> None:
    assert [a for a in operator_args(default) if not a.startswith("--enable-scheme=")] == [
        "--controller-threads=32",
        "--kube-api-qps=200",
        "--kube-api-burst=400",
        "--resync-period=300",
        "--install-builtin-runtimes",
        "--max-replicas-per-type=5000",
        "--max-replicas-per-job=10000",
        "--gc-young-threshold=10000",
        "--log-level=info",
        "--metrics-bind-address=:8080",
        "--health-probe-bind-address=:8081",
        "--leader-elect",
        "--leader-election-namespace=kubeflow",
        "--pytorch-init-container-image=alpine:3.10",
        "--pytorch-init-container-max-tries=100",
        "--mpi-kubectl-delivery-image=kubeflow/kubectl-delivery:latest",
        "--status-server-bind-address=:8443",
        "--status-server-service=kubetrain-status",
        "--status-server-secret=kubetrain-status-tls",
    ]


@pytest.mark.parametrize("mpi_api", ["v2beta1", "v1"])
def test_by_default_the_operator_reconciles_the_kinds_of_the_crds_the_chart_installs(
    helm: Helm, mpi_api: str
) -> None:
    rendered = helm.template(f"--set=mpiJobAPI={mpi_api}")
    served = [
        framework_for_kind(
            f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"]
        ).scheme_name
        for crd in rendered
        if crd["kind"] == "CustomResourceDefinition" and crd["spec"]["group"] == "kubeflow.org"
        for version in crd["spec"]["versions"]
        if version["served"]
    ]
    schemes = [
        a.removeprefix("--enable-scheme=") for a in operator_args(rendered) if a.startswith("--enable")
    ]
    assert sorted(schemes) == sorted([*served, "trainjob"]), "Trainer's three CRDs serve one kind, TrainJob"


def test_without_the_charts_crds_the_operator_keeps_its_own_default_kinds(helm: Helm) -> None:
    args = operator_args(helm.template("--set=crds.install=false"))
    assert not [a for a in args if a.startswith("--enable-scheme")]


def test_non_default_values_become_the_operators_flags(non_default: list[dict[str, Any]]) -> None:
    assert operator_args(non_default) == [
        "--enable-scheme=pytorchjob",
        "--enable-scheme=mpijob",
        "--namespace=team-a",
        "--gang-scheduler-name=volcano",
        "--controller-threads=4",
        "--kube-api-qps=25",
        "--kube-api-burst=80",
        "--resync-period=60",
        "--install-builtin-runtimes",
        "--max-replicas-per-type=64",
        "--max-replicas-per-job=128",
        "--gc-young-threshold=0",
        "--log-level=debug",
        "--metrics-bind-address=:9090",
        "--health-probe-bind-address=:9091",
        "--leader-elect",
        "--leader-election-id=kt-lease",
        "--leader-election-namespace=kubeflow",
        "--pytorch-init-container-image=busybox:1.36",
        "--pytorch-init-container-max-tries=7",
        "--mpi-kubectl-delivery-image=example.org/delivery:1",
        "--status-server-bind-address=:9443",
        "--status-server-service=kubetrain-status",
        "--status-server-secret=kt-status-tls",
        "--status-server-url=https://status.example.org:9443",
        "--log-level=warning",
    ]


def test_non_default_values_set_image_replicas_and_resources(non_default: list[dict[str, Any]]) -> None:
    deployment = find(non_default, "Deployment")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert (deployment["spec"]["replicas"], container["image"], container["resources"]["limits"]) == (
        3,
        "registry.example.org/kubetrain:9.9.9",
        {"memory": "1Gi"},
    )


def test_the_probes_call_the_health_port(non_default: list[dict[str, Any]]) -> None:
    [container] = find(non_default, "Deployment")["spec"]["template"]["spec"]["containers"]
    health = next(p for p in container["ports"] if p["name"] == "health")
    assert health["containerPort"] == 9091
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}


def test_the_default_mpijob_crd_is_v2beta1_among_the_seven_kinds_and_trainers_three(
    default: list[dict[str, Any]],
) -> None:
    crds = [d for d in default if d["kind"] == "CustomResourceDefinition"]
    assert sorted(c["spec"]["names"]["kind"] for c in crds) == [
        "ClusterTrainingRuntime", "JAXJob", "MPIJob", "MXJob", "PaddleJob", "PyTorchJob", "TFJob",
        "TrainJob", "TrainingRuntime", "XGBoostJob",
    ]  # fmt: skip
    mpijob = find(default, "CustomResourceDefinition", "mpijobs.kubeflow.org")
    assert [v["name"] for v in mpijob["spec"]["versions"]] == ["v2beta1"]


def test_mpijob_api_v1_installs_the_v1_mpijob_crd_instead(non_default: list[dict[str, Any]]) -> None:
    mpijob = find(non_default, "CustomResourceDefinition", "mpijobs.kubeflow.org")
    assert [v["name"] for v in mpijob["spec"]["versions"]] == ["v1"]


def test_the_crds_are_kept_when_the_release_is_uninstalled(default: list[dict[str, Any]]) -> None:
    crd = find(default, "CustomResourceDefinition", "pytorchjobs.kubeflow.org")
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_crds_install_false_renders_no_crd(helm: Helm) -> None:
    rendered = helm.template("--set=crds.install=false")
    assert not [d for d in rendered if d["kind"] == "CustomResourceDefinition"]


def test_an_unknown_mpijob_api_is_refused_naming_the_value(helm: Helm) -> None:
    error = helm.template_error("--set=mpiJobAPI=v3")
    assert "at '/mpiJobAPI': value must be one of 'v2beta1', 'v1'" in error


def test_a_misspelled_value_is_refused_naming_its_path(helm: Helm) -> None:
    error = helm.template_error("--set=operator.gangScheduler=volcano")
    assert "at '/operator': additional properties 'gangScheduler' not allowed" in error


def test_an_out_of_range_value_is_refused_naming_its_path(helm: Helm) -> None:
    error = helm.template_error("--set=operator.controllerThreads=0")
    assert "at '/operator/controllerThreads': minimum: got 0, want 1" in error


def test_an_unknown_scheme_is_refused_naming_its_path(helm: Helm) -> None:
    error = helm.template_error('--set-json=operator.enabledSchemes=["sparkjob"]')
    assert "at '/operator/enabledSchemes/0'" in error


def test_by_default_two_replicas_spread_over_nodes_under_a_disruption_budget(
    default: list[dict[str, Any]],
) -> None:
    deployment = find(default, "Deployment")
    budget = find(default, "PodDisruptionBudget")
    spec = deployment["spec"]["template"]["spec"]
    [spread] = spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]

    assert deployment["spec"]["replicas"] == 2
    assert "--leader-elect" in operator_args(default)
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert spread["podAffinityTerm"]["labelSelector"] == deployment["spec"]["selector"]
    assert budget["spec"] == {"maxUnavailable": 1, "selector": deployment["spec"]["selector"]}


def test_by_default_a_replica_on_a_lost_node_is_evicted_after_10_seconds(
    default: list[dict[str, Any]],
) -> None:
    tolerations = find(default, "Deployment")["spec"]["template"]["spec"]["tolerations"]

    assert {(t["key"], t["effect"], t["tolerationSeconds"]) for t in tolerations} == {
        ("node.kubernetes.io/unreachable", "NoExecute", 10),
        ("node.kubernetes.io/not-ready", "NoExecute", 10),
    }


def test_the_operator_knows_its_own_pod_to_find_its_deployment(default: list[dict[str, Any]]) -> None:
    [container] = find(default, "Deployment")["spec"]["template"]["spec"]["containers"]
    downward = [e for e in container["env"] if "valueFrom" in e]
    fields = {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in downward}

    assert fields == {"MY_POD_NAMESPACE": "metadata.namespace", "MY_POD_NAME": "metadata.name"}


def test_one_replica_renders_no_disruption_budget(helm: Helm) -> None:
    rendered = helm.template("--set=operator.replicas=1")

    assert find(rendered, "Deployment")["spec"]["replicas"] == 1
    assert [d for d in rendered if d["kind"] == "PodDisruptionBudget"] == []


def test_a_set_affinity_replaces_the_default_spread(helm: Helm) -> None:
    zone = {"topologyKey": "topology.kubernetes.io/zone", "labelSelector": {"matchLabels": {"a": "b"}}}
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [zone]}}
    rendered = helm.template(f"--set-json=affinity={json.dumps(affinity)}")

    assert find(rendered, "Deployment")["spec"]["template"]["spec"]["affinity"] == affinity


def test_several_replicas_without_leader_election_are_refused(helm: Helm) -> None:
    error = helm.template_error("--set=operator.leaderElection.enabled=false")
    assert "operator.replicas: more than one operator replica needs operator.leaderElection" in error


def test_without_leader_election_no_lease_flag_is_passed(helm: Helm) -> None:
    args = operator_args(
        helm.template("--set=operator.replicas=1", "--set=operator.leaderElection.enabled=false")
    )
    assert not [a for a in args if a.startswith("--leader-elect")]


def test_disabled_metrics_turn_off_the_endpoint_and_its_service(helm: Helm) -> None:
    rendered = helm.template("--set=metrics.enabled=false")
    assert "--metrics-bind-address=0" in operator_args(rendered)
    assert [d["metadata"]["name"] for d in rendered if d["kind"] == "Service"] == ["kubetrain-status"]


def test_a_service_monitor_without_metrics_is_refused(helm: Helm) -> None:
    error = helm.template_error("--set=metrics.enabled=false", "--set=metrics.serviceMonitor.enabled=true")
    assert "metrics.serviceMonitor.enabled: the ServiceMonitor scrapes the metrics Service" in error


def test_the_service_monitor_selects_the_metrics_service_by_its_labels(
    non_default: list[dict[str, Any]],
) -> None:
    monitor = find(non_default, "ServiceMonitor")
    service = find(non_default, "Service", "kubetrain")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]


@pytest.mark.parametrize("name", ["kubetrain", "kubetrain-status"])
def test_the_services_select_the_operator_pods(default: list[dict[str, Any]], name: str) -> None:
    service = find(default, "Service", name)
    pod_labels = find(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_the_status_service_is_headless_on_the_endpoints_port(non_default: list[dict[str, Any]]) -> None:
    service = find(non_default, "Service", "kubetrain-status")
    assert service["spec"]["clusterIP"] == "None", "its name resolves to every ready replica"
    assert service["spec"]["ports"] == [{"name": "status", "port": 9443, "targetPort": "status"}]
    [container] = find(non_default, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert {"name": "status", "containerPort": 9443} in container["ports"]


def test_a_disabled_status_server_turns_the_endpoint_off_and_renders_no_service_for_it(helm: Helm) -> None:
    rendered = helm.template("--set=statusServer.enabled=false")
    args = operator_args(rendered)
    assert "--status-server-bind-address=0" in args
    assert not [a for a in args if a.startswith(("--status-server-url", "--status-server-secret"))]
    assert [d["metadata"]["name"] for d in rendered if d["kind"] == "Service"] == ["kubetrain"]


def test_a_status_url_that_is_not_https_is_refused_naming_its_path(helm: Helm) -> None:
    error = helm.template_error("--set=statusServer.url=http://status.example.org")
    assert "at '/statusServer/url'" in error and "does not match pattern" in error


def test_an_existing_service_account_must_be_named(helm: Helm) -> None:
    error = helm.template_error("--set=serviceAccount.create=false")
    assert "serviceAccount.name: name the existing ServiceAccount the operator runs as" in error


def without_labels(document: dict[str, Any]) -> dict[str, Any]:
    metadata = {k: v for k, v in document["metadata"].items() if k != "labels"}
    return {**document, "metadata": metadata}


RBAC_KINDS = ["ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"]


@pytest.mark.parametrize("kind", RBAC_KINDS)
def test_the_rendered_rbac_equals_the_kustomize_bases(helm: Helm, kind: str) -> None:
    # The standalone overlay is the base in namespace kubeflow; with its names too, everything but the
    # chart's labels can be compared.
    rendered = helm.template("--set=fullnameOverride=training-operator")
    assert without_labels(find(rendered, kind)) == without_labels(find(kustomize_standalone(), kind))


def test_the_binding_grants_the_release_namespaces_service_account(helm: Helm) -> None:
    rendered = helm.template(namespace="ml-ops")
    binding = find(rendered, "ClusterRoleBinding")
    account = find(rendered, "ServiceAccount")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": "ml-ops"}
    ]
    assert binding["roleRef"]["name"] == find(rendered, "ClusterRole")["metadata"]["name"]


@pytest.mark.parametrize(
    ("mpi_api", "directories"), [("v2beta1", ["crds"]), ("v1", ["crds", "crds-mpijob-v1"])]
)
def test_the_rendered_crds_are_the_generated_ones_plus_the_charts_metadata(
    helm: Helm, mpi_api: str, directories: list[str]
) -> None:
    # fromYaml/toYaml in the template must not change a schema (e.g. turn an integer into a float).
    generated: dict[str, Any] = {}
    for directory in directories:
        for path in sorted((ROOT / "manifests" / directory).glob("*.yaml")):
            crd = yaml.safe_load(path.read_text())
            generated[crd["metadata"]["name"]] = crd
    rendered = {
        d["metadata"]["name"]: without_labels(d)
        for d in helm.template(f"--set=mpiJobAPI={mpi_api}")
        if d["kind"] == "CustomResourceDefinition"
    }
    for crd in rendered.values():
        crd["metadata"] = {k: v for k, v in crd["metadata"].items() if k != "annotations"}
    assert rendered == generated


def test_helm_package_makes_an_archive_with_the_crd_files_and_the_schema(helm: Helm, tmp_path: Path) -> None:
    done = helm.run("package", str(CHART), "--destination", str(tmp_path))
    assert done.returncode == 0, done.stderr
    version = yaml.safe_load((CHART / "Chart.yaml").read_text())["version"]
    with tarfile.open(tmp_path / f"kubetrain-{version}.tgz") as archive:
        names = set(archive.getnames())
    expected = {
        "kubetrain/values.schema.json",
        "kubetrain/files/crds/kubeflow.org_pytorchjobs.yaml",
        "kubetrain/files/crds-mpijob-v1/kubeflow.org_mpijobs.yaml",
    }
    assert expected <= names


def test_the_cluster_domain_reaches_the_operator_as_upstreams_environment_variable(helm: Helm) -> None:
    [container] = find(helm.template("--set=operator.clusterDomain=cluster.local"), "Deployment")["spec"][
        "template"
    ]["spec"]["containers"]
    assert {"name": "CUSTOM_CLUSTER_DOMAIN", "value": "cluster.local"} in container["env"]


def test_without_a_cluster_domain_the_variable_is_not_set(default: list[dict[str, Any]]) -> None:
    [container] = find(default, "Deployment")["spec"]["template"]["spec"]["containers"]
    assert "CUSTOM_CLUSTER_DOMAIN" not in [variable["name"] for variable in container["env"]]
