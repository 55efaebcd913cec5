# Kolotoc: build, run and test the program against the local test bed.
#
#   make up        tools + local cluster (with its real node) + pulumi up of the dev stack, outputs
#   make preview   pulumi preview --diff            (STACK=<name> selects another stack)
#   make fit       will stack STACK fit? mirrored on the local cluster, the scheduler's verdict, cleaned up
#   make down      pulumi destroy, then the cluster down
#   make test      unit tests, then the end-to-end suite on a local cluster (what CI runs)
#
# Everything the test bed writes lives under .kolotoc/ (git-ignored) or the per-user tool cache
# (~/.cache/kolotoc/tools). The scripts doing the work are in testbed/, one directory a role;
# testbed/README.md maps each target to them, and each says more at its top.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
# The targets share the tool cache and the cluster: never run two of them at once.
.NOTPARALLEL:

STACK ?= dev
export STACK

# Go files of this checkout, tracked or new, minus what .gitignore excludes.
GO_FILES = $(shell git ls-files --cached --others --exclude-standard -- '*.go')
# The environment of the e2e suite: PATH with .kolotoc/bin first, PULUMI_* for the local file
# backend, KOLOTOC_KUBECONFIG (testbed/stack/stack.sh env prints it).
STACK_ENV = eval "$$(testbed/stack/stack.sh env)"

.PHONY: help preflight tools stack-tools cluster cluster-down up down preview fit outputs bench-scale bench-loop bench-queue bench-autoscale unit e2e e2e-beside-unit test fmt lint workflows

help:
	@echo "make up | preview | outputs | down       the dev stack (STACK=name for another) on the local cluster"
	@echo "make fit STACK=name                        will that stack fit? its pools and workloads mirrored on the local cluster (pools at zero grown by Karpenter), a report with each autoscaled pool's growth, exit 0 only if every pod is placed"
	@echo "make bench-scale [SIZES=128,1024,4096]     pulumi up of N ranks side by side with kubectl apply --server-side (cluster up)"
	@echo "make bench-loop [RUNS=5]                   preview and up of a deployed stack with nothing to change, timed"
	@echo "make bench-queue [RUNS=5]                  fresh ups of dev without and with the queue (Kueue), timed"
	@echo "make bench-autoscale [SIZES_AUTOSCALE=2,16,128] a queued ring on a GPU pool at zero (Karpenter) beside one whose nodes exist, timed"
	@echo "make cluster | cluster-down                the local cluster alone (testbed/cluster/cluster.sh)"
	@echo "make unit | e2e | test                     unit tests (and actionlint), end-to-end tests, both (what CI runs)"
	@echo "make workflows                             actionlint on .github/workflows"
	@echo "make fmt | lint                            gofmt; gofmt check, go vet, go mod tidy in every module, staticcheck (+ shellcheck if installed)"
	@echo "make preflight                             what the test bed needs of this machine (root, disk, …), checked in seconds (make up, cluster, test and e2e run it first)"
	@echo "make tools                                 build the pinned CLI, control plane, node and kwok (once per machine)"

# What the test bed needs of the machine (root, cgroups, disk, Debian's packages, network
# namespaces, overlayfs, no Docker containerd to displace), in seconds, before any build.
preflight:
	@testbed/preflight.sh $(firstword $(MAKECMDGOALS) up)

tools:
	@echo "==> tools: building what is missing (cold: about 21 min on 2 cores, once per machine; docs/measured.md)"
	testbed/tools/tools.sh

# The cluster's tools: control plane, kwok, the simulated node pools' controller, Kueue, Karpenter
# (the autoscaler of simulated pools at zero), and the real node's kubelet, kube-proxy and CoreDNS.
CLUSTER_TOOLS = etcd kube kwok coredns nsbridge simpool kueue karpenter

cluster: preflight
	@echo "==> cluster: the local cluster (control plane, kwok, the real node) in its own network namespace"
	testbed/tools/tools.sh $(CLUSTER_TOOLS)
	testbed/cluster/cluster.sh up

cluster-down:
	@echo "==> cluster-down"
	testbed/cluster/cluster.sh down

# What a stack's commands run: the CLI, its Go language host and the real Kubernetes provider
# plugin (built from its module, testbed/tools/kubernetes). The test-only tools (flowcheck,
# actionlint) are make test's, and the cluster's are make cluster's: not checked again on every up
# and preview.
STACK_TOOLS = pulumi langhost kubernetes

stack-tools:
	testbed/tools/tools.sh $(STACK_TOOLS)

# The real node's images: only those the stack runs (its file names them) for make up's cluster;
# make test's builds them all (testbed/images/images.sh needs, testbed/node/node.sh).
up: export KOLOTOC_NODE_IMAGES = $(shell testbed/images/images.sh needs Pulumi.$(STACK).yaml 2>/dev/null)
up: preflight stack-tools cluster
	@echo "==> up: pulumi up of stack $(STACK)"
	testbed/stack/stack.sh up

# The provider previews by server-side dry-run, so a simulated stack needs the cluster running.
preview: stack-tools cluster
	@echo "==> preview: pulumi preview --diff of stack $(STACK)"
	testbed/stack/stack.sh preview

# Will the stack fit, before a GPU is paid for? Its pools are mirrored node for node on the local
# cluster and its workloads deployed there as a throw-away stack fit-<name>, which is destroyed
# after the report (cmd/fit). The stack's file and state are never touched; the cluster must be
# up already (make cluster): fit neither starts nor stops it. STACK is Pulumi.<name>.yaml, or
# examples/<name>/Pulumi.<name>.yaml, or a stack file's path.
fit:
	@echo "==> fit: will stack $(STACK) fit? (a throw-away mirror on the local cluster)"
	testbed/tools/tools.sh $(STACK_TOOLS)
	go build -o .kolotoc/bin/kolotoc-fit ./cmd/fit
	$(STACK_ENV); .kolotoc/bin/kolotoc-fit $(STACK)

outputs:
	testbed/stack/stack.sh outputs

# How the deploy scales: N ranks through pulumi up, side by side with kubectl apply --server-side
# of the same objects (bench/scale says what each figure is). The cluster must be up (make cluster).
# QUEUE=1 queues the ring through the cluster's Kueue (kolotoc:queue): up is measured to the towers ready.
SIZES ?= 128,1024,4096
SIZES_AUTOSCALE ?= 2,16,128
QUEUE ?=
bench-scale:
	@echo "==> bench-scale: N=$(SIZES) ranks, pulumi up vs the kubectl floor, on the local cluster"
	testbed/tools/tools.sh $(STACK_TOOLS) kube
	$(STACK_ENV); go run ./bench/scale -sizes $(SIZES) $(if $(QUEUE),-queue)

# The program's own loop on a deployed stack with nothing to change: testbed/stack/stack.sh preview
# and up, and make preview, RUNS times each, with their medians (bench/loop.sh).
RUNS ?= 5
bench-loop: stack-tools cluster
	@echo "==> bench-loop: preview and up of stack $(STACK) with nothing to change, $(RUNS) runs"
	STACK=$(STACK) RUNS=$(RUNS) bench/loop.sh

# What queueing through Kueue adds to a fresh up of dev: RUNS fresh ups without and with
# kolotoc:queue, timed to up, towers Ready and the launcher's run done (bench/queue.sh).
bench-queue: stack-tools cluster
	@echo "==> bench-queue: fresh ups of dev without and with the queue, $(RUNS) runs"
	RUNS=$(RUNS) bench/queue.sh

# What a pool at zero costs a run: a queued ring of N towers on a pool at zero (the local cluster's
# Karpenter grows it) beside one on N nodes already there, timed to the towers Ready; and the GPU
# node-minutes after the release (bench/autoscale.sh).
bench-autoscale: stack-tools cluster
	@echo "==> bench-autoscale: N=$(SIZES_AUTOSCALE) GPU nodes, pool at zero vs nodes there"
	SIZES=$(SIZES_AUTOSCALE) bench/autoscale.sh

down:
	@echo "==> down: pulumi destroy of stack $(STACK), then the cluster"
	testbed/stack/stack.sh down

# Test-bed modules of their own, with tests: flowcheck keeps cyclonus's dependencies apart, and
# kueuechart Helm's (it renders Kueue's chart as the provider does and checks what the program
# registers from it).
TESTBED_MODULES = testbed/checks/flowcheck testbed/checks/kueuechart

unit: workflows lint
	@echo "==> unit: go test"
	@# The test bed's Debian packages (once per machine): testbed/stack's tests run stack.sh with jq.
	testbed/node/node.sh packages
	go test ./...
	for m in $(TESTBED_MODULES); do go -C $$m test ./...; done

# The GitHub Actions workflows (previews and tests on pull requests, deploy on the default branch);
# testbed/checks/workflows_test.go checks their pins and where their credentials live.
workflows:
	@echo "==> workflows: actionlint .github/workflows"
	testbed/tools/tools.sh actionlint
	"$$(testbed/tools/tools.sh --path)/actionlint" -no-color

# The end-to-end suite runs on a local cluster of its own, e2e (network namespace kolotoc-e2e, its
# own real node), never on the one `make up` deploys to: a dev stack left running there holds
# most of the real node's two CPUs, and the suite's pods would stay Pending. The user's cluster
# and stacks are not touched. (tests/e2e refuses to run on the default cluster.)
# E2E_CLUSTER_NAME names it otherwise (two checkouts testing at once on one machine).
# E2E_NETWORK: the real node's network (testbed/node/node.sh, KOLOTOC_NETWORK). cilium, the
# default: every NetworkPolicy the workloads meet is enforced, as on GKE Dataplane V2 and AKS, the
# suite refuses to start unless a canary policy is (tests/e2e/enforcer_test.go), and the forbidden
# paths are tried for real. bridge: nothing is enforced (the flows are judged only, the tests of
# enforcement skip); it spares Cilium's build (about 10 CPU-minutes, once per machine).
E2E_CLUSTER_NAME ?= e2e
# How many of the suite's tests run at once. go test's default is GOMAXPROCS, 2 here, although
# the tests mostly wait on the cluster: a test waiting for its share of the real node
# (lockRealNode) held one of the two, and the simulated-only tests queued behind.
E2E_PARALLEL ?= 4
E2E_NETWORK ?= cilium
E2E_CLUSTER = KOLOTOC_CLUSTER=$(E2E_CLUSTER_NAME) KOLOTOC_KUBECONFIG=$(CURDIR)/.kolotoc/kubeconfig-$(E2E_CLUSTER_NAME) KOLOTOC_NETWORK=$(E2E_NETWORK)

e2e: preflight stack-tools
	testbed/tools/tools.sh $(CLUSTER_TOOLS) $(E2E_NETWORK:bridge=) flowcheck
	$(E2E_CLUSTER) testbed/cluster/cluster.sh up
	@echo "==> e2e: go test -tags e2e ./tests/e2e/ against $$($(E2E_CLUSTER) testbed/cluster/cluster.sh kubeconfig)"
	export $(E2E_CLUSTER); $(STACK_ENV); go test -tags e2e -count=1 -timeout 60m -parallel $(E2E_PARALLEL) ./tests/e2e/

# The suite's cluster is put back afterwards, even when a test fails: left running if it ran
# before, stopped if it was stopped, deleted if there was none (the usual case).
# The order is for a cold machine's 2 cores: the tools and the program's packages first (both
# CPU-bound), then the e2e suite and the unit tests side by side (e2e-beside-unit).
test: preflight
	@echo "==> test: the tools, the program's packages, then the end-to-end suite beside the unit tests (the cluster is restored afterwards)"
	@# The real node's images build from Debian packages (mostly unpacking, little CPU) while
	@# the Go code compiles; testbed/node/node.sh's build waits for this one (a lock) and reuses it.
	mkdir -p .kolotoc && testbed/images/images.sh build >.kolotoc/images-build.log 2>&1 &
	testbed/tools/tools.sh $(STACK_TOOLS) $(CLUSTER_TOOLS) $(E2E_NETWORK:bridge=) flowcheck
	@# Compiled once here, what the suite's first pulumi up (go run) and the unit tests' go vet
	@# would otherwise both compile at the same time (the cloud SDKs: about 6 minutes cold).
	go build ./...
	$(E2E_CLUSTER) testbed/cluster/cluster.sh with $(MAKE) --no-print-directory e2e-beside-unit

# The e2e suite waits on pods, the API and pulumi for most of its length (30 to 60 % of 2 cores
# busy, docs/measured.md): the unit tests run beside it at nice 10, taking the cores it leaves idle
# while its own processes keep their priority. The suite's output goes to .kolotoc/e2e.log, printed
# when it ends; the target fails when either failed.
E2E_LOG = .kolotoc/e2e.log
e2e-beside-unit:
	@rm -f $(E2E_LOG)
	@$(MAKE) --no-print-directory e2e >$(E2E_LOG) 2>&1 & e2e=$$!; \
	echo "==> e2e: the suite runs in the background (its output in $(E2E_LOG), printed when it ends)"; \
	unit=0; nice -n 10 $(MAKE) --no-print-directory unit || unit=$$?; \
	echo "==> unit: exit $$unit; waiting for the e2e suite"; \
	rc=0; wait $$e2e || rc=$$?; \
	echo "==> e2e: its output ($(E2E_LOG))"; cat $(E2E_LOG); \
	echo "==> test: unit exit $$unit, e2e exit $$rc"; [ $$unit = 0 ] && [ $$rc = 0 ]

fmt:
	@echo "==> fmt"
	$(if $(GO_FILES),gofmt -l -w $(GO_FILES),@echo "no Go files")

# Every Go module of the checkout: the product (with the test bed's Go code but for what follows),
# the test bed's own (flowcheck, the Go images' recipes) and the tools' wrapper modules
# (testbed/tools/*).
GO_MODULES = $(patsubst %/go.mod,%,$(patsubst go.mod,./go.mod,$(shell git ls-files --cached --others --exclude-standard -- 'go.mod' '*/go.mod')))
# Modules with code to vet and lint besides the product (the tools' wrappers hold none of their own).
CODE_MODULES = testbed/checks/flowcheck testbed/checks/kueuechart testbed/images/pause
# testbed/images/prometheus has no package: it builds upstream's command from its require, which
# `go mod tidy` would drop; it is left out of the tidy check.
TIDY_SKIP = testbed/images/prometheus

# What make unit (and so make test and CI) checks before the tests: formatting, go vet, go.mod and
# go.sum tidy in every module, staticcheck (built from the module proxy like the other tools,
# testbed/tools/staticcheck; staticcheck.conf), and shellcheck when installed.
lint:
	@echo "==> lint: gofmt, go vet, go mod tidy, staticcheck, shellcheck"
	@unformatted=$$($(if $(GO_FILES),gofmt -l $(GO_FILES))); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed (make fmt):"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags e2e ./tests/...
	for m in $(CODE_MODULES); do go -C $$m vet ./... && go -C $$m vet -tags e2e ./...; done
	@for m in $(filter-out $(TIDY_SKIP),$(GO_MODULES)); do \
	  go -C $$m mod tidy -diff >/dev/null 2>&1 || { echo "go mod tidy changes $$m (run: go -C $$m mod tidy):"; go -C $$m mod tidy -diff; exit 1; }; \
	done; echo "go.mod and go.sum tidy in $(words $(filter-out $(TIDY_SKIP),$(GO_MODULES))) modules"
	testbed/tools/tools.sh staticcheck
	"$$(testbed/tools/tools.sh --path)/staticcheck" ./...
	"$$(testbed/tools/tools.sh --path)/staticcheck" -tags e2e ./tests/e2e/...
	sc="$$(testbed/tools/tools.sh --path)/staticcheck"; for m in $(CODE_MODULES); do (cd $$m && "$$sc" ./...); done
	@if command -v shellcheck >/dev/null; then shellcheck -x testbed/lib.sh testbed/*/*.sh bench/*.sh .ci/run; \
	else echo "shellcheck not installed: shell scripts not checked"; fi
