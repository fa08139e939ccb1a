"""torchtune on the torch policy (a TrainJob whose command is ``tune run``): the recipe and config chosen from
the model, node and process counts and LoRA/QLoRA arguments, as Trainer's ``torchtune.go`` chooses them."""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.trainer.constants import ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE
from kubetrain.frameworks.trainer.info import RuntimeInfo, gpus_per_node, node_resources
from kubetrain.frameworks.trainer.plugin import Addressing, master_host, master_port

SUPPORTED_MODELS = frozenset({"llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B"})
MULTI_NODE_MODEL = "llama3_3/70B"
IMMUTABLE_CONFIGS = frozenset(
    {"output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file"}
)
RDZV_ENDPOINT = "--rdzv_endpoint"
CONFIG = "--config"


def model_of(runtime_name: str) -> str:
    """``torchtune-llama3.2-1b`` → ``llama3_2/1B``; empty when the name has another shape."""
    fields = runtime_name.split("-")
    if len(fields) != 3:
        return ""
    return f"{fields[1].replace('.', '_')}/{fields[2].upper()}"


def _lora(args: list[str]) -> bool:
    return any("model.lora_attn_modules" in arg for arg in args)


def _enabled(args: list[str], item: str) -> bool:
    for arg in args:
        name, found, value = arg.partition("=")
        if found and item in name and value.strip().lower() == "true":
            return True
    return False


def _qlora(args: list[str]) -> bool:
    return not _enabled(args, "model.use_dora") and _enabled(args, "model.quantize_base")


def recipe_and_config(nodes: int, procs: str | int, gpus: int, trainjob: TrainJob) -> tuple[str, str]:
    args = list((trainjob.spec.trainer.args if trainjob.spec.trainer else None) or [])
    recipe, suffix = "full_finetune_distributed", "_full"
    if nodes == 1 and (procs == 1 or gpus == 1):
        if _qlora(args):
            recipe, suffix = "lora_finetune_single_device", "_qlora_single_device"
        elif _lora(args):
            recipe, suffix = "lora_finetune_single_device", "_lora_single_device"
        else:
            recipe, suffix = "full_finetune_single_device", "_full_single_device"
    elif nodes == 1 and _qlora(args):
        recipe, suffix = "lora_finetune_distributed", "_qlora"
    elif nodes == 1 and _lora(args):
        recipe, suffix = "lora_finetune_distributed", "_lora"
    elif nodes > 1:
        suffix = "_full_multinode"
    return recipe, f"{model_of(trainjob.spec.runtime_ref.name)}{suffix}"


def command(
    info: RuntimeInfo, trainjob: TrainJob, nodes: int, procs: str | int, gpus: int, addressing: Addressing
) -> list[str]:
    """What follows ``tune run`` in the trainer's command."""
    extra: list[str] = []
    if nodes > 1 or (isinstance(procs, int) and procs > 1) or (isinstance(procs, str) and gpus > 1):
        host, port = master_host(addressing, trainjob.name), master_port(addressing, trainjob.name)
        extra.append(f"{RDZV_ENDPOINT}={host}:{port}")
    recipe, config = recipe_and_config(nodes, procs, gpus, trainjob)
    return [*extra, recipe, CONFIG, config, *_runtime_overrides(info)]


def _runtime_overrides(info: RuntimeInfo) -> list[str]:
    overrides: list[str] = []
    for job in info.replicated_jobs():
        template = job.get("template") or {}
        if ((template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL) != ANCESTOR_TRAINER:
            continue
        pod_spec = ((template.get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod_spec.get("containers") or []:
            if container.get("name") == NODE:
                overrides += [
                    c for c in container.get("command") or [] if c.split("=")[0] in IMMUTABLE_CONFIGS
                ]
    return overrides


def validate(info: RuntimeInfo, trainjob: TrainJob) -> list[FieldError]:
    trainer = trainjob.spec.trainer
    if trainer is None:
        return []
    errors: list[FieldError] = []
    model = model_of(trainjob.spec.runtime_ref.name)
    if model not in SUPPORTED_MODELS:
        errors.append(
            FieldError(
                "spec.runtimeRef.name",
                f"must have a supported pretrained model, invalid model configured: {model}",
            )
        )
    nodes = trainer.num_nodes or 1
    if nodes > 1 and model != MULTI_NODE_MODEL:
        errors.append(FieldError("spec.trainer.numNodes", f"must be 1 for {model} model"))
    procs: str | int = trainer.num_proc_per_node if trainer.num_proc_per_node is not None else "auto"
    _, config = recipe_and_config(nodes, procs, gpus_per_node(node_resources(info)), trainjob)
    if "_qlora" in config:
        if model == "qwen2_5/1.5B":
            errors.append(FieldError("spec.runtimeRef.name", f"QLoRA is not supported for {model} model"))
        if "_qlora_single_device" not in config and model in ("llama3_2/1B", "llama3_2/3B"):
            errors += [
                FieldError(
                    "spec.trainer.numProcPerNode", f"must be auto or 1 for {model} model when using QLoRA"
                ),
                FieldError(
                    "spec.trainer.resourcesPerNode",
                    f"must have gpu resource with value 1 for {model} model when using QLoRA",
                ),
            ]
    args = list(trainer.args or [])
    if nodes > 1 and (_lora(args) or _qlora(args)):
        errors.append(
            FieldError(
                "spec.trainer.numNodes",
                "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            )
        )
    for index, arg in enumerate(args):
        key = arg.split("=", 1)[0]
        if key in IMMUTABLE_CONFIGS:
            errors.append(
                FieldError(
                    f"spec.trainer.args[{index}]",
                    f"must not set immutable config {key!r} in trainer args; it is managed by the runtime",
                )
            )
    return errors
