#!/usr/bin/env bash
# The local runner on a real GPU (a device check, never part of `make test`: CI has no GPU).
#
# On a machine with one NVIDIA GPU, from the repository root, with kubetrain's dependencies importable
# (`pip install -e .`, or wheels unpacked onto PYTHONPATH as the device tool does):
#   1. examples/pytorch-ddp/job-gpu.yaml with its Worker removed: the master asks for the one GPU, gets it as
#      CUDA_VISIBLE_DEVICES, trains over NCCL on it and reports progress, which `kubetrain get --local` shows;
#   2. the manifest as it is (two replicas, a GPU each) on that one-GPU machine: refused before anything starts,
#      naming both requests, instead of a rank waiting for a GPU forever.
set -euo pipefail
state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
kubetrain() { python3 -c 'import sys; from kubetrain.cli.main import app; sys.argv[0] = "kubetrain"; app()' "$@"; }

nvidia-smi -L
python3 - "$state/one-gpu.yaml" <<'PY'
import sys
import yaml

job = yaml.safe_load(open("examples/pytorch-ddp/job-gpu.yaml"))
del job["spec"]["pytorchReplicaSpecs"]["Worker"]
yaml.safe_dump(job, open(sys.argv[1], "w"))
PY
echo "--- 1. the master on the one GPU"
kubetrain run "$state/one-gpu.yaml" --state-dir "$state/runs"
kubetrain get --local --state-dir "$state/runs"
grep -h "training on" "$state"/runs/pytorch-ddp-gpu/logs/master-0.log
echo "--- 2. two GPUs asked for on a one-GPU machine"
if kubetrain run examples/pytorch-ddp/job-gpu.yaml --state-dir "$state/runs" 2>"$state/refusal"; then
    echo "FAILED: a job asking for 2 GPUs ran on a machine with 1" >&2
    exit 1
fi
cat "$state/refusal"
grep -q "asks for 2 GPU(s)" "$state/refusal"
echo "gpu check passed"
