# kubetrain: `make run` runs the example training job locally; `make test` runs every check.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-core
EXAMPLES_STAMP := $(VENV)/.installed-examples
RUN_STAMP := $(VENV)/.installed-run
PYTEST := $(BIN)/pytest
# Only root can run a real node (containerd, network namespaces, cgroups): elsewhere the e2e tier skips, saying
# why, and nothing is built for it.
AS_ROOT := $(filter 0,$(shell id -u))
# Tools' own state from what the tiers run goes into the checkout (.state/tools), not into $HOME or /tmp, where it
# outlived the run: kubectl's discovery cache (~/.kube/cache), keras' settings file (~/.keras), torchrun's log
# directories (/tmp/torchelastic_*: `--log-dir`, which it reads from PET_LOG_DIR) and torch inductor's cache
# (/tmp/torchinductor_<user>). The browser tier gives Chromium a home of its own there (tests/browser_support.py).
TOOLS_STATE := $(CURDIR)/.state/tools
export KUBECACHEDIR := $(TOOLS_STATE)/kube-cache
export KERAS_HOME := $(TOOLS_STATE)/keras
export PET_LOG_DIR := $(TOOLS_STATE)/torchelastic
export TORCHINDUCTOR_CACHE_DIR := $(TOOLS_STATE)/torchinductor

.PHONY: help install run test lint test-unit test-local test-cluster envtest-build helm-build manifests docs clean \
	image images image-tools test-images node-packages test-e2e test-e2e-own-nodes test-e2e-shared-node \
	scheduler-plugins-build
.PHONY: podman docker test-containers host-packages mpi-packages node-build node-image-cache e2e-images \
	framework-images lane-go lane-cluster-operator lane-cluster-clients lane-browser lane-images \
	lane-framework-images lane-checks lane-peers-v1 lane-peers-others \
	browser-packages test-browser test-cluster-operator test-cluster-clients test-peers test-peers-v1 \
	test-peers-others peers-build test-faults jobset-build kueue-build jobset-manifests test-cluster-kueue

help:
	@echo "make run   - train the example PyTorch DDP job locally (1 master + 2 workers)"
	@echo "make test  - install everything into .venv and run linters and every test tier"

# pip installs with --no-compile: byte-compiling every module of torch, tensorflow and jax at install time took
# longer than the install itself (37 of 78 s for torch), while Python compiles the modules a program imports as
# it first imports them (torch: 725 of them, 3.5 s once).
PIP_INSTALL := $(BIN)/pip install --quiet --no-compile

$(VENV)/.created:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	touch $@

$(STAMP): pyproject.toml $(VENV)/.created
	$(PIP_INSTALL) -e '.[dev]'
	touch $@

install: $(STAMP)

# mypy checks the examples against the real torch/jax/xgboost types, so lint needs them installed.
lint: $(EXAMPLES_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python tools/lint/timed_assertions.py tests

test-unit: $(STAMP)
	$(PYTEST) tests/unit -q

# Cold, most of a run is building: Go binaries (CPU), images (network and disk) and the venv's frameworks. So
# `test` runs nine lanes at once from the start: the Go builds (lane-go), the images the e2e tier does not
# start with (lane-framework-images), and seven lanes of tiers, each tier in the lane where what it needs is
# ready soonest. Each step installs the Debian packages it needs when missing
# ($(APT): one install at a time). A tier waits for a Go binary still being built: each build takes a lock, and
# the waiter then finds it current (or builds it itself, when the Go lane has not come to it yet). A failed lane
# fails `test` after the others finish. docs/development.md has the lanes' measured timelines, cold and warm,
# and the disk a cold run fills (a CI machine ran out once): the free space is printed before and after.
# Passed or failed, the lanes are followed by tools/ci/host_state.py, which lists anything they left on the
# machine outside the checkout and its caches (paths, processes, network, mounts) since its snapshot; first it
# puts back what the lanes share, which none can alone: sysctls (ip_forward: podman's and the node's) and
# /run/containerd (every containerd shim's, docker's and the node's) when left empty. What it
# lists fails `test`, as a failed test does.
HOST_STATE := .state/host-state.json
test: $(STAMP)
	@$(call free_disk,before the lanes)
	@$(BIN)/python tools/ci/host_state.py snapshot $(HOST_STATE)
	$(MAKE) --no-print-directory -j9 --output-sync=target lane-go lane-cluster-operator lane-cluster-clients \
		lane-browser lane-images lane-framework-images lane-checks lane-peers-v1 lane-peers-others; \
		status=$$?; $(call free_disk,after the lanes); \
		$(BIN)/python tools/ci/host_state.py restore-shared $(HOST_STATE); \
		$(BIN)/python tools/ci/host_state.py compare $(HOST_STATE) || status=1; exit $$status

# $(call free_disk,WHEN): one line under 80 columns: the free space for the caches ($HOME) and the images
# (/var/lib), and what a cold run fills.
avail = $$(df -h --output=avail $(1) | tail -1 | tr -d ' ')
free_disk = echo "disk free $(1): caches $(call avail,$(HOME)), images $(call avail,/var/lib) (cold run: ~45G)"

# The Go-built binaries, the longest tier's first: envtest (every tier with a control plane), the kubelet and
# CoreDNS (the e2e tier's first step, its own nodes), the gang scheduler (its second step), JobSet (every
# envtest tier), then helm, the peers and Kueue, which the lanes needing them build beside it when the Go lane
# has not come to them yet. Cold, the e2e tier waited until 30 minutes for the gang scheduler when it came
# last, and until 31 minutes when the images lane built the node after its images (2026-12-02). A new Go-built
# tool is one more line here, and its build target a prerequisite of the tiers that run it.
GO_BUILDS := envtest-build
GO_BUILDS += $(if $(AS_ROOT),node-build)
GO_BUILDS += $(if $(AS_ROOT),scheduler-plugins-build)
GO_BUILDS += jobset-build
GO_BUILDS += helm-build
GO_BUILDS += peers-build
GO_BUILDS += kueue-build

# $(call serially,TARGETS): the targets one after another, each its own make, so that a lane never runs two of
# its steps at once. They leave the -j make's jobserver alone (MAKEFLAGS without it): a lane's make sharing
# it held the images lane back until the checks lane ended, in a cold run.
serially = $(foreach target,$(1),MAKEFLAGS='$(filter-out -j% --jobserver-auth=%,$(MAKEFLAGS))' \
	$(MAKE) --no-print-directory $(target) &&) true

# $(APT) PACKAGES: apt-get install under a lock, so that lanes installing at the same time take turns (apt's own
# lock fails the second install instead of waiting). --close: the command does not inherit the lock's file, or a
# daemon it starts (make docker's dockerd) would hold the lock for as long as it runs, and every later install
# would wait for ever (a CI run hung so).
APT_LOCK := flock --close /var/lock/kubetrain-apt.lock
APT := $(APT_LOCK) $(SHELL) -c 'apt-get update -qq && apt-get install -y -qq "$$@"' apt-get

# Every Debian package any tier needs, for a machine set up ahead of a run; the lanes install theirs as they go.
host-packages: image-tools podman mpi-packages node-packages browser-packages docker

lane-go: $(STAMP)
	$(call serially,$(GO_BUILDS))

# The cluster tier in two halves, and the conformance tier in two: each was the longest lane warm when whole
# (25 and 18 minutes at load 15 to 20).
# The fault suite (a control plane of its own per scenario) follows the operator half: warm, the checks lane was
# the longest with it; cold, that half starts once envtest and JobSet are built, long before the e2e and
# conformance tiers. Its Kueue tests come last, when Kueue is built.
lane-cluster-operator: $(STAMP)
	$(call serially,test-cluster-operator test-faults test-cluster-kueue)

lane-cluster-clients: $(STAMP)
	$(call serially,test-cluster-clients)

# The browser tier (Chromium, the CPU-heaviest of the cluster tier's clients) on an envtest of its own: with it,
# the clients' half was the longest lane warm (25 minutes at a load of 12 to 15). Then the containers tier: in
# the images lane, before the e2e tier, it kept the e2e tier 4 minutes from its start (warm, that lane is the
# longest); it builds the four images it runs itself, waiting on the images lane's lock for one being built.
lane-browser: $(STAMP)
	$(call serially,test-browser test-containers)

# The images the e2e tier runs from its first test on, their copies in the node's image cache, then the e2e
# tier on the real node. Cold, all the images took a quarter of an hour (network and disk more than CPU), and
# the tier waited for every one: the other frameworks' images are built and cached in a lane of their own,
# beside the tier, whose test_frameworks.py (run last) loads each into the node.
lane-images: $(STAMP)
	$(call serially,e2e-images test-e2e-own-nodes test-e2e-shared-node)

lane-framework-images: $(STAMP)
	$(call serially,framework-images)

# The images tier needs envtest, built by the time the checks before it are done.
lane-checks: $(STAMP)
	$(call serially,lint test-unit test-local test-images)

lane-peers-v1: $(STAMP)
	$(call serially,test-peers-v1)

lane-peers-others: $(STAMP)
	$(call serially,test-peers-others)

# envtest: a real control plane (etcd, kube-apiserver, scheduler, controller-manager) built from the
# Kubernetes Go modules pinned in tools/envtest, cached in ~/.cache/kubetrain/envtest/<version>/.
envtest-build: $(STAMP)
	$(BIN)/kubetrain envtest build

# $(call on_envtest,DIR,PYTEST ARGUMENTS): pytest on an envtest of its own in DIR, started first and stopped by
# the trap whether the tests pass or fail.
on_envtest = trap '$(BIN)/kubetrain envtest stop --dir $(1)' EXIT; \
	$(BIN)/kubetrain envtest start --dir $(1) >/dev/null && \
	KUBETRAIN_ENVTEST_DIR=$(1) $(PYTEST) $(2) -q --durations=10

# The cluster tier against a fresh envtest; the browser tier (the Jobs view in Chromium, on local runs and on
# this envtest) runs in the same session, reusing it.
ENVTEST_TEST_DIR := .state/envtest-make
test-cluster: envtest-build helm-build jobset-build kueue-build image browser-packages
	$(call on_envtest,$(ENVTEST_TEST_DIR),tests/cluster tests/browser)

# The same in two halves of about equal time, for two lanes of `make test`, each on an envtest of its own: what
# the operator and envtest do (every directory of tests/cluster not named below, so a new one lands here), and
# what users and their tools see (the chart, the docs' commands, RBAC, the SDK and CLI; the browser tier has a lane
# of its own).
CLUSTER_CLIENTS := tests/cluster/helm tests/cluster/docs tests/cluster/rbac tests/cluster/sdk
test-cluster-operator: envtest-build jobset-build image
	$(call on_envtest,$(ENVTEST_TEST_DIR)-operator,tests/cluster \
		$(patsubst %,--ignore=%,$(filter tests/cluster/%,$(CLUSTER_CLIENTS)) $(CLUSTER_KUEUE)))

# The operator half's tests that run Kueue, on an envtest of their own after the rest: Kueue is the last and
# longest Go build (18 minutes cold at a load of 16), and the whole half waited for it until 40 minutes.
CLUSTER_KUEUE := tests/cluster/test_kueue.py tests/cluster/operator/test_trainjobs_with_kueue.py
test-cluster-kueue: envtest-build jobset-build kueue-build image
	$(call on_envtest,$(ENVTEST_TEST_DIR)-kueue,$(CLUSTER_KUEUE))

test-cluster-clients: envtest-build helm-build jobset-build image
	$(call on_envtest,$(ENVTEST_TEST_DIR)-clients,$(CLUSTER_CLIENTS))

# The conformance tier (tests/peers): every example and each kind's status scenarios under the peers
# (training-operator v1.9.0, mpi-operator v0.6.0) and under kubetrain, on an envtest of its own, compared
# field by field; it prints the allow-list of docs/migration.md as applied and what it compared.
ENVTEST_PEERS_DIR := .state/envtest-peers
test-peers: envtest-build peers-build jobset-build $(STAMP)
	$(call on_envtest,$(ENVTEST_PEERS_DIR),tests/peers)

# The tier in two halves of about equal time, for two lanes of `make test`, each on an envtest of its own: the
# training-operator's v1 kinds (87 cases, the tier's longest module); every other module (the MPIJobs under the
# mpi-operator and the training-operator, the status endpoint's pass, Kubeflow Trainer's TrainJobs), so that a
# new module lands there.
PEERS_V1 := tests/peers/test_training_operator.py
test-peers-v1: envtest-build peers-build jobset-build $(STAMP)
	$(call on_envtest,$(ENVTEST_PEERS_DIR)-v1,$(PEERS_V1))

test-peers-others: envtest-build peers-build jobset-build $(STAMP)
	$(call on_envtest,$(ENVTEST_PEERS_DIR)-others,tests/peers --ignore=$(PEERS_V1))

# The browser tier alone, on an envtest of its own.
ENVTEST_BROWSER_DIR := .state/envtest-browser
test-browser: envtest-build jobset-build browser-packages $(STAMP)
	$(call on_envtest,$(ENVTEST_BROWSER_DIR),tests/browser)

# Debian's Chromium for the browser tier, installed when missing (Playwright's own browser download cannot
# reach its host here; the tests launch /usr/bin/chromium).
browser-packages:
	command -v chromium >/dev/null || $(APT) chromium

# The real envtest node's runtime from Debian (containerd, runc, the CNI plugins), installed when missing and
# only as root: a machine that cannot run the node gets the e2e tier skipped with the reason instead.
node-packages: image-tools
	[ "$$(id -u)" != 0 ] || { command -v containerd >/dev/null && command -v runc >/dev/null \
		&& test -x /usr/lib/cni/bridge; } || $(APT) containerd runc containernetworking-plugins

# Real pods on a real node (tests/e2e): the kubelet, CoreDNS, the gang scheduler (scheduler-plugins, pinned in
# tools/scheduler-plugins), the JobSet controller (TrainJobs) and the images the pods run are built first, and
# the images put into the node's image cache (~/.cache/kubetrain/node-images: imported once per recipe, cloned
# by each node start) (minutes when cold; cached), where the machine can run them; the tier starts envtest
# --real-node --jobset in a temporary directory and stops it. --durations=0: each case's time in the log.
test-e2e: envtest-build jobset-build node-packages $(if $(AS_ROOT),node-build e2e-images scheduler-plugins-build)
	$(PYTEST) tests/e2e -q -rfEs --durations=0

# The tier in two steps, as `make test` runs it: first the modules that start nodes of their own (neither the
# gang scheduler nor JobSet: cold, they run while those are still being built), then the rest on the session's
# node.
E2E_OWN_NODES := tests/e2e/test_node_lifecycle.py tests/e2e/test_two_nodes.py
test-e2e-own-nodes: envtest-build node-packages $(if $(AS_ROOT),node-build e2e-images)
	$(PYTEST) $(E2E_OWN_NODES) -q -rfEs --durations=0

test-e2e-shared-node: envtest-build jobset-build node-packages \
		$(if $(AS_ROOT),node-build e2e-images scheduler-plugins-build)
	$(PYTEST) tests/e2e $(patsubst %,--ignore=%,$(E2E_OWN_NODES)) -q -rfEs --durations=0

# The kubelet and CoreDNS, built and cached like envtest.
node-build: envtest-build
	$(BIN)/kubetrain envtest build --real-node >/dev/null

node-image-cache: $(STAMP) node-packages
	$(BIN)/python -m kubetrain.envtest.imagecache $(IMAGES)

# What the e2e tier's node must start with: built, then in the node's image cache (where a node can run).
E2E_IMAGES := python pause busybox operator pytorch
e2e-images: $(STAMP) node-packages
	$(PYTHON) tools/images/build.py $(E2E_IMAGES)
	$(if $(AS_ROOT),$(BIN)/python -m kubetrain.envtest.imagecache $(E2E_IMAGES))

# Every other image, each into the cache on its own: the cache's lock is held for one import at a time, so
# a node starting meanwhile waits for one image, not all of them.
FRAMEWORK_IMAGES = $(filter-out $(E2E_IMAGES),$(IMAGES))
framework-images: $(STAMP) node-packages
	$(PYTHON) tools/images/build.py $(FRAMEWORK_IMAGES)
	$(if $(AS_ROOT),for image in $(FRAMEWORK_IMAGES); do $(BIN)/python -m kubetrain.envtest.imagecache $$image || exit 1; done)

# The examples' frameworks (torch, xgboost, mpi4py, jax, tensorflow) and Open MPI for the MPIJob example.
$(EXAMPLES_STAMP): $(STAMP) pyproject.toml | mpi-packages
	$(PIP_INSTALL) -e '.[dev,examples]'
	touch $@

# What `make run` needs and no more: kubetrain, torch and numpy (no dev tools, no other framework, no Open MPI).
$(RUN_STAMP): pyproject.toml $(VENV)/.created
	$(PIP_INSTALL) -e '.[pytorch]'
	touch $@

# Open MPI, which mpi4py builds against and the MPIJob example runs.
mpi-packages:
	command -v mpirun >/dev/null || $(APT) openmpi-bin libopenmpi-dev

# Trains the PyTorch DDP example (1 master + 2 workers over gloo) to Succeeded, printing its losses.
run: $(RUN_STAMP)
	$(BIN)/kubetrain run examples/pytorch-ddp/job.yaml

# Real processes: every example trains for real, plus restart, failure and Ctrl-C semantics.
# TensorFlow's autograph compiles the functions it converts from files in the temporary directory, leaving their
# bytecode in /tmp/__pycache__: the tier's bytecode goes to the checkout instead.
test-local: $(EXAMPLES_STAMP)
	PYTHONPYCACHEPREFIX=$(TOOLS_STATE)/pycache $(PYTEST) tests/local -q --durations=15

# Faults under load (tests/faults) at CI size, 40 jobs: every scenario starts and restarts a control plane of
# its own, so it needs the envtest binaries (built by the Go lane: the build's lock makes this wait for
# it). Full size, 500 jobs: `.venv/bin/python bench/faults_under_load.py --jobs 500 --markdown`.
test-faults: envtest-build
	$(PYTEST) tests/faults -q -rs

# Podman for `kubetrain run --runtime podman` (tools/containers/setup.sh): netavark with aardvark-dns for the job
# network's DNS, installed when missing, and runc plus lower ulimits on hosts with hybrid cgroups (this one).
podman: image-tools
	[ "$$(id -u)" != 0 ] || $(APT_LOCK) sh tools/containers/setup.sh

# Replicas in containers (tests/containers): the images the tests run are built first (each skipped when its
# recipe is unchanged), and copied into docker's storage where docker runs (installed and started as `make
# docker` does); where an engine cannot run them, its tests are skipped with the reason. Afterwards, passed or
# failed, tools/containers/leftovers.py stops the dockerd the tier started (none that ran before it) and
# removes the firewall chains, bridges and aardvark-dns the engines left since its record.
CONTAINER_TEST_IMAGES = localhost/kubetrain/python:3.11-bookworm localhost/kubetrain/pytorch:2.13.0 \
	localhost/kubetrain/xgboost:3.2.0 localhost/kubetrain/mpi:openmpi-mpi4py4.1.2
CONTAINERS_STATE := .state/containers
test-containers: $(STAMP) podman
	[ "$$(id -u)" != 0 ] || $(PYTHON) tools/images/build.py python pytorch xgboost mpi
	$(PYTHON) tools/containers/leftovers.py record $(CONTAINERS_STATE)
	trap '$(PYTHON) tools/containers/leftovers.py clean $(CONTAINERS_STATE)' EXIT; trap 'exit 130' INT TERM HUP; \
	{ [ "$$(id -u)" != 0 ] || $(APT_LOCK) sh tools/containers/docker-setup.sh $(CONTAINERS_STATE)/dockerd.pid; } \
	&& { ! docker info >/dev/null 2>&1 || sh tools/containers/docker-load.sh $(CONTAINER_TEST_IMAGES); } \
	&& $(PYTEST) tests/containers -q -rs

# Docker for `kubetrain run --runtime docker` (tools/containers/docker-setup.sh): Debian's docker.io and a
# daemon with "iptables": false, so it leaves the host's FORWARD policy and chains (a real node's bridge,
# podman's networks) alone. The containers tier installs and starts it as root and stops it after the tier;
# elsewhere the tier's docker half is skipped, saying so. A daemon this target starts keeps running.
docker:
	[ "$$(id -u)" != 0 ] || $(APT_LOCK) sh tools/containers/docker-setup.sh

# helm, built from the module proxy like envtest (tools/helm pins it), cached in ~/.cache/kubetrain/helm/<version>/.
helm-build: $(STAMP)
	$(BIN)/python tools/helm/build.py

# The peers: upstream's training operator (tools/training-operator pins v1.9.0), the mpi-operator
# (tools/mpi-operator pins v0.6.0) and Kubeflow Trainer (tools/trainer pins v2.3.0), built from the Go module
# proxy like envtest and cached in
# ~/.cache/kubetrain/<name>/<version>/; the conformance tier (test-peers) and bench/operator_side_by_side.py
# run kubetrain beside them.
peers-build: $(STAMP)
	$(BIN)/python -m kubetrain.envtest.peers build >/dev/null

# JobSet's controller (tools/jobset pins v0.12.0, what Kubeflow Trainer v2.3.0 builds on), cached in
# ~/.cache/kubetrain/jobset/<version>/: `kubetrain envtest start --jobset` and the jobset_controller fixture run it.
jobset-build: $(STAMP)
	$(BIN)/python -m kubetrain.envtest.jobset >/dev/null

# Kueue's controller manager (tools/kueue pins v0.17.0), cached in ~/.cache/kubetrain/kueue/<version>/, for the
# cluster tier's queueing tests (kubetrain.envtest.kueue runs it with its TrainJob integration).
kueue-build: $(STAMP)
	$(BIN)/python -m kubetrain.envtest.kueue >/dev/null

# The JobSet release kubetrain installs with itself, from the module tools/jobset pins: the Helm chart's
# dependency (charts/kubetrain/charts/jobset) and the kustomize install's manifests/jobset/manifests.yaml; tests
# fail when they are stale (the chart's in the unit tier, the manifests in the cluster tier, which has kubectl).
jobset-manifests: envtest-build
	$(BIN)/python -m kubetrain.envtest.jobset_release

# The e2e tier's gang scheduler: scheduler-plugins' kube-scheduler and its PodGroup controller (tools/scheduler-plugins
# pins v0.34.7, Kubernetes held at envtest's v1.34.4), cached in ~/.cache/kubetrain/scheduler-plugins{,-controller}/;
# test-e2e builds them too. Cold (empty Go build cache) 8 min 17 s at nice 15 on 2 cores; the second binary 8 s.
scheduler-plugins-build: $(STAMP)
	$(BIN)/python -m kubetrain.envtest.coscheduler

# The checked-in CRDs (manifests/ and the Helm chart's copies) and the field reference in docs/api.md;
# unit tests fail when they are stale.
manifests: $(STAMP)
	rm -f manifests/crds/*.yaml manifests/crds-mpijob-v1/*.yaml
	$(BIN)/kubetrain manifests crds --output-dir manifests/crds
	$(BIN)/kubetrain manifests crds --mpi-api v1 --kind MPIJob --output-dir manifests/crds-mpijob-v1
	rm -f charts/kubetrain/files/crds/*.yaml charts/kubetrain/files/crds-mpijob-v1/*.yaml
	$(BIN)/kubetrain manifests crds --output-dir charts/kubetrain/files/crds
	$(BIN)/kubetrain manifests crds --mpi-api v1 --kind MPIJob --output-dir charts/kubetrain/files/crds-mpijob-v1
	$(BIN)/kubetrain manifests api-reference --update docs/api.md
	rm -f manifests/runtimes/*.yaml
	cp src/kubetrain/frameworks/trainer/runtimes/*.yaml manifests/runtimes/

# The job commands' reference in docs/cli.md, from their --help, and the `kubetrain plan` outputs shown in
# docs/frameworks/; unit tests fail when either is stale.
docs: $(STAMP)
	$(BIN)/python -m kubetrain.cli.reference > docs/cli.md
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/python tests/docs_blocks.py docs/frameworks/*.md docs/progress.md docs/migration.md

# Container images, built here without a registry (tools/images/build.py, docs/development.md#images):
# podman and buildah build them, mmdebstrap makes the Debian base, runc runs the build steps (crun cannot
# create containers under this machine's hybrid cgroup layout).
image-tools:
	command -v podman >/dev/null && command -v buildah >/dev/null && command -v mmdebstrap >/dev/null \
		&& command -v runc >/dev/null || $(APT) podman buildah mmdebstrap runc

# The operator image from ./Containerfile, localhost/kubetrain/operator:<kubetrain version>.
image: image-tools
	$(PYTHON) tools/images/build.py operator

# Every image: the Python base, pause, the operator and the examples' training images (each skipped when
# its recipe is unchanged; the first build downloads several GB from PyPI into ~/.cache/pip).
IMAGES ?= python pause busybox operator pytorch tensorflow xgboost jax paddle mpi
images: image-tools
	$(PYTHON) tools/images/build.py $(IMAGES)

# The operator image as the chart runs it (non-root, read-only root filesystem, against an envtest); the
# tests build it.
test-images: image-tools envtest-build
	$(PYTEST) tests/images -q

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
