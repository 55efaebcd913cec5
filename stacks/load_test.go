package stacks_test

import (
	"errors"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	"kolotoc/stacks/clouds/simulated"
	_ "kolotoc/stacks/workloads"
	"reflect"
	"slices"
	"strings"
	"testing"

	"kolotoc/components/entrypoint"
	"kolotoc/components/ring"
	"kolotoc/components/storage"
)

const (
	testPassword = "correct-horse-battery-staple"
	testSeed     = "4cb085380e5f9d8f58cea32480fb882e55eaab5516bd7148cd01c02c3597e20e" // 256 bits (sha256 of "kolotoc test seed")
)

// devRaw is the committed dev stack with its secrets set, as `make up` sets them.
func devRaw(t *testing.T) stacks.Raw { return rawWithSecrets(t, "../Pulumi.dev.yaml") }

// gpuRaw is the former dev layout (examples/gpu-dev: a GPU pool and a CPU pool, simulated),
// as the dev stack with its secrets set: the base of the bad configs, which speak of GPUs and pools.
func gpuRaw(t *testing.T) stacks.Raw {
	return rawWithSecrets(t, "../examples/gpu-dev/Pulumi.gpu-dev.yaml")
}

func rawWithSecrets(t *testing.T, path string) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile(path, "kolotoc", "dev", "")
	if err != nil {
		t.Fatal(err)
	}
	raw.Values["kolotoc:jupyterPassword"] = testPassword
	raw.Values["kolotoc:sshKeySeed"] = testSeed
	raw.Secrets["kolotoc:jupyterPassword"] = true
	raw.Secrets["kolotoc:sshKeySeed"] = true
	return raw
}

func TestCommittedStacksLoad(t *testing.T) {
	// dev runs CPU towers on the local real node (one rank each); prod 8-GPU towers.
	for stack, gpus := range map[string]int{"dev": 0, "prod": 8} {
		t.Run(stack, func(t *testing.T) {
			raw, err := stacks.ReadStackFile("../Pulumi."+stack+".yaml", "kolotoc", stack, "")
			if err != nil {
				t.Fatal(err)
			}
			raw.Values["kolotoc:jupyterPassword"] = testPassword
			raw.Values["kolotoc:sshKeySeed"] = testSeed
			raw.Secrets["kolotoc:jupyterPassword"] = true
			raw.Secrets["kolotoc:sshKeySeed"] = true
			c, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if c.Namespace != "kolotoc-"+stack {
				t.Errorf("namespace = %q, want kolotoc-%s", c.Namespace, stack)
			}
			if slots := max(gpus, 1); c.Towers.GPUsPerTower != gpus || c.Towers.Slots != slots {
				t.Errorf("towers: gpusPerTower %d slots %d, want %d and %d", c.Towers.GPUsPerTower, c.Towers.Slots, gpus, slots)
			}
		})
	}
}

func TestDevDefaults(t *testing.T) {
	c, err := stacks.Load(devRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pool("node"); p == nil || !p.Real || p.GPUsPerNode != 0 || p.Nodes != 1 {
		t.Errorf("pool node = %+v, want one real CPU node", p)
	}
	// CPU towers: one slot each unless told, on the real node.
	if t0 := c.Towers; t0.Count != 2 || t0.Pool != "node" || t0.GPUsPerTower != 0 || t0.Slots != ring.DefaultCPUTowerSlots || t0.SSHPort != ring.DefaultSSHPort {
		t.Errorf("towers = %+v", c.Towers)
	}
	if c.Storage.Type != storage.TypeLocal || c.Storage.Path != "/var/lib/kolotoc/kolotoc-dev/shared" || c.Storage.MountPath != "/shared" {
		t.Errorf("storage = %+v, want a local directory per namespace", c.Storage)
	}
	if c.Cluster.Kubeconfig != simulated.DefaultKubeconfig || c.Entrypoint.ServiceType != entrypoint.ServiceClusterIP || c.Entrypoint.Pool != "node" ||
		c.Entrypoint.JupyterUI != entrypoint.UINotebook || c.Carriers.Pool != "node" {
		t.Errorf("cluster %+v entrypoint %+v carriers %+v", c.Cluster, c.Entrypoint, c.Carriers)
	}
	if *c.DevicePlugin.Enabled {
		t.Error("device plugin on a stack without a GPU pool")
	}
	// Defaults fill zero values only: applying them again changes nothing.
	again := *c
	stacks.ApplyDefaults(&again)
	if !reflect.DeepEqual(&again, c) {
		t.Errorf("applyDefaults is not idempotent:\n%+v\n%+v", again, *c)
	}
}

func TestSecretNeverPrints(t *testing.T) {
	c, err := stacks.Load(devRaw(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{c.JupyterPassword.String(), c.SSHKeySeed.GoString()} {
		if strings.Contains(s, testPassword) || strings.Contains(s, testSeed) {
			t.Errorf("secret printed: %s", s)
		}
	}
}

// TestBadConfigs: each bad config is refused with an error naming the key at fault.
func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name    string
		set     map[string]string // values replaced (kolotoc: prefix added)
		unset   []string
		plain   []string // keys set without --secret
		secret  []string // keys of set given with --secret
		wantKey string
		wantMsg string
	}{
		{name: "unknown cloud", set: map[string]string{"cloud": "openstack"}, wantKey: "cloud", wantMsg: "allowed: simulated, existing, gcp, aws, azure"},
		{name: "missing cloud", unset: []string{"cloud"}, wantKey: "cloud", wantMsg: "required"},
		{name: "unknown top-level key", set: map[string]string{"tower": `{"count":2}`}, wantKey: "tower", wantMsg: "unknown key"},
		{name: "unknown nested field", set: map[string]string{"towers": `{"count":2,"gpusPerTowr":8}`}, wantKey: "towers.gpusPerTowr", wantMsg: "allowed: enabled, count, gpusPerTower"},
		{name: "wrong type", set: map[string]string{"towers": `{"count":"two"}`}, wantKey: "towers.count", wantMsg: "want an integer"},
		{name: "zero towers", set: map[string]string{"towers": `{"count":0}`}, wantKey: "towers.count", wantMsg: "at least 1"},
		// EFA does not cross zones (fabric.go): EC2 User Guide, "Elastic Fabric Adapter", EFA
		// limitations: "EFA traffic can't cross Availability Zones or VPCs".
		{name: "EFA pool spread over zones with crossZone", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","zones":["us-east-1a","us-east-1b"]}`,
			"nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"placement":"spread"},{"name":"cpu","machineType":"m6i.4xlarge"}]`,
			"towers":    `{"count":2,"gpusPerTower":8,"pool":"gpu","crossZone":true}`, "storage": `{"type":"efs"}`},
			wantKey: "towers.crossZone", wantMsg: "spreads over 2 zones with EFA (4 interfaces per node), and EFA traffic does not cross subnets or zones: NCCL's ranks would not reach each other over it; allowed: nodePools[0].placement: compact, or nodePools[0].fabric: off (TCP across zones), or towers.crossZone: false"},
		// kolotoc:queue (queue.go, components/queue).
		{name: "unknown queue type", set: map[string]string{"queue": `{"type":"volcano"}`}, wantKey: "queue.type", wantMsg: "allowed: off, kueue"},
		{name: "queue keys with the queue off", set: map[string]string{"queue": `{"localQueue":"team"}`}, wantKey: "queue.type", wantMsg: "type kueue only"},
		{name: "ring larger than the queue's quota", set: map[string]string{"queue": `{"type":"kueue","quota":{"gpus":8}}`, "towers": `{"count":2,"gpusPerTower":8}`},
			wantKey: "towers.count", wantMsg: "needs 16 nvidia.com/gpu at once, more than the queue's quota of 8 (queue.quota)"},
		{name: "ring larger than the pools' quota in CPU", set: map[string]string{"queue": `{"type":"kueue","quota":{"cpu":"2"}}`, "towers": `{"count":2,"gpusPerTower":8}`},
			wantKey: "towers.count", wantMsg: "cpu at once, more than the queue's quota of 2"},
		{name: "TF cluster larger than the queue's quota", set: map[string]string{"queue": `{"type":"kueue","quota":{"gpus":1}}`,
			"tfcluster": `{"enabled":true,"workers":{"count":2,"gpus":1}}`}, wantKey: "tfcluster", wantMsg: "the TF cluster (every task) needs 2 nvidia.com/gpu at once, more than the queue's quota of 1"},
		{name: "elastic group larger than the queue's quota", set: map[string]string{"queue": `{"type":"kueue","quota":{"gpus":8}}`,
			"elastic": `{"enabled":true,"minNodes":3,"maxNodes":4,"gpusPerNode":4}`}, wantKey: "elastic.minNodes",
			wantMsg: "the elastic workers' group (minNodes = 3 workers, admitted together) needs 12 nvidia.com/gpu at once, more than the queue's quota of 8"},
		{name: "LocalQueue called default", set: map[string]string{"queue": `{"type":"kueue","localQueue":"default"}`}, wantKey: "queue.localQueue", wantMsg: "every job of a namespace"},
		{name: "Kueue installed on the simulated cloud", set: map[string]string{"queue": `{"type":"kueue","install":true}`}, wantKey: "queue.install", wantMsg: "allowed: false"},
		{name: "priority of a workload not queued", set: map[string]string{"queue": `{"type":"kueue","priorities":{"carriers":5}}`}, wantKey: "queue.priorities.carriers", wantMsg: "allowed: towers"},
		{name: "bad queue quota", set: map[string]string{"queue": `{"type":"kueue","quota":{"memory":"lots"}}`}, wantKey: "queue.quota.memory", wantMsg: "positive quantity"},
		{name: "negative towers", set: map[string]string{"towers": `{"count":-3}`}, wantKey: "towers.count", wantMsg: "at least 1"},
		{name: "more GPUs per tower than a node has", set: map[string]string{"towers": `{"count":2,"gpusPerTower":16}`}, wantKey: "towers.gpusPerTower", wantMsg: "allowed: 1..8"},
		{name: "more towers than the pool holds", set: map[string]string{"towers": `{"count":3,"gpusPerTower":8}`}, wantKey: "towers.count", wantMsg: "allowed: 1..2"},
		{name: "undeclared tower pool", set: map[string]string{"towers": `{"pool":"a100"}`}, wantKey: "towers.pool", wantMsg: "declared: gpu, cpu"},
		{name: "towers on a CPU pool", set: map[string]string{"towers": `{"pool":"cpu","gpusPerTower":1}`}, wantKey: "towers.pool", wantMsg: "CPU pool"},
		{name: "undeclared carrier pool", set: map[string]string{"carriers": `{"pool":"big"}`}, wantKey: "carriers.pool", wantMsg: "not declared"},
		{name: "zero carriers", set: map[string]string{"carriers": `{"count":0}`}, wantKey: "carriers.count", wantMsg: "at least 1"},
		{name: "duplicate pool names", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a"},{"name":"gpu"}]`}, wantKey: "nodePools[1].name", wantMsg: "duplicate"},
		{name: "pool name not DNS", set: map[string]string{"nodePools": `[{"name":"GPU_Pool","gpusPerNode":8,"gpuType":"a"}]`}, wantKey: "nodePools[0].name", wantMsg: "DNS-1123"},
		{name: "node name too long", set: map[string]string{"cluster": `{"name":"` + strings.Repeat("c", 59) + `"}`}, wantKey: "nodePools[0].name", wantMsg: "at most 63"},
		{name: "no pools", set: map[string]string{"nodePools": `[]`}, wantKey: "nodePools", wantMsg: "at least one"},
		{name: "GPU pool without type", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8},{"name":"cpu"}]`}, wantKey: "nodePools[0].gpuType", wantMsg: "required"},
		{name: "bad memory quantity", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","memory":"lots"},{"name":"cpu"}]`}, wantKey: "nodePools[0].memory", wantMsg: "quantity"},
		{name: "bad taint effect", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","taints":[{"key":"x","value":"y","effect":"Never"}]},{"name":"cpu"}]`}, wantKey: "nodePools[0].taints[0].effect", wantMsg: "NoSchedule"},
		{name: "min above nodes", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","nodes":2,"minNodes":3,"maxNodes":4},{"name":"cpu"}]`}, wantKey: "nodePools[0].nodes", wantMsg: "minNodes (3) <= nodes <= maxNodes (4)"},
		{name: "namespace not DNS", set: map[string]string{"namespace": "Kolotoc.Dev"}, wantKey: "namespace", wantMsg: "DNS-1123"},
		{name: "namespace kube-system", set: map[string]string{"namespace": "kube-system"}, wantKey: "namespace", wantMsg: "the cluster's own namespace: the stack would take it over (adopt it, deny all ingress to its pods, delete it on destroy)"},
		{name: "namespace default", set: map[string]string{"namespace": "default"}, wantKey: "namespace", wantMsg: "allowed: a namespace of the stack's own, not default, kube-system, kube-public, kube-node-lease or kube-*"},
		{name: "namespace of a cloud's kube-*", set: map[string]string{"namespace": "kube-gmp"}, wantKey: "namespace", wantMsg: "the cluster's own"},
		{name: "namespace of another stack's GPU agents", set: map[string]string{"namespace": "kolotoc-prod-gpu-agents"}, wantKey: "namespace", wantMsg: "ends in -gpu-agents, the GPU agents' namespace of the stack in kolotoc-prod"},
		{name: "missing jupyter password", unset: []string{"jupyterPassword"}, wantKey: "jupyterPassword", wantMsg: "pulumi config set --secret kolotoc:jupyterPassword"},
		{name: "plaintext jupyter password", plain: []string{"jupyterPassword"}, wantKey: "jupyterPassword", wantMsg: "must be a secret"},
		{name: "short jupyter password", set: map[string]string{"jupyterPassword": "hunter2"}, wantKey: "jupyterPassword", wantMsg: "at least 12"},
		{name: "missing ssh key seed", unset: []string{"sshKeySeed"}, wantKey: "sshKeySeed", wantMsg: "pulumi config set --secret kolotoc:sshKeySeed"},
		{name: "short ssh key seed", set: map[string]string{"sshKeySeed": "0123456789abcdef0123456789abcdef"}, wantKey: "sshKeySeed", wantMsg: "128 bits, fewer than 256"},
		{name: "made-up ssh key seed", set: map[string]string{"sshKeySeed": strings.Repeat("ab", 32)}, wantKey: "sshKeySeed", wantMsg: "only 1 distinct values: not random"},
		{name: "ssh key seed a passphrase", set: map[string]string{"sshKeySeed": "correct horse battery staple, twice over"}, wantKey: "sshKeySeed", wantMsg: "neither hex nor base64"},
		{name: "latest image", set: map[string]string{"towers": `{"image":"horovod/horovod:latest"}`}, wantKey: "towers.image", wantMsg: "not pinned"},
		{name: "tagless image", set: map[string]string{"carriers": `{"image":"ghcr.io/dask/dask"}`}, wantKey: "carriers.image", wantMsg: "not pinned"},
		{name: "tagless image with registry port", set: map[string]string{"entrypoint": `{"jupyterImage":"registry:5000/jupyter"}`}, wantKey: "entrypoint.jupyterImage", wantMsg: "not pinned"},
		{name: "LoadBalancer without source ranges", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer"}`}, wantKey: "entrypoint.sourceRanges", wantMsg: "required with a LoadBalancer"},
		{name: "bad source range", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["office"]}`}, wantKey: "entrypoint.sourceRanges[0]", wantMsg: "CIDR"},
		{name: "LoadBalancer open to the internet", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["0.0.0.0/0"]}`}, wantKey: "entrypoint.sourceRanges[0]", wantMsg: "whole internet; allowed: /8 or narrower for IPv4"},
		{name: "LoadBalancer open to half the internet", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["203.0.113.0/24","128.0.0.0/1"]}`}, wantKey: "entrypoint.sourceRanges[1]", wantMsg: "too broad"},
		{name: "LoadBalancer open to IPv6", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["::/0"]}`}, wantKey: "entrypoint.sourceRanges[0]", wantMsg: "/16 or narrower for IPv6"},
		{name: "LoadBalancer range with host bits", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["203.0.113.7/24"]}`}, wantKey: "entrypoint.sourceRanges[0]", wantMsg: "host bits set); allowed: 203.0.113.0/24"},
		{name: "LoadBalancer without TLS", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","sourceRanges":["203.0.113.0/24"]}`}, wantKey: "entrypoint.tlsCertificate", wantMsg: "required with a LoadBalancer"},
		{name: "LoadBalancer without Jupyter", set: map[string]string{"entrypoint": `{"serviceType":"LoadBalancer","jupyter":false,"sourceRanges":["203.0.113.0/24"]}`}, wantKey: "entrypoint.serviceType", wantMsg: "publishes Jupyter alone"},
		{name: "TLS certificate without its key", set: map[string]string{"entrypoint": `{"tlsCertificate":"-----BEGIN CERTIFICATE-----"}`}, wantKey: "entrypointTLSKey", wantMsg: "required with entrypoint.tlsCertificate"},
		{name: "TLS certificate not PEM", set: map[string]string{"entrypoint": `{"tlsCertificate":"my cert"}`, "entrypointTLSKey": "not a key"}, secret: []string{"entrypointTLSKey"}, wantKey: "entrypoint.tlsCertificate", wantMsg: "failed to find any PEM data in certificate input"},
		{name: "unknown service type", set: map[string]string{"entrypoint": `{"serviceType":"NodePort"}`}, wantKey: "entrypoint.serviceType", wantMsg: "allowed: ClusterIP, LoadBalancer"},
		{name: "ssh port out of range", set: map[string]string{"towers": `{"sshPort":70000}`}, wantKey: "towers.sshPort", wantMsg: "1..65535"},
		// Free-form tower resources (issue 33): the API server's rules, and the pool's devices.
		{name: "tower resources: cpu twice", set: map[string]string{"towers": `{"resources":{"requests":{"cpu":"8"}}}`}, wantKey: "towers.resources.requests.cpu", wantMsg: "set by towers.cpu"},
		{name: "tower resources: GPUs twice", set: map[string]string{"towers": `{"resources":{"limits":{"nvidia.com/gpu":2}}}`}, wantKey: "towers.resources.limits.nvidia.com/gpu", wantMsg: "set by towers.gpusPerTower"},
		{name: "tower resources: overcommitted device", set: map[string]string{"towers": `{"resources":{"requests":{"rdma/hca":1},"limits":{"rdma/hca":2}}}`}, wantKey: "towers.resources.limits.rdma/hca", wantMsg: "extended resources cannot be overcommitted; allowed: 1"},
		{name: "tower resources: half a device", set: map[string]string{"towers": `{"resources":{"requests":{"rdma/hca":"500m"}}}`}, wantKey: "towers.resources.requests.rdma/hca", wantMsg: "whole units"},
		{name: "tower resources: huge pages overcommitted", set: map[string]string{"towers": `{"resources":{"requests":{"hugepages-2Mi":"1Gi"},"limits":{"hugepages-2Mi":"2Gi"}}}`}, wantKey: "towers.resources.limits.hugepages-2Mi", wantMsg: "huge page requests must equal their limits"},
		{name: "tower resources: bad huge page size", set: map[string]string{"towers": `{"resources":{"requests":{"hugepages-big":"1Gi"}}}`}, wantKey: "towers.resources.requests.hugepages-big", wantMsg: "hugepages-2Mi, hugepages-1Gi"},
		{name: "tower resources: unknown name", set: map[string]string{"towers": `{"resources":{"requests":{"gpu":1}}}`}, wantKey: "towers.resources.requests.gpu", wantMsg: "unknown resource; allowed: extended resources"},
		{name: "tower resources: not a quantity", set: map[string]string{"towers": `{"resources":{"requests":{"ephemeral-storage":"lots"}}}`}, wantKey: "towers.resources.requests.ephemeral-storage", wantMsg: "must be a quantity"},
		{name: "tower resources: nested value", set: map[string]string{"towers": `{"resources":{"requests":{"rdma/hca":{"n":1}}}}`}, wantKey: "towers.resources.requests.rdma/hca", wantMsg: "want a quantity"},
		{name: "tower resources: the pool lacks the device", set: map[string]string{"towers": `{"resources":{"requests":{"rdma/hca":1}}}`}, wantKey: "towers.resources.requests.rdma/hca", wantMsg: `pool "gpu" declares no rdma/hca, so no node would take a tower; declare what each node advertises in nodePools[0].devices.rdma/hca`},
		{name: "tower resources: more towers than the devices", set: map[string]string{"towers": `{"count":3,"gpusPerTower":4,"resources":{"requests":{"hugepages-1Gi":"8Gi"}}}`, "nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","nodes":2,"devices":{"hugepages-1Gi":"8Gi"}},{"name":"cpu"}]`}, wantKey: "towers.count", wantMsg: `3 towers × 8Gi hugepages-1Gi need more than pool "gpu" has (2 nodes × 8Gi, 1 towers per node); allowed: 1..2`},
		{name: "pool devices: GPUs", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","devices":{"nvidia.com/gpu":8}},{"name":"cpu"}]`}, wantKey: "nodePools[0].devices.nvidia.com/gpu", wantMsg: "set by towers.gpusPerTower"},
		{name: "pool devices: not a quantity", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","devices":{"rdma/hca":"many"}},{"name":"cpu"}]`}, wantKey: "nodePools[0].devices.rdma/hca", wantMsg: "positive quantity per node"},
		// Per-role images and settings (issue 33).
		{name: "TF ps image latest", set: map[string]string{"tfcluster": `{"enabled":true,"ps":{"image":"tensorflow/tensorflow:latest"}}`}, wantKey: "tfcluster.ps.image", wantMsg: "not pinned"},
		{name: "launcher image tagless", set: map[string]string{"towers": `{"launcherImage":"horovod/horovod"}`}, wantKey: "towers.launcherImage", wantMsg: "not pinned"},
		{name: "launcher env Kolotoc's", set: map[string]string{"towers": `{"launcherEnv":[{"name":"KOLOTOC_NP","value":"1"}]}`}, wantKey: "towers.launcherEnv[0].name", wantMsg: "KOLOTOC_* variables are Kolotoc's own"},
		// The data-in Job (issue 33).
		{name: "data-in without image", set: map[string]string{"dataIn": `{"enabled":true,"command":["true"]}`}, wantKey: "dataIn.image", wantMsg: "required with dataIn.enabled"},
		{name: "data-in without command", set: map[string]string{"dataIn": `{"enabled":true,"image":"amazon/aws-cli:2.22.0"}`}, wantKey: "dataIn.command", wantMsg: "required with dataIn.enabled"},
		{name: "data-in image latest", set: map[string]string{"dataIn": `{"enabled":true,"image":"amazon/aws-cli:latest","command":["true"]}`}, wantKey: "dataIn.image", wantMsg: "not pinned"},
		{name: "data-in path escapes", set: map[string]string{"dataIn": `{"enabled":true,"image":"amazon/aws-cli:2.22.0","command":["true"],"path":"../etc"}`}, wantKey: "dataIn.path", wantMsg: "a relative directory under storage.mountPath"},
		{name: "data-in path over checkpoints", set: map[string]string{"dataIn": `{"enabled":true,"image":"amazon/aws-cli:2.22.0","command":["true"],"path":"checkpoints/x"}`}, wantKey: "dataIn.path", wantMsg: "under checkpoints/, which Kolotoc's workloads write"},
		{name: "data-in on a GPU pool", set: map[string]string{"dataIn": `{"enabled":true,"image":"amazon/aws-cli:2.22.0","command":["true"],"pool":"gpu"}`}, wantKey: "dataIn.pool", wantMsg: "needs a CPU pool"},
		// An unknown key below the top level is named at its own path (it was named at its parent's).
		{name: "unknown field two levels down", set: map[string]string{"tfcluster": `{"enabled":true,"evaluator":{"enabled":true}}`}, wantKey: "tfcluster.evaluator.enabled", wantMsg: "unknown field; allowed: count, "},
		{name: "unknown field of a list item", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","nodes":2},{"name":"cpu","zone":"x"}]`}, wantKey: "nodePools[1].zone", wantMsg: "unknown field; allowed: name, "},
		{name: "data-in unknown field", set: map[string]string{"dataIn": `{"enabled":true,"source":"s3://x"}`}, wantKey: "dataIn.source", wantMsg: "allowed: enabled, image, command, path"},
		{name: "TF log dir escapes", set: map[string]string{"tfcluster": `{"enabled":true,"logDir":"../logs"}`}, wantKey: "tfcluster.logDir", wantMsg: "a relative directory under storage.mountPath"},
		{name: "TF checkpoint dir absolute", set: map[string]string{"tfcluster": `{"enabled":true,"checkpointDir":"/mnt/ckpt"}`}, wantKey: "tfcluster.checkpointDir", wantMsg: "a relative directory under storage.mountPath"},
		{name: "watch GPUs without the DCGM exporter", set: map[string]string{"sentinels": `{"enabled":true,"watchGPUs":true}`}, wantKey: "sentinels.watchGPUs", wantMsg: "needs sentinels.enabled: true, monitoring.enabled: true and the exporter"},
		{name: "watch processes without sentinels", set: map[string]string{"sentinels": `{"enabled":false,"watchProcesses":true}`}, wantKey: "sentinels.watchProcesses", wantMsg: "needs sentinels.enabled: true"},
		// Rendezvous tuning (issue 33): torch's options per backend, never the wrapper's is_host.
		{name: "rdzvConf misspelt", set: map[string]string{"elastic": `{"enabled":true,"rdzvConf":{"last_call_timout":5}}`}, wantKey: "elastic.rdzvConf.last_call_timout", wantMsg: "not an option of the c10d rendezvous; allowed: close_timeout, join_timeout, last_call_timeout"},
		{name: "rdzvConf is_host", set: map[string]string{"elastic": `{"enabled":true,"rdzvConf":["is_host=true"]}`}, wantKey: "elastic.rdzvConf.is_host", wantMsg: "set by Kolotoc on every worker"},
		{name: "rdzvConf not seconds", set: map[string]string{"elastic": `{"enabled":true,"rdzvConf":{"join_timeout":"ten"}}`}, wantKey: "elastic.rdzvConf.join_timeout", wantMsg: "a whole number of seconds, at least 1"},
		{name: "rdzvConf not a map", set: map[string]string{"elastic": `{"enabled":true,"rdzvConf":"last_call_timeout=5"}`}, wantKey: "elastic.rdzvConf", wantMsg: "want a map of options or a list of key=value strings"},
		// Host-network towers (hostnet.go): no sentinel, no port of the node, one tower per node.
		{name: "host-network towers beside sentinels", set: map[string]string{"towers": `{"count":2,"gpusPerTower":8,"pool":"gpu","hostNetwork":true}`}, wantKey: "sentinels.enabled", wantMsg: "run any code sent to them without authentication, on its node's address, where no NetworkPolicy applies; allowed with towers.hostNetwork: false"},
		{name: "host-network sshd on the node's ssh port", set: map[string]string{"towers": `{"hostNetwork":true,"sshPort":22}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.sshPort", wantMsg: "ports below 1024 are the node's services (its own sshd on 22); allowed: 1024..65535 outside the node's ports"},
		{name: "host-network sshd on the kubelet's port", set: map[string]string{"towers": `{"hostNetwork":true,"sshPort":10250}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.sshPort", wantMsg: "10250 is a port of the node (the kubelet's API); allowed: 1024..65535 except 2379-2380, 6443, 10248"},
		{name: "host-network sshd on a NodePort", set: map[string]string{"towers": `{"hostNetwork":true,"sshPort":30022}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.sshPort", wantMsg: "(the NodePort range)"},
		{name: "more host-network towers than nodes", set: map[string]string{"towers": `{"count":3,"gpusPerTower":4,"pool":"gpu","hostNetwork":true}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.count", wantMsg: `a node holds one tower and the rest stay Pending: pool "gpu" grows to maxNodes 2; allowed: 1..2`},
		{name: "two host-network CPU towers on the real node", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","nodes":2},{"name":"cpu","real":true,"cpus":16,"memory":"64Gi"}]`, "towers": `{"count":2,"pool":"cpu","gpusPerTower":0,"cpu":"1","memory":"1Gi","hostNetwork":true}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.count", wantMsg: `pool "cpu" grows to maxNodes 1; allowed: 1..1`},
		{name: "host-network towers under GKE's Cilium", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "towers": `{"count":1,"gpusPerTower":8,"pool":"gpu","hostNetwork":true}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.hostNetwork", wantMsg: "on cloud gcp the cluster's NetworkPolicies are enforced by Cilium (GKE Dataplane V2), which counts a node's address as the host, never as an ipBlock, so the metadata egress deny every Kolotoc namespace carries would drop the launcher's ssh to each tower on its node's address; allowed with cluster.podMetadataAccess: true"},
		{name: "host-network towers under AKS's Cilium", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "towers": `{"count":1,"gpusPerTower":8,"pool":"gpu","hostNetwork":true}`, "sentinels": `{"enabled":false}`}, wantKey: "towers.hostNetwork", wantMsg: "on cloud azure the cluster's NetworkPolicies are enforced by Cilium (Azure CNI powered by Cilium)"},
		{name: "negative runAsUser", set: map[string]string{"runAsUser": "-1"}, wantKey: "runAsUser", wantMsg: "0 (each image's own user) or a uid from 1 to 2147483647"},
		{name: "runAsUser not a number", set: map[string]string{"runAsUser": `"kolotoc"`}, wantKey: "runAsUser", wantMsg: "want an integer"},
		{name: "privileged ssh port as a user", set: map[string]string{"runAsUser": "1000", "towers": `{"sshPort":22}`}, wantKey: "towers.sshPort", wantMsg: "cannot bind a port below 1024; allowed: 1024..65535"},
		{name: "external nfs without server", set: map[string]string{"storage": `{"type":"nfs"}`}, wantKey: "storage.server", wantMsg: "required"},
		{name: "unknown storage type", set: map[string]string{"storage": `{"type":"ceph"}`}, wantKey: "storage.type", wantMsg: "allowed: in-cluster-nfs, nfs"},
		{name: "relative mount path", set: map[string]string{"storage": `{"mountPath":"shared"}`}, wantKey: "storage.mountPath", wantMsg: "absolute"},
		{name: "hostPath scratch without path", set: map[string]string{"storage": `{"scratch":{"type":"hostPath"}}`}, wantKey: "storage.scratch.path", wantMsg: "required"},
		{name: "hostPath scratch on the node's root", set: map[string]string{"storage": `{"scratch":{"type":"hostPath","path":"/"}}`}, wantKey: "storage.scratch.path", wantMsg: "a directory of the node's own system (/): every pod mounting it could take the node over; allowed: a directory apart from /, /bin, /boot"},
		{name: "hostPath scratch in the kubelet's state", set: map[string]string{"storage": `{"scratch":{"type":"hostPath","path":"/var/lib/kubelet/pods"}}`}, wantKey: "storage.scratch.path", wantMsg: "(/var/lib/kubelet)"},
		{name: "hostPath scratch holding the kubelet's state", set: map[string]string{"storage": `{"scratch":{"type":"hostPath","path":"/var"}}`}, wantKey: "storage.scratch.path", wantMsg: "(/var/lib/containerd)"},
		{name: "hostPath scratch in /etc", set: map[string]string{"storage": `{"scratch":{"type":"hostPath","path":"/etc/kubernetes"}}`}, wantKey: "storage.scratch.path", wantMsg: "(/etc)"},
		{name: "local storage in the node's system", set: map[string]string{"storage": `{"type":"local","path":"/root/checkpoints"}`}, wantKey: "storage.path", wantMsg: "(/root)"},
		{name: "NFS server with a scheme", set: map[string]string{"storage": `{"type":"nfs","server":"nfs://10.0.0.2/exports"}`}, wantKey: "storage.server", wantMsg: "not a DNS name or IP address; allowed: the NFS server's DNS name or IP address, without scheme, port or path"},
		{name: "NFS server with a port", set: map[string]string{"storage": `{"type":"nfs","server":"nfs.example.com:2049"}`}, wantKey: "storage.server", wantMsg: "not a DNS name or IP address"},
		{name: "image with a short digest", set: map[string]string{"towers": `{"image":"horovod/horovod@sha256:abc"}`}, wantKey: "towers.image", wantMsg: "not a digest-pinned image; allowed: name@sha256: and 64 lower-case hexadecimal digits"},
		{name: "image with @sha256: inside", set: map[string]string{"carriers": `{"image":"ghcr.io/dask/dask@sha256:` + strings.Repeat("ab", 32) + `/../evil"}`}, wantKey: "carriers.image", wantMsg: "not a digest-pinned image"},
		{name: "image with an upper-case digest", set: map[string]string{"entrypoint": `{"jupyterImage":"jupyter/base-notebook@sha256:` + strings.Repeat("AB", 32) + `"}`}, wantKey: "entrypoint.jupyterImage", wantMsg: "not a digest-pinned image"},
		{name: "existing cluster without kubeconfig", set: map[string]string{"cloud": "existing"}, wantKey: "cluster.kubeconfig", wantMsg: "required"},
		{name: "cloud without region", set: map[string]string{"cloud": "gcp"}, wantKey: "cluster.region", wantMsg: "required"},
		{name: "run id not a label value", set: map[string]string{"towers": `{"run":"run #2"}`}, wantKey: "towers.run", wantMsg: "not a run id"},
		{name: "unknown run policy", set: map[string]string{"towers": `{"onSuccess":"delete"}`}, wantKey: "towers.onSuccess", wantMsg: "allowed: keep, release"},
		{name: "suspend not a bool", set: map[string]string{"suspend": `"yes"`}, wantKey: "suspend", wantMsg: "want true or false"},
		{name: "env name with a dash", set: map[string]string{"towers": `{"env":[{"name":"MY-VAR","value":"x"}]}`}, wantKey: "towers.env[0].name", wantMsg: "not a variable name"},
		{name: "env name of Kolotoc's", set: map[string]string{"carriers": `{"env":[{"name":"KOLOTOC_NP","value":"9"}]}`}, wantKey: "carriers.env[0].name", wantMsg: "Kolotoc's own"},
		{name: "env name twice", set: map[string]string{"towers": `{"env":[{"name":"A","value":"1"},{"name":"A","value":"2"}]}`}, wantKey: "towers.env[1].name", wantMsg: "set twice"},
		{name: "env value and secret", set: map[string]string{"towers": `{"env":[{"name":"T","value":"x","valueFrom":{"secretKeyRef":{"name":"s","key":"k"}}}]}`}, wantKey: "towers.env[0]", wantMsg: "both value and valueFrom"},
		{name: "env secret without a name", set: map[string]string{"entrypoint": `{"env":[{"name":"T","valueFrom":{"secretKeyRef":{"key":"k"}}}]}`}, wantKey: "entrypoint.env[0].valueFrom.secretKeyRef.name", wantMsg: "not a Kubernetes object name"},
		// Kolotoc's own Secrets are not handed out through env (runs.go OwnSecrets).
		{name: "env with the towers' ssh key", set: map[string]string{"towers": `{"env":[{"name":"K","valueFrom":{"secretKeyRef":{"name":"tower-ssh","key":"id_ed25519"}}}]}`}, wantKey: "towers.env[0].valueFrom.secretKeyRef.name", wantMsg: "a Secret Kolotoc itself writes (its keys, passwords and credentials); allowed: a Secret of your own, not tower-ssh, entrypoint-jupyter, entrypoint-tls, grafana, registry-credentials, shared-credentials"},
		{name: "env with Jupyter's token", set: map[string]string{"carriers": `{"env":[{"name":"T","valueFrom":{"secretKeyRef":{"name":"entrypoint-jupyter","key":"token"}}}]}`}, wantKey: "carriers.env[0].valueFrom.secretKeyRef.name", wantMsg: "a Secret Kolotoc itself writes"},
		{name: "env with the registry credentials", set: map[string]string{"elastic": `{"enabled":true,"env":[{"name":"R","valueFrom":{"secretKeyRef":{"name":"registry-credentials","key":".dockerconfigjson"}}}]}`}, wantKey: "elastic.env[0].valueFrom.secretKeyRef.name", wantMsg: "a Secret Kolotoc itself writes"},
		{name: "env with the storage credentials", set: map[string]string{"tfcluster": `{"enabled":true,"env":[{"name":"S","valueFrom":{"secretKeyRef":{"name":"shared-credentials","key":"azurestorageaccountkey"}}}]}`}, wantKey: "tfcluster.env[0].valueFrom.secretKeyRef.name", wantMsg: "a Secret Kolotoc itself writes"},
		{name: "env with Grafana's password", set: map[string]string{"entrypoint": `{"env":[{"name":"G","valueFrom":{"secretKeyRef":{"name":"grafana","key":"admin-password"}}}]}`}, wantKey: "entrypoint.env[0].valueFrom.secretKeyRef.name", wantMsg: "a Secret Kolotoc itself writes"},
		{name: "code without a repository", set: map[string]string{"code": `{"ref":"main"}`}, wantKey: "code.repository", wantMsg: "required"},
		{name: "code URL with a token", set: map[string]string{"code": `{"repository":"https://user:ghp_abc@example.com/r.git"}`}, wantKey: "code.repository", wantMsg: "code.credentialsSecret"},
		{name: "code over git:// on a cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "code": `{"repository":"git://git.example.com/train.git"}`}, wantKey: "code.repository", wantMsg: "on cloud gcp the clone must authenticate its server: over git://, http:// or a path anyone on the way could swap the code every rank runs; allowed: https://…, ssh://… or git@host:path, or pin code.ref to a full commit id (40 hex digits)"},
		{name: "code over http:// on an existing cluster", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "code": `{"repository":"http://git.example.com/train.git","ref":"v1.2"}`}, wantKey: "code.repository", wantMsg: "on cloud existing the clone must authenticate its server"},
		{name: "code URL with a token in its query", set: map[string]string{"code": `{"repository":"https://example.com/r.git?private_token=glpat-abc"}`}, wantKey: "code.repository", wantMsg: "a query string (where tokens travel) would sit in plain text"},
		{name: "code ssh URL with a password", set: map[string]string{"code": `{"repository":"ssh://git:hunter2@example.com/r.git"}`}, wantKey: "code.repository", wantMsg: "credentials in the URL"},
		{name: "code credentials over git://", set: map[string]string{"code": `{"repository":"git://10.213.0.2/demo.git","credentialsSecret":"git-token"}`}, wantKey: "code.credentialsSecret", wantMsg: "a username and password are given to git over https only"},
		{name: "code over the shared claim", set: map[string]string{"code": `{"repository":"https://example.com/r.git","path":"/shared/code"}`}, wantKey: "code.path", wantMsg: "overlaps /shared"},
		{name: "code image not pinned", set: map[string]string{"code": `{"repository":"https://example.com/r.git","image":"alpine/git"}`}, wantKey: "code.image", wantMsg: "not pinned"},
		{name: "sentinels without towers", set: map[string]string{"towers": `{"enabled":false}`}, wantKey: "sentinels.enabled", wantMsg: "enable towers"},
		{name: "tower memory larger than node", set: map[string]string{"towers": `{"memory":"1Ti"}`}, wantKey: "towers.memory", wantMsg: "more than a node"},
		{name: "empty command argument", set: map[string]string{"towers": `{"command":["mpirun",""]}`}, wantKey: "towers.command[1]", wantMsg: "empty"},
		{name: "not JSON", set: map[string]string{"towers": `{count: 2`}, wantKey: "towers", wantMsg: "not a YAML/JSON value"},
		// How long `pulumi up` waits (timeouts.go) and how kubectl reaches the cluster (kubeaccess.go).
		{name: "await timeout not a duration", set: map[string]string{"awaitTimeout": "soon"}, wantKey: "awaitTimeout", wantMsg: "not a duration; allowed: a Go duration of whole seconds from 1m to 24h, e.g. 30m"},
		{name: "await timeout under a minute", set: map[string]string{"awaitTimeout": "30s"}, wantKey: "awaitTimeout", wantMsg: "allowed: a Go duration of whole seconds from 1m to 24h"},
		{name: "await timeout over a day", set: map[string]string{"awaitTimeout": "48h"}, wantKey: "awaitTimeout", wantMsg: "allowed: a Go duration of whole seconds from 1m to 24h"},
		{name: "await timeout in fractions of a second", set: map[string]string{"awaitTimeout": "90.5s"}, wantKey: "awaitTimeout", wantMsg: "whole seconds"},
		{name: "kube context on gcp", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","context":"prod"}`}, wantKey: "cluster.context", wantMsg: "gcloud names a GKE cluster's context gke_<project>_<location>_<name>"},
		// The clouds (clouds_config.go, catalogue.go).
		{name: "unknown machine type", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-3g"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].machineType", wantMsg: "not in Kolotoc's gcp catalogue; give its shape with kolotoc:nodePools[0].cpus, .memory (and .gpusPerNode, .gpuType for GPUs); unset here: cpus, memory; catalogued types near it: a2-highgpu-1g, a2-highgpu-2g"},
		// Machine types the catalogue does not know, and GPUs attached to GCP N1 (machines.go).
		{name: "custom machine type without its shape", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n2-standard-16"},{"name":"big","machineType":"n2d-custom-8-32768"}]`}, wantKey: "nodePools[2].machineType", wantMsg: "not in Kolotoc's gcp catalogue; give its shape with kolotoc:nodePools[2].cpus, .memory (and .gpusPerNode, .gpuType for GPUs); unset here: cpus, memory"},
		{name: "custom machine type without its memory", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge"},{"name":"cpu","machineType":"m7a.4xlarge","cpus":16}]`}, wantKey: "nodePools[1].machineType", wantMsg: "not in Kolotoc's aws catalogue; give its shape with kolotoc:nodePools[1].cpus, .memory (and .gpusPerNode, .gpuType for GPUs); unset here: memory"},
		{name: "custom machine type with a GPU type but no count", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": `[{"name":"gpu","machineType":"Standard_ND96isr_H100_v5","cpus":96,"memory":"1900Gi","gpuType":"nvidia-h100-80gb"},{"name":"cpu","machineType":"Standard_D16s_v5"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "required with gpuType nvidia-h100-80gb: machine type Standard_ND96isr_H100_v5 is not in Kolotoc's azure catalogue, so its GPU count must be given"},
		{name: "custom machine type with a GPU type no label takes", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge"},{"name":"cpu","machineType":"m6i.4xlarge"},{"name":"l40s","machineType":"g6e.xlarge","cpus":4,"memory":"32Gi","gpusPerNode":1,"gpuType":"NVIDIA L40S"}]`}, wantKey: "nodePools[2].gpuType", wantMsg: "must be a label value"},
		{name: "machine type of another cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"p3.2xlarge"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].machineType", wantMsg: "a machine type of aws, not of gcp; allowed on gcp: GPU machine types: a2-highgpu-1g"},
		{name: "three T4s on N1", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"n1-standard-8","gpusPerNode":3,"gpuType":"nvidia-tesla-t4"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "GCP attaches nvidia-tesla-t4 to an N1 machine in counts of 1, 2, 4; allowed with n1-standard-8: 1, 2, 4"},
		{name: "V100 on an N1 machine too large for its count", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"n1-standard-32","gpusPerNode":1,"gpuType":"nvidia-tesla-v100"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "GCP attaches 1 × nvidia-tesla-v100 only to an N1 machine of at most 12 vCPUs and 78 GB, and n1-standard-32 has 32 vCPUs and 120Gi; allowed with n1-standard-32: 4, 8 (or a smaller N1 machine type)"},
		{name: "GPU GCP does not attach to N1", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-l4"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpuType", wantMsg: "only: nvidia-tesla-p100, nvidia-tesla-p4, nvidia-tesla-t4, nvidia-tesla-v100"},
		{name: "N1 GPU type without a count", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n1-standard-16","gpuType":"nvidia-tesla-v100"}]`}, wantKey: "nodePools[1].gpusPerNode", wantMsg: "required with gpuType nvidia-tesla-v100: n1-standard-16 has no GPUs of its own and GCP attaches nvidia-tesla-v100 to it by count; allowed: 2, 4, 8"},
		{name: "GPUs on a GCP machine type that takes none", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"n2-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "GCP attaches GPUs to N1 machine types only"},
		{name: "cloud pool without machine type", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"nvidia-tesla-a100"},{"name":"cpu"}]`}, wantKey: "nodePools[0].machineType", wantMsg: "required with cloud aws; e.g. GPU machine types: g5.12xlarge"},
		{name: "GPU count the machine type lacks", set: map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","gpusPerNode":4},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "a2-highgpu-8g has 8 GPUs; allowed: 8"},
		{name: "GPU type the machine type lacks", set: map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","gpuType":"nvidia-l4"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].gpuType", wantMsg: "allowed: nvidia-tesla-a100"},
		{name: "more vCPUs than the machine type", set: map[string]string{"nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n2-standard-16","cpus":32}]`}, wantKey: "nodePools[1].cpus", wantMsg: "allowed: 1..16"},
		{name: "GPUs per tower beyond the machine type", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"g2-standard-24"},{"name":"cpu","machineType":"n2-standard-16"}]`, "towers": `{"count":1,"gpusPerTower":4}`}, wantKey: "towers.gpusPerTower", wantMsg: "allowed: 1..2"},
		{name: "Filestore below its minimum", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","tier":"BASIC_SSD","size":"1Ti"}`}, wantKey: "storage.size", wantMsg: "Filestore tier BASIC_SSD holds 2560Gi to 65434Gi; allowed: 2560Gi..65434Gi"},
		{name: "unknown Filestore tier", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","tier":"PREMIUM_PLUS"}`}, wantKey: "storage.tier", wantMsg: "allowed: BASIC_HDD, BASIC_SSD, ZONAL, REGIONAL"},
		{name: "storage of another cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"efs"}`}, wantKey: "storage.type", wantMsg: "needs cloud aws"},
		{name: "Azure Files share below its minimum", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","size":"50Gi"}`}, wantKey: "storage.size", wantMsg: "allowed: 100Gi..102400Gi"},
		{name: "aws without region", set: map[string]string{"cloud": "aws", "cluster": `{"zones":["us-east-1a","us-east-1b"]}`}, wantKey: "cluster.region", wantMsg: "required with cloud aws"},
		{name: "regional GKE pool without zones", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1"}`}, wantKey: "nodePools[0].zones", wantMsg: "required with a regional cluster"},
		{name: "pool zone outside the region", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1"}`, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2,"zones":["europe-west4-a"]},{"name":"cpu","machineType":"n2-standard-16","zones":["us-central1-a"]}]`}, wantKey: "nodePools[0].zones[0]", wantMsg: "not a zone of region us-central1"},
		{name: "nodes not split evenly between zones", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1"}`, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":3,"zones":["us-central1-a","us-central1-b"]},{"name":"cpu","machineType":"n2-standard-16","zones":["us-central1-a"]}]`}, wantKey: "nodePools[0].nodes", wantMsg: "allowed: a multiple of 2"},
		{name: "GKE cluster name too long", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","name":"kolotoc-` + strings.Repeat("x", 33) + `"}`}, wantKey: "cluster.name", wantMsg: "at most 40 characters"},
		{name: "AKS pool name", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": `[{"name":"gpu-a100","machineType":"Standard_ND96asr_v4"},{"name":"cpu","machineType":"Standard_D16s_v5"}]`, "towers": `{"pool":"gpu-a100"}`}, wantKey: "nodePools[0].name", wantMsg: "AKS pool names are 1-12 lower-case letters and digits"},
		{name: "AKS Spot pool under the towers", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","spot":true},{"name":"cpu","machineType":"Standard_D16s_v5"}]`}, wantKey: "nodePools[0].spot", wantMsg: "towers do not tolerate it; allowed: false"},
		{name: "GPU driver outside GKE", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","gpuDriver":"LATEST"},{"name":"cpu","machineType":"m6i.4xlarge"}]`}, wantKey: "nodePools[0].gpuDriver", wantMsg: "only GKE installs GPU drivers"},
		{name: "local SSDs outside GKE", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","localSsds":2},{"name":"cpu","machineType":"m6i.4xlarge"}]`}, wantKey: "nodePools[0].localSsds", wantMsg: "allowed: 0"},
		{name: "existing VPC without subnets", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","vpcId":"vpc-0abc"}`}, wantKey: "cluster.subnetIds", wantMsg: "required with cluster.vpcId"},
		// Azure's own subnet, its Kubernetes ranges and the Azure Files protocol (clouds_azure.go, storage_cloud.go).
		{name: "Azure subnet not a resource ID", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetId":"aks-subnet"}`, "nodePools": aksPools}, wantKey: "cluster.subnetId", wantMsg: "not an Azure subnet resource ID; allowed: /subscriptions/<subscription id>/resourceGroups/<group>/providers/Microsoft.Network/virtualNetworks/<vnet>/subnets/<subnet>"},
		{name: "Azure subnet on aws", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","subnetId":"` + azSubnet + `"}`}, wantKey: "cluster.subnetId", wantMsg: "only for cloud azure (on aws: cluster.vpcId and cluster.subnetIds)"},
		{name: "AWS subnets on azure", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetIds":["subnet-a","subnet-b"]}`, "nodePools": aksPools}, wantKey: "cluster.subnetIds", wantMsg: "on azure name the one subnet every pool runs in as cluster.subnetId"},
		{name: "NFS Azure Files without a subnet", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","protocol":"nfs"}`}, wantKey: "storage.protocol", wantMsg: "needs cluster.subnetId: the subnet the cluster runs in, with the Microsoft.Storage service endpoint; allowed without it: smb"},
		{name: "NFS Azure Files on Standard", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetId":"` + azSubnet + `"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","tier":"Standard"}`}, wantKey: "storage.tier", wantMsg: "allowed with storage.protocol nfs: Premium (or storage.protocol smb)"},
		{name: "unknown Azure Files protocol", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","protocol":"cifs"}`}, wantKey: "storage.protocol", wantMsg: "allowed: nfs, smb"},
		{name: "private endpoint for an SMB share", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetId":"` + azSubnet + `"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","protocol":"smb","privateEndpoint":true}`}, wantKey: "storage.privateEndpoint", wantMsg: "serves the NFS share (storage.protocol nfs, with cluster.subnetId); allowed with smb: false"},
		{name: "private endpoint outside Azure Files", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","privateEndpoint":true}`}, wantKey: "storage.privateEndpoint", wantMsg: "only for a share the stack creates"},
		{name: "private DNS zone without the endpoint", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetId":"` + azSubnet + `"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","privateDnsZoneId":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/dns/providers/Microsoft.Network/privateDnsZones/privatelink.file.core.windows.net"}`}, wantKey: "storage.privateDnsZoneId", wantMsg: "only with storage.privateEndpoint: true"},
		{name: "private DNS zone of another service", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","subnetId":"` + azSubnet + `"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","privateEndpoint":true,"privateDnsZoneId":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/dns/providers/Microsoft.Network/privateDnsZones/privatelink.blob.core.windows.net"}`}, wantKey: "storage.privateDnsZoneId", wantMsg: "allowed: the resource ID of a privatelink.file.core.windows.net zone"},
		{name: "protocol outside Azure Files", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","protocol":"nfs"}`}, wantKey: "storage.protocol", wantMsg: "only for storage.type azurefiles"},
		{name: "AKS service range Azure reserves", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","serviceCidr":"172.30.0.0/16"}`, "nodePools": aksPools}, wantKey: "cluster.serviceCidr", wantMsg: "overlaps 172.30.0.0/16, which AKS refuses"},
		{name: "AKS pod range with host bits", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","podCidr":"10.244.0.1/16"}`, "nodePools": aksPools}, wantKey: "cluster.podCidr", wantMsg: "allowed: an IPv4 network address from /8 to /24"},
		{name: "AKS pod range inside the service range", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","serviceCidr":"10.200.0.0/16","podCidr":"10.200.128.0/17"}`, "nodePools": aksPools}, wantKey: "cluster.podCidr", wantMsg: "overlaps cluster.serviceCidr 10.200.0.0/16"},
		{name: "VPC CIDR too small", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","vpcCidr":"10.0.0.0/24"}`}, wantKey: "cluster.vpcCidr", wantMsg: "allowed: an IPv4 CIDR from /16 to /20"},
		// Who reaches the clouds' control planes, GKE's maintenance window, Filestore's clients (clouds_access.go, storage_cloud.go).
		{name: "API server open to the IPv4 internet", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","authorizedNetworks":["203.0.113.0/24","0.0.0.0/0"]}`}, wantKey: "cluster.authorizedNetworks[1]", wantMsg: "opens it to the whole internet; allowed: /8 or narrower for IPv4, the networks allowed to reach the API server"},
		// One width rule for every CIDR that opens something: two halves of the internet were
		// accepted here (only /0 was refused) while sourceRanges refused them.
		{name: "API server open to half the internet", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","authorizedNetworks":["0.0.0.0/1","128.0.0.0/1"]}`}, wantKey: "cluster.authorizedNetworks[0]", wantMsg: "too broad: allowed: /8 or narrower for IPv4"},
		{name: "API server open to a /12 of IPv6", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","authorizedNetworks":["2001:db8::/12"]}`}, wantKey: "cluster.authorizedNetworks[0]", wantMsg: "/16 or narrower for IPv6"},
		{name: "Filestore open to a /4", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","clientRanges":["0.0.0.0/4"]}`}, wantKey: "storage.clientRanges[0]", wantMsg: "too broad"},
		{name: "API server open to the IPv6 internet", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","authorizedNetworks":["::/0"]}`}, wantKey: "cluster.authorizedNetworks[0]", wantMsg: "opens it to the whole internet"},
		{name: "authorized network not a CIDR", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","authorizedNetworks":["office"]}`, "nodePools": aksPools}, wantKey: "cluster.authorizedNetworks[0]", wantMsg: "not a CIDR; allowed: the networks allowed to reach the API server, e.g. your office's 203.0.113.0/24"},
		{name: "authorized network with host bits", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","authorizedNetworks":["203.0.113.7/24"]}`}, wantKey: "cluster.authorizedNetworks[0]", wantMsg: "allowed: 203.0.113.0/24"},
		{name: "authorized networks of a private EKS endpoint", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","privateEndpoint":true,"authorizedNetworks":["203.0.113.0/24"]}`}, wantKey: "cluster.authorizedNetworks", wantMsg: "no public endpoint for these to restrict"},
		{name: "maintenance window too short", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","maintenanceWindow":{"duration":"2h"}}`}, wantKey: "cluster.maintenanceWindow.duration", wantMsg: "allowed: whole minutes from 4h to 24h"},
		{name: "maintenance window too rare", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","maintenanceWindow":{"duration":"4h","days":["SU"]}}`}, wantKey: "cluster.maintenanceWindow", wantMsg: "gives GKE 16h in some 32 days, it needs at least 48h"},
		{name: "maintenance window day", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","maintenanceWindow":{"days":["SAT","SU"]}}`}, wantKey: "cluster.maintenanceWindow.days[0]", wantMsg: "allowed: MO, TU, WE, TH, FR, SA, SU"},
		{name: "maintenance window start", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","maintenanceWindow":{"start":"1am"}}`}, wantKey: "cluster.maintenanceWindow.start", wantMsg: "allowed: HH:MM in UTC"},
		{name: "maintenance window outside GKE", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","maintenanceWindow":{"start":"01:00"}}`}, wantKey: "cluster.maintenanceWindow", wantMsg: "only GKE's upgrades"},
		{name: "Filestore clients unknown on a custom network", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","network":"training"}`, "storage": `{"type":"filestore"}`}, wantKey: "storage.clientRanges", wantMsg: "required with cluster.network training"},
		{name: "Filestore open to every address", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","clientRanges":["0.0.0.0/0"]}`}, wantKey: "storage.clientRanges[0]", wantMsg: "opens it to the whole internet"},
		// The optional workloads (stacks/workloads/<key>).
		{name: "elastic min above max", set: map[string]string{"elastic": `{"enabled":true,"minNodes":3,"maxNodes":2}`}, wantKey: "elastic.minNodes", wantMsg: "more than elastic.maxNodes (2); allowed: 1..2"},
		{name: "elastic nodes outside min..max", set: map[string]string{"elastic": `{"enabled":true,"minNodes":1,"maxNodes":2,"nodes":3}`}, wantKey: "elastic.nodes", wantMsg: "allowed: 1..2"},
		{name: "etcd rendezvous without etcd", set: map[string]string{"towers": `{"enabled":false}`, "sentinels": `{"enabled":false}`, "elastic": `{"enabled":true,"rdzvBackend":"etcd-v2"}`}, wantKey: "elastic.rdzvBackend", wantMsg: "needs the etcd component"},
		{name: "unknown rendezvous backend", set: map[string]string{"elastic": `{"enabled":true,"rdzvBackend":"zookeeper"}`}, wantKey: "elastic.rdzvBackend", wantMsg: "allowed: c10d, etcd-v2, etcd"},
		{name: "elastic GPUs above a node's", set: map[string]string{"elastic": `{"enabled":true,"gpusPerNode":16}`}, wantKey: "elastic.gpusPerNode", wantMsg: "allowed: 1..8"},
		{name: "elastic on a CPU pool", set: map[string]string{"elastic": `{"enabled":true,"pool":"cpu","gpusPerNode":1}`}, wantKey: "elastic.pool", wantMsg: "CPU pool"},
		{name: "elastic typo", set: map[string]string{"elastic": `{"enabled":true,"maxNode":2}`}, wantKey: "elastic.maxNode", wantMsg: "allowed: enabled, minNodes, maxNodes"},
		{name: "GPU pods of two workloads overflow the pool", set: map[string]string{"elastic": `{"enabled":true}`}, wantKey: "nodePools[0].maxNodes", wantMsg: "towers 2×8, elastic 1×8"},
		{name: "even etcd member count", set: map[string]string{"etcd": `{"enabled":true,"members":2}`}, wantKey: "etcd.members", wantMsg: "even count"},
		{name: "etcd without the v2 API", set: map[string]string{"etcd": `{"enabled":true,"image":"quay.io/coreos/etcd:v3.6.0"}`}, wantKey: "etcd.image", wantMsg: "must be etcd 3.5.x"},
		{name: "etcd from another registry with a hash tag", set: map[string]string{"etcd": `{"enabled":true,"image":"example.com/kolotoc.local/etcd:98e957e15e76"}`}, wantKey: "etcd.image", wantMsg: "must be etcd 3.5.x"},
		{name: "etcd on a GPU pool", set: map[string]string{"etcd": `{"enabled":true,"pool":"gpu"}`}, wantKey: "etcd.pool", wantMsg: "GPU pool"},
		{name: "TF cluster without workers", set: map[string]string{"tfcluster": `{"enabled":true,"workers":{"count":0}}`}, wantKey: "tfcluster.workers.count", wantMsg: "needs at least one worker"},
		{name: "two TF evaluators", set: map[string]string{"tfcluster": `{"enabled":true,"evaluator":{"count":2}}`}, wantKey: "tfcluster.evaluator.count", wantMsg: "allowed: 0, 1"},
		{name: "built-in TF program without a chief", set: map[string]string{"tfcluster": `{"enabled":true,"chief":{"count":0}}`}, wantKey: "tfcluster.chief.count", wantMsg: "coordinates from the chief"},
		{name: "CPU TF task on a GPU pool", set: map[string]string{"tfcluster": `{"enabled":true,"ps":{"pool":"gpu"}}`}, wantKey: "tfcluster.ps.pool", wantMsg: "GPU pool"},
		{name: "monitoring without a Grafana password", set: map[string]string{"monitoring": `{"enabled":true}`}, wantKey: "grafanaPassword", wantMsg: "pulumi config set --secret kolotoc:grafanaPassword"},
		{name: "plaintext Grafana password", set: map[string]string{"monitoring": `{"enabled":true}`, "grafanaPassword": "correct-horse-battery"}, wantKey: "grafanaPassword", wantMsg: "must be a secret"},
		{name: "bad Prometheus retention", set: map[string]string{"monitoring": `{"enabled":true,"retention":"two weeks"}`}, wantKey: "monitoring.retention", wantMsg: "Prometheus duration"},
		{name: "monitoring on a GPU pool", set: map[string]string{"monitoring": `{"enabled":true,"pool":"gpu"}`}, wantKey: "monitoring.pool", wantMsg: "GPU pool"},
		// Least privilege (security.go) and the storage guard (guard.go).
		{name: "namespace too long for the GPU agents' namespace", set: map[string]string{"namespace": "kolotoc-" + strings.Repeat("x", 50)}, wantKey: "namespace", wantMsg: "at most 52 characters with GPU nodes"},
		{name: "more Dask processes than the policy's port range", set: map[string]string{"carriers": `{"workersPerCarrier":1001}`}, wantKey: "carriers.workersPerCarrier", wantMsg: "allowed: 1..1000"},
		{name: "allowReplace not a bool", set: map[string]string{"storage": `{"allowReplace":"yes"}`}, wantKey: "storage.allowReplace", wantMsg: "want true or false"},
		// The local real node: real pools, CPU towers, local storage, small requests.
		{name: "real pool outside the simulated cloud", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a"},{"name":"cpu","real":true}]`}, wantKey: "nodePools[1].real", wantMsg: "only with cloud simulated; allowed on existing: false"},
		{name: "real pool with GPUs", set: map[string]string{"nodePools": `[{"name":"gpu","real":true,"gpusPerNode":8,"gpuType":"nvidia-tesla-a100"},{"name":"cpu"}]`}, wantKey: "nodePools[0].gpusPerNode", wantMsg: "allowed with real: true: 0"},
		{name: "real pool with taints", set: map[string]string{"nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a"},{"name":"cpu","real":true,"taints":[{"key":"x","value":"y","effect":"NoSchedule"}]}]`}, wantKey: "nodePools[1].taints", wantMsg: "registers no Node"},
		{name: "more CPU towers than the pool holds", set: map[string]string{"towers": `{"pool":"cpu","gpusPerTower":0,"count":5}`}, wantKey: "towers.count", wantMsg: "allowed: 1..4"},
		{name: "local storage on a cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"local"}`}, wantKey: "storage.type", wantMsg: "a directory of one node"},
		{name: "protected in-cluster NFS", set: map[string]string{"storage": `{"type":"in-cluster-nfs","protect":true}`}, wantKey: "storage.protect", wantMsg: "allowed with in-cluster-nfs: false"},
		{name: "in-cluster NFS on a cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"in-cluster-nfs"}`}, wantKey: "storage.type", wantMsg: "erases every checkpoint; allowed on gcp: nfs, filestore"},
		{name: "no storage type on a cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{}`}, wantKey: "storage.type", wantMsg: "required on gcp"},
		{name: "protected local storage", set: map[string]string{"storage": `{"type":"local","protect":true}`}, wantKey: "storage.protect", wantMsg: "allowed with local: false"},
		{name: "unknown Jupyter UI", set: map[string]string{"entrypoint": `{"jupyterUI":"retro"}`}, wantKey: "entrypoint.jupyterUI", wantMsg: "allowed: lab, notebook"},
		{name: "entrypoint requests beyond its node", set: map[string]string{"entrypoint": `{"jupyterMemory":"64Gi"}`}, wantKey: "entrypoint.pool", wantMsg: "more than a node of pool \"cpu\""},
		{name: "bad sentinel CPU", set: map[string]string{"sentinels": `{"enabled":true,"cpu":"lots"}`}, wantKey: "sentinels.cpu", wantMsg: "quantity"},
		{name: "bad carrier CPU", set: map[string]string{"carriers": `{"cpu":"0"}`}, wantKey: "carriers.cpu", wantMsg: "not a positive CPU quantity"},
		{name: "launcher on a spot pool", set: map[string]string{"nodePools": `[{"name":"gpu","nodes":2,"machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n2-standard-16"},{"name":"cheap","machineType":"n2-standard-4","spot":true}]`, "towers": `{"launcherPool":"cheap"}`}, wantKey: "towers.launcherPool", wantMsg: `pool "cheap" is spot capacity (spot: true): the launcher coordinates the whole run, and a reclaimed node ends it; allowed: a CPU pool without spot: cpu`},
		{name: "launcher on the entrypoint's spot pool", set: map[string]string{"nodePools": `[{"name":"gpu","nodes":2,"machineType":"a2-highgpu-8g"},{"name":"cpu","machineType":"n2-standard-16","spot":true}]`}, wantKey: "towers.launcherPool", wantMsg: "(towers.launcherPool defaults to entrypoint.pool): the launcher coordinates the whole run, and a reclaimed node ends it; allowed: a CPU pool without spot, and nodePools declares none"},
		{name: "launcher on a GPU pool", set: map[string]string{"towers": `{"launcherPool":"gpu"}`}, wantKey: "towers.launcherPool", wantMsg: "is a GPU pool: the launcher requests no GPU and does not tolerate the GPU taint; allowed: a CPU pool without spot: cpu"},
		{name: "launcher pool not declared", set: map[string]string{"towers": `{"launcherPool":"ops"}`}, wantKey: "towers.launcherPool", wantMsg: "pool not declared in nodePools; declared: gpu, cpu"},
		// make fit's switch (fit.go): never on a stack with real infrastructure or a real node.
		{name: "fit on a cloud", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "fit": "true"}, wantKey: "fit", wantMsg: "allowed with cloud gcp: false"},
		{name: "fit on an existing cluster", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "fit": "true"}, wantKey: "fit", wantMsg: "allowed with cloud existing: false"},
		{name: "fit beside a real pool", set: map[string]string{"fit": "true", "nodePools": `[{"name":"gpu","gpusPerNode":8,"gpuType":"a","nodes":2},{"name":"cpu","real":true,"cpus":16,"memory":"64Gi"}]`}, wantKey: "nodePools[1].real", wantMsg: "allowed with kolotoc:fit: false"},
		{name: "fit not a bool", set: map[string]string{"fit": "1"}, wantKey: "fit", wantMsg: "want true or false"},
		{name: "launcher memory larger than its node", set: map[string]string{"towers": `{"launcherMemory":"1Ti"}`}, wantKey: "towers.launcherMemory", wantMsg: "more than a node of pool \"cpu\""},
		// Private registries (registries.go).
		{name: "registry without a password", set: map[string]string{"registries": `[{"server":"ghcr.io","username":"bot"}]`}, wantKey: `registryPasswords["ghcr.io"]`, wantMsg: `required for registries[0]: run ` + "`" + `pulumi config set --secret --path 'kolotoc:registryPasswords["ghcr.io"]'`},
		{name: "registry server with a scheme", set: map[string]string{"registries": `[{"server":"https://ghcr.io/","username":"bot"}]`, "registryPasswords": `{"https://ghcr.io/":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: "registries[0].server", wantMsg: "without a scheme; allowed: the host (and port or path) images name, e.g. ghcr.io"},
		{name: "registry server that is not a host", set: map[string]string{"registries": `[{"server":"myregistry","username":"bot"}]`, "registryPasswords": `{"myregistry":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: "registries[0].server", wantMsg: "not a registry host; allowed: a lower-case host with a dot"},
		{name: "registry named twice", set: map[string]string{"registries": `[{"server":"ghcr.io","username":"bot"},{"server":"ghcr.io","username":"other"}]`, "registryPasswords": `{"ghcr.io":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: "registries[1].server", wantMsg: "named twice"},
		{name: "Docker Hub named twice", set: map[string]string{"registries": `[{"server":"docker.io","username":"bot"},{"server":"index.docker.io","username":"bot"}]`, "registryPasswords": `{"docker.io":"hunter2-token","index.docker.io":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: "registries[1].server", wantMsg: "docker.io and index.docker.io are both Docker Hub"},
		{name: "registry without a user name", set: map[string]string{"registries": `[{"server":"ghcr.io"}]`, "registryPasswords": `{"ghcr.io":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: "registries[0].username", wantMsg: "required"},
		{name: "password of no registry", set: map[string]string{"registryPasswords": `{"ghcr.io":"hunter2-token"}`}, secret: []string{"registryPasswords"}, wantKey: `registryPasswords["ghcr.io"]`, wantMsg: "no registry of this server in kolotoc:registries"},
		{name: "plaintext registry passwords", set: map[string]string{"registries": `[{"server":"ghcr.io","username":"bot"}]`, "registryPasswords": `{"ghcr.io":"hunter2-token"}`}, plain: []string{"registryPasswords"}, wantKey: "registryPasswords", wantMsg: "must be a secret"},
		{name: "registry passwords not a map", set: map[string]string{"registryPasswords": "hunter2-token"}, secret: []string{"registryPasswords"}, wantKey: "registryPasswords", wantMsg: "not a JSON object of registry server to password or token"},
		{name: "ACR ID of another resource", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus","acrId":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml/providers/Microsoft.Storage/storageAccounts/images"}`, "nodePools": aksPools}, wantKey: "cluster.acrId", wantMsg: "not an Azure Container Registry resource ID; allowed: /subscriptions/<subscription id>/resourceGroups/<group>/providers/Microsoft.ContainerRegistry/registries/<name>"},
		{name: "ACR on gcp", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","acrId":"/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/ml/providers/Microsoft.ContainerRegistry/registries/mlimages"}`}, wantKey: "cluster.acrId", wantMsg: "only for cloud azure"},
		{name: "registry project not a project", set: map[string]string{"cloud": "gcp", "cluster": `{"region":"us-central1","zone":"us-central1-a","registryProjects":["Shared_Images"]}`}, wantKey: "cluster.registryProjects[0]", wantMsg: "not a GCP project ID"},
		{name: "registry projects on aws", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1","registryProjects":["shared-images"]}`}, wantKey: "cluster.registryProjects", wantMsg: "only for cloud gcp"},
		// Existing stores (storage_existing.go).
		{name: "EFS file system ID malformed", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","fileSystemId":"fs-checkpoints"}`}, wantKey: "storage.fileSystemId", wantMsg: "not an EFS file system ID; allowed: fs- and 8 or 17 hexadecimal digits"},
		{name: "EFS access point without its file system", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","accessPointId":"fsap-0123456789abcdef0"}`}, wantKey: "storage.accessPointId", wantMsg: "needs storage.fileSystemId"},
		{name: "EFS throughput of an existing file system", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","fileSystemId":"fs-0123456789abcdef0","tier":"bursting"}`}, wantKey: "storage.tier", wantMsg: "an existing file system keeps its own throughput mode"},
		// Where data lives (issue 33): EFS modes, the created share's name.
		{name: "EFS Max I/O with elastic throughput", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","performanceMode":"maxIO"}`}, wantKey: "storage.performanceMode", wantMsg: "EFS does not offer Max I/O with elastic throughput"},
		{name: "EFS unknown performance mode", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","performanceMode":"fast"}`}, wantKey: "storage.performanceMode", wantMsg: "allowed: generalPurpose, maxIO"},
		{name: "EFS provisioned without throughput", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","tier":"provisioned"}`}, wantKey: "storage.throughputMibps", wantMsg: "required with storage.tier provisioned: MiB/s; allowed: 1..3414"},
		{name: "EFS throughput without provisioned", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","throughputMibps":100}`}, wantKey: "storage.throughputMibps", wantMsg: "only with storage.tier provisioned"},
		{name: "EFS modes of an existing file system", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","fileSystemId":"fs-0123456789abcdef0","performanceMode":"maxIO"}`}, wantKey: "storage.performanceMode", wantMsg: "keeps its own modes"},
		{name: "performance mode off EFS", set: map[string]string{"storage": `{"type":"local","path":"/var/lib/x","performanceMode":"maxIO"}`}, wantKey: "storage.performanceMode", wantMsg: "for storage.type efs"},
		{name: "Azure share name bad", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","shareName":"TF_share"}`}, wantKey: "storage.shareName", wantMsg: "3-63 lower-case letters, digits and single hyphens"},
		{name: "share name off Azure", set: map[string]string{"storage": `{"type":"local","path":"/var/lib/x","shareName":"data"}`}, wantKey: "storage.shareName", wantMsg: "only for storage.type azurefiles"},
		{name: "new EFS on an existing cluster", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "storage": `{"type":"efs"}`}, wantKey: "storage.fileSystemId", wantMsg: "required with storage.type efs on cloud existing"},
		{name: "existing share without its account", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","share":"checkpoints","resourceGroup":"ml-data","protocol":"nfs"}`}, wantKey: "storage.account", wantMsg: "required with storage.share: the existing storage account the share is in"},
		{name: "existing share without its resource group", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","share":"checkpoints","account":"mldata","protocol":"nfs"}`}, wantKey: "storage.resourceGroup", wantMsg: "required with storage.share"},
		{name: "existing share without its protocol", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data"}`}, wantKey: "storage.protocol", wantMsg: "required with storage.share: the existing share's protocol; allowed: nfs"},
		{name: "existing SMB share without its key", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data","protocol":"smb"}`}, wantKey: "storageAccountKey", wantMsg: "required with an existing SMB share"},
		{name: "existing share name malformed", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "storage": `{"type":"azurefiles","share":"Check--Points","account":"mldata","resourceGroup":"ml-data","protocol":"nfs"}`}, wantKey: "storage.share", wantMsg: "not an Azure Files share name"},
		{name: "new Azure Files on an existing cluster", set: map[string]string{"cloud": "existing", "cluster": `{"kubeconfig":"/tmp/kubeconfig"}`, "storage": `{"type":"azurefiles"}`}, wantKey: "storage.share", wantMsg: "required with storage.type azurefiles on cloud existing"},
		{name: "storage account key without an existing share", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles"}`, "storageAccountKey": "hunter2-key"}, secret: []string{"storageAccountKey"}, wantKey: "storageAccountKey", wantMsg: "only for an existing SMB share"},
		// Cloud pools' names and replacement, and the stores' backups (clouds_recovery.go, storage_cloud.go).
		{name: "unknown pool replacement", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","replace":"surge"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].replace", wantMsg: "allowed: createFirst, deleteFirst"},
		{name: "pinned pool name created first", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","cloudName":"gpu","replace":"createFirst"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].replace", wantMsg: `the pinned cloudName "gpu" cannot exist twice, so the new pool cannot be created beside the old one; allowed with cloudName: deleteFirst`},
		{name: "GKE pool name malformed", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","cloudName":"GPU_Pool"},{"name":"cpu","machineType":"n2-standard-16"}]`}, wantKey: "nodePools[0].cloudName", wantMsg: "not a GKE node pool name; allowed: 1-40 lower-case letters, digits and '-'"},
		{name: "EKS node group name malformed", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "nodePools": `[{"name":"gpu","machineType":"p4d.24xlarge","cloudName":"-gpu"},{"name":"cpu","machineType":"m6i.4xlarge"}]`}, wantKey: "nodePools[0].cloudName", wantMsg: "not an EKS node group name; allowed: 1-63 letters"},
		{name: "AKS pool name with a dash", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","cloudName":"gpu-a100"},{"name":"cpu","machineType":"Standard_D16s_v5"}]`}, wantKey: "nodePools[0].cloudName", wantMsg: "not an AKS agent pool name; allowed: 1-12 lower-case letters and digits"},
		{name: "AKS pool pinned to the system pool", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","cloudName":"system"},{"name":"cpu","machineType":"Standard_D16s_v5"}]`}, wantKey: "nodePools[0].cloudName", wantMsg: `not "system"`},
		{name: "two pools pinned to one name", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "nodePools": `[{"name":"gpu","machineType":"a2-highgpu-8g","cloudName":"gpu"},{"name":"cpu","machineType":"n2-standard-16","cloudName":"gpu"}]`}, wantKey: "nodePools[1].cloudName", wantMsg: "duplicate: nodePools[0] has it"},
		{name: "Filestore backup", set: map[string]string{"cloud": "gcp", "cluster": gkeZonal, "storage": `{"type":"filestore","backup":{"enabled":true}}`}, wantKey: "storage.backup.enabled", wantMsg: "Kolotoc cannot schedule Filestore backups"},
		{name: "backup of an NFS server", set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","backup":{"enabled":true}}`}, wantKey: "storage.backup.enabled", wantMsg: "storage.type nfs is not a file store Kolotoc creates on a cloud; allowed: false"},
		{name: "backup of an existing EFS", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","fileSystemId":"fs-0123456789abcdef0","backup":{"enabled":true}}`}, wantKey: "storage.backup.enabled", wantMsg: "is not Kolotoc's: its backups are its owner's; allowed with it: false"},
		{name: "EFS backup retention", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","backup":{"enabled":true,"retentionDays":90}}`}, wantKey: "storage.backup.retentionDays", wantMsg: "AWS Backup's default plan (daily, kept 35 days); allowed with storage.type efs: unset"},
		{name: "share soft delete beyond a year", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","backup":{"enabled":true,"retentionDays":400}}`}, wantKey: "storage.backup.retentionDays", wantMsg: "allowed: 1..365"},
		{name: "backup retention without the backup", set: map[string]string{"cloud": "azure", "cluster": `{"region":"eastus"}`, "nodePools": aksPools, "storage": `{"type":"azurefiles","backup":{"retentionDays":14}}`}, wantKey: "storage.backup.retentionDays", wantMsg: "only with storage.backup.enabled: true"},
		{name: "mount option that is two", set: map[string]string{"storage": `{"type":"nfs","server":"10.0.0.2","mountOptions":["nfsvers=3,hard"]}`}, wantKey: "storage.mountOptions[0]", wantMsg: "not one NFS mount option"},
		{name: "mount options of a cloud store", set: map[string]string{"cloud": "aws", "cluster": `{"region":"us-east-1"}`, "storage": `{"type":"efs","mountOptions":["nfsvers=4.1"]}`}, wantKey: "storage.mountOptions", wantMsg: "only for storage.type nfs"},
	}
	if len(cases) < 20 {
		t.Fatalf("only %d bad configs; keep at least 20", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			raw := gpuRaw(t)
			for k, v := range tc.set {
				raw.Values["kolotoc:"+k] = v
			}
			for _, k := range tc.unset {
				delete(raw.Values, "kolotoc:"+k)
			}
			for _, k := range tc.plain {
				raw.Secrets["kolotoc:"+k] = false
			}
			for _, k := range tc.secret {
				raw.Secrets["kolotoc:"+k] = true
			}
			writeFuzzSeed(t, "bad-"+tc.name, raw) // FuzzLoad's corpus follows this table (fuzz_test.go)
			c, err := stacks.Load(raw)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			var ce *stacks.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError: %v", err, err)
			}
			for _, fe := range ce.Errors {
				if fe.Key == tc.wantKey && strings.Contains(fe.Msg, tc.wantMsg) {
					if !strings.Contains(err.Error(), "kolotoc:"+tc.wantKey) {
						t.Errorf("message does not name kolotoc:%s: %v", tc.wantKey, err)
					}
					secrets := []string{testPassword, testSeed, "hunter2"}
					if v, ok := tc.set["sshKeySeed"]; ok {
						secrets = append(secrets, v)
					}
					for _, secret := range secrets {
						if strings.Contains(err.Error(), secret) {
							t.Errorf("error message leaks a secret: %v", err)
						}
					}
					return
				}
			}
			t.Errorf("no error for key %s containing %q; got:\n%v", tc.wantKey, tc.wantMsg, err)
		})
	}
}

// TestEveryProblemAtOnce: a config with several mistakes reports all of them in one error.
func TestEveryProblemAtOnce(t *testing.T) {
	raw := devRaw(t)
	raw.Values["kolotoc:towers"] = `{"count":0,"image":"horovod/horovod"}`
	raw.Values["kolotoc:entrypoint"] = `{"serviceType":"LoadBalancer"}`
	delete(raw.Values, "kolotoc:sshKeySeed")
	_, err := stacks.Load(raw)
	var ce *stacks.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	want := []string{"kolotoc:towers.count", "kolotoc:towers.image", "kolotoc:entrypoint.sourceRanges", "kolotoc:sshKeySeed"}
	got := strings.Join(ce.Keys(), " ")
	for _, k := range want {
		if !strings.Contains(got, k) {
			t.Errorf("missing %s in %s", k, got)
		}
	}
}

// TestProblemsInPipelineOrder: the problems are listed in the order the checks run: the
// stack-wide keys (runAsUser), then each workload in the order they are registered (workloads.go:
// the towers, …, the data-in Job last), then what the workloads ask of a pool together (the GPU
// budget). Before the workloads were registered once, runAsUser came after the towers and the
// GPU budget before the data-in Job.
func TestProblemsInPipelineOrder(t *testing.T) {
	raw := gpuRaw(t)
	raw.Values["kolotoc:runAsUser"] = "-1"
	raw.Values["kolotoc:towers"] = `{"count":2,"gpusPerTower":8,"image":"horovod/horovod"}` // unpinned
	raw.Values["kolotoc:elastic"] = `{"enabled":true,"minNodes":2,"command":["python","train.py"]}`
	raw.Values["kolotoc:dataIn"] = `{"enabled":true,"image":"alpine:3.20","command":[""]}`
	_, err := stacks.Load(raw)
	var ce *stacks.ConfigError
	if !errors.As(err, &ce) {
		t.Fatalf("got %v", err)
	}
	got := ce.Keys()
	at := func(key string) int {
		i := slices.Index(got, key)
		if i < 0 {
			t.Fatalf("no problem with %s in %v", key, got)
		}
		return i
	}
	if !(at("kolotoc:runAsUser") < at("kolotoc:towers.image") && at("kolotoc:towers.image") < at("kolotoc:dataIn.command[0]") &&
		at("kolotoc:dataIn.command[0]") < at("kolotoc:nodePools[0].maxNodes")) {
		t.Errorf("problems out of the pipeline's order: %v", got)
	}
}

// TestCodeTransportsAccepted: authenticated transports on a cloud, git:// on the simulated one
// (the dev stack's demo repository) and anything pinned to a full commit.
func TestCodeTransportsAccepted(t *testing.T) {
	for _, tc := range []struct{ cloud, repo, ref string }{
		{stacks.CloudGCP, "https://github.com/team/train.git", "main"},
		{stacks.CloudAWS, "ssh://git@github.com/team/train.git", "main"},
		{stacks.CloudAzure, "git@github.com:team/train.git", "v1.2"},
		{stacks.CloudExisting, "git://git.example.com/train.git", "0123456789abcdef0123456789abcdef01234567"},
		{stacks.CloudSimulated, "git://10.213.0.2/demo.git", "main"},
	} {
		c := &stacks.Config{Cloud: tc.cloud, Code: stacks.Code{Repository: tc.repo, Ref: tc.ref}}
		v := &stacks.Validator{}
		if stacks.ValidateCodeTransport(c, v); len(v.Errors()) > 0 {
			t.Errorf("%s on %s refused: %v", tc.repo, tc.cloud, v.Errors())
		}
	}
}
