"""``--pytorch-init-container-template-file``: rendering the three variables, refusing everything else
with the file and line, and upstream's default path (upstream-behaviour §2.1)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from builders import cli_runner, job
from kubetrain.cli.main import app
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.frameworks.base import InitSettings
from kubetrain.frameworks.registry import framework_for
from kubetrain.kube import init_template
from kubetrain.kube.init_template import InitTemplateError, load_template, parse_template
from kubetrain.kube.render import RenderSettings, render_pod

UPSTREAM_STYLE = """\
- name: wait-for-master
  image: {{ .InitContainerImage }}
  command: ['sh', '-c', 'for i in $(seq {{.MaxTries}}); do nslookup {{.MasterAddr}} && exit 0; done; exit 1']
"""


def render(text: str, image: str = "busybox:1") -> list[dict[str, Any]]:
    return parse_template(text, "t.yaml")(master_addr="j-master-0", image=image, max_tries=7)


def test_the_three_variables_are_filled_in_with_or_without_spaces_inside_the_braces() -> None:
    [container] = render(UPSTREAM_STYLE)
    assert container["image"] == "busybox:1"
    assert container["command"][2] == "for i in $(seq 7); do nslookup j-master-0 && exit 0; done; exit 1"


def test_a_variable_may_appear_several_times_and_the_result_is_a_list_of_every_container() -> None:
    text = "- {name: a, image: '{{.InitContainerImage}}'}\n- {name: b, image: '{{.InitContainerImage}}'}\n"
    assert [(c["name"], c["image"]) for c in render(text, image="x:1")] == [("a", "x:1"), ("b", "x:1")]


def test_each_render_returns_fresh_containers_so_one_pod_cannot_change_anothers() -> None:
    template = parse_template(UPSTREAM_STYLE, "t.yaml")
    first = template(master_addr="a", image="i", max_tries=1)
    first[0]["name"] = "changed"
    assert template(master_addr="a", image="i", max_tries=1)[0]["name"] == "wait-for-master"


def test_an_unknown_variable_is_refused_naming_the_file_the_line_and_the_supported_variables() -> None:
    text = "- name: w\n  image: {{.Image}}\n"
    with pytest.raises(InitTemplateError) as raised:
        parse_template(text, "/etc/config/initContainer.yaml")
    message = str(raised.value)
    assert "/etc/config/initContainer.yaml, line 2" in message and "{{.Image}}" in message
    assert all(name in message for name in ("MasterAddr", "InitContainerImage", "MaxTries"))


@pytest.mark.parametrize(
    "action", ["{{if .MasterAddr}}", "{{ .MasterAddr | quote }}", "{{- .MasterAddr -}}", "{{.masteraddr}}"]
)
def test_go_template_features_beyond_the_plain_variables_are_refused(action: str) -> None:
    with pytest.raises(InitTemplateError, match="line 1: unsupported template action"):
        parse_template(f"- {{name: w, image: '{action}'}}\n", "t.yaml")


def test_an_action_left_open_is_refused_with_its_line() -> None:
    with pytest.raises(InitTemplateError, match=re.escape("t.yaml, line 3: '{{' is not closed")):
        parse_template("- name: w\n  image: i\n  args: ['{{.MaxTries']\n", "t.yaml")


def test_a_template_that_does_not_render_to_a_list_is_refused_at_parse_time() -> None:
    with pytest.raises(InitTemplateError, match="must be a YAML list of containers"):
        parse_template("name: w\nimage: '{{.InitContainerImage}}'\n", "t.yaml")


def test_a_container_without_an_image_is_refused() -> None:
    with pytest.raises(InitTemplateError, match="container 0 needs a non-empty string 'image'"):
        parse_template("- name: w\n", "t.yaml")


def test_yaml_that_does_not_parse_is_refused_with_its_line() -> None:
    with pytest.raises(
        InitTemplateError, match=re.escape("t.yaml, line 2: the rendered template is not YAML")
    ):
        parse_template("- name: w\n  image: [unclosed\n", "t.yaml")


def test_a_missing_file_at_the_default_path_means_the_built_in_container(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(init_template, "DEFAULT_TEMPLATE_PATH", tmp_path / "initContainer.yaml")
    assert load_template(None) is None


def test_a_file_at_the_default_path_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    default = tmp_path / "initContainer.yaml"
    default.write_text(UPSTREAM_STYLE)
    monkeypatch.setattr(init_template, "DEFAULT_TEMPLATE_PATH", default)
    template = load_template(None)
    assert template is not None and template.source == str(default)


def test_a_named_file_that_does_not_exist_is_refused_naming_its_path(tmp_path: Path) -> None:
    with pytest.raises(InitTemplateError, match=f"cannot read {tmp_path / 'nope.yaml'}"):
        load_template(tmp_path / "nope.yaml")


def test_the_operator_refuses_to_start_with_a_named_template_file_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    result = cli_runner().invoke(app, ["operator", "--pytorch-init-container-template-file", str(missing)])
    assert result.exit_code == 2
    assert "--pytorch-init-container-template-file" in result.output and "nope.yaml" in result.output


def test_the_operator_refuses_to_start_with_an_unsupported_template(tmp_path: Path) -> None:
    bad = tmp_path / "init.yaml"
    bad.write_text("- name: w\n  image: {{.Image}}\n")
    result = cli_runner().invoke(app, ["operator", "--pytorch-init-container-template-file", str(bad)])
    assert result.exit_code == 2
    assert "line 2" in result.output and "MasterAddr" in result.output


def test_pytorch_workers_get_the_rendered_containers_after_the_users_init_containers() -> None:
    pytorch = admit(job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j"))
    user_init = {"name": "user-init", "image": "u:1"}
    worker = pytorch.replica_specs["Worker"]
    worker.template.setdefault("spec", {})["initContainers"] = [user_init]
    addressing = ClusterAddressing()
    template = parse_template(UPSTREAM_STYLE, "t.yaml")
    init = InitSettings(
        pytorch_init_image="busybox:1", pytorch_init_max_tries=7, pytorch_init_template=template
    )
    plan = plan_replica(pytorch, "Worker", 0, addressing)
    pod = render_pod(pytorch, plan, framework_for(pytorch), addressing, RenderSettings(init=init)).manifest
    assert [(c["name"], c["image"]) for c in pod["spec"]["initContainers"]] == [
        ("user-init", "u:1"),
        ("wait-for-master", "busybox:1"),
    ]
    assert "nslookup j-master-0" in pod["spec"]["initContainers"][1]["command"][2]


def test_the_pytorch_master_gets_no_templated_container() -> None:
    pytorch = admit(job("PyTorchJob", {"Master": 1, "Worker": 1}, name="j"))
    addressing = ClusterAddressing()
    init = InitSettings(pytorch_init_template=parse_template(UPSTREAM_STYLE, "t.yaml"))
    plan = plan_replica(pytorch, "Master", 0, addressing)
    pod = render_pod(pytorch, plan, framework_for(pytorch), addressing, RenderSettings(init=init)).manifest
    assert "initContainers" not in pod["spec"]
