package tests

import (
	"encoding/json"
	"fmt"
	"testing"

	"kolotoc/stacks"
)

// TestGKEN1Pools: the old chart's n1-standard-4 is a CPU pool as it is, and an N1 machine with an
// attached T4 is a GPU pool: GKE attaches the accelerator with its driver, the nodes carry the
// GPU taint and labels, and the autoscaling bounds are the configured ones.
func TestGKEN1Pools(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "prod", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4","nodes":2,"minNodes":1,"maxNodes":4,"zones":["us-central1-a"]},` +
			`{"name":"cpu","machineType":"n1-standard-4","zones":["us-central1-a"]}]`,
		"towers": `{"count":2,"gpusPerTower":1,"pool":"gpu"}`,
	}))

	np := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	nc := get(np, "nodeConfig")
	if get(nc, "machineType") != "n1-standard-8" {
		t.Errorf("GPU pool machine type %v, want n1-standard-8", get(nc, "machineType"))
	}
	acc := get(nc, "guestAccelerators", "[0]")
	if get(acc, "type") != "nvidia-tesla-t4" || get(acc, "count") != 1.0 ||
		get(acc, "gpuDriverInstallationConfig", "gpuDriverVersion") != "DEFAULT" {
		t.Errorf("guest accelerators %v, want 1 × nvidia-tesla-t4 with GKE's DEFAULT driver", get(nc, "guestAccelerators"))
	}
	if !hasTaint(get(nc, "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") {
		t.Errorf("N1 GPU pool lacks taint nvidia.com/gpu=present:NoSchedule: %v", get(nc, "taints"))
	}
	if get(nc, "labels", "nvidia.com/gpu.product") != "nvidia-tesla-t4" || get(nc, "labels", "nvidia.com/gpu.present") != "true" {
		t.Errorf("N1 GPU pool labels %v, want nvidia.com/gpu.product=nvidia-tesla-t4", get(nc, "labels"))
	}
	if get(np, "autoscaling", "minNodeCount") != 1.0 || get(np, "autoscaling", "maxNodeCount") != 4.0 || get(np, "initialNodeCount") != 2.0 {
		t.Errorf("autoscaling %v initial %v, want 1..4 from 2", get(np, "autoscaling"), get(np, "initialNodeCount"))
	}

	cpu := get(inputs(rec.one(t, tGKENodePool, "cluster-cpu")), "nodeConfig")
	if get(cpu, "machineType") != "n1-standard-4" || get(cpu, "guestAccelerators") != nil || get(cpu, "taints") != nil {
		t.Errorf("CPU pool: machine type %v accelerators %v taints %v, want a plain n1-standard-4",
			get(cpu, "machineType"), get(cpu, "guestAccelerators"), get(cpu, "taints"))
	}

	// The towers ask for the attached GPU and tolerate its taint.
	tower := get(inputs(rec.one(t, tStatefulSet, "towers")), "spec", "template", "spec")
	if get(tower, "containers", "[0]", "resources", "limits", "nvidia.com/gpu") != "1" {
		t.Errorf("towers do not request the pool's one GPU: %v", get(tower, "containers", "[0]", "resources"))
	}
}

// TestEKSP3: p3.2xlarge is a GPU node group as it is: the NVIDIA AMI, the GPU taint, and the V100
// named as every cloud names it.
func TestEKSP3(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", map[string]string{
		"nodePools": `[{"name":"gpu","machineType":"p3.2xlarge","nodes":2,"maxNodes":4},{"name":"cpu","machineType":"m6i.4xlarge"}]`,
		"towers":    `{"count":2,"gpusPerTower":1,"pool":"gpu"}`,
	}))
	ng := inputs(rec.one(t, tEKSNodeGroup, "cluster-gpu"))
	if fmt.Sprint(get(ng, "instanceTypes")) != "[p3.2xlarge]" || get(ng, "amiType") != "AL2023_x86_64_NVIDIA" {
		t.Errorf("P3 node group: types %v ami %v", get(ng, "instanceTypes"), get(ng, "amiType"))
	}
	if !hasTaint(get(ng, "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") ||
		get(ng, "labels", "nvidia.com/gpu.product") != stacks.GPUV100 || get(ng, "labels", "nvidia.com/gpu.present") != "true" {
		t.Errorf("P3 node group taints %v labels %v, want the GPU taint and nvidia.com/gpu.product=%s", get(ng, "taints"), get(ng, "labels"), stacks.GPUV100)
	}
	if sc := get(ng, "scalingConfig"); get(sc, "minSize") != 2.0 || get(sc, "maxSize") != 4.0 {
		t.Errorf("P3 node group scaling %v, want 2..4", sc)
	}
}

// customPools adds, to each cloud stack's own pools, a pool of a machine type the catalogue does
// not know, its shape given in config: a CPU shape on GCP, GPU shapes on AWS and Azure.
var customPools = []struct {
	stack, pools         string
	machineType, gpuType string
	cpus, gpus           int
	memory               string
}{
	{stack: "prod", machineType: "n2d-custom-8-32768", cpus: 8, memory: "32Gi",
		pools: `[{"name":"gpu","machineType":"a2-highgpu-8g","nodes":8,"zones":["us-central1-a"]},{"name":"cpu","machineType":"n2-standard-32","nodes":2,"maxNodes":4,"zones":["us-central1-a"]},` +
			`{"name":"custom","machineType":"n2d-custom-8-32768","cpus":8,"memory":"32Gi","nodes":2,"zones":["us-central1-a"]}]`},
	{stack: "aws", machineType: "g6e.xlarge", cpus: 4, memory: "32Gi", gpus: 1, gpuType: "nvidia-l40s",
		pools: `[{"name":"gpu","machineType":"p4d.24xlarge","nodes":2,"maxNodes":4},{"name":"cpu","machineType":"m6i.4xlarge","maxNodes":3,"spot":true},{"name":"ops","machineType":"m6i.large"},` +
			`{"name":"custom","machineType":"g6e.xlarge","cpus":4,"memory":"32Gi","gpusPerNode":1,"gpuType":"nvidia-l40s","nodes":2}]`},
	{stack: "azure", machineType: "Standard_NC40ads_H100_v5", cpus: 40, memory: "320Gi", gpus: 1, gpuType: "nvidia-h100-80gb",
		pools: `[{"name":"gpu","machineType":"Standard_ND96asr_v4","nodes":2,"maxNodes":4},{"name":"cpu","machineType":"Standard_D16s_v5","maxNodes":3},` +
			`{"name":"custom","machineType":"Standard_NC40ads_H100_v5","cpus":40,"memory":"320Gi","gpusPerNode":1,"gpuType":"nvidia-h100-80gb","nodes":2}]`},
}

// TestCustomMachineTypes: on every cloud a machine type outside the catalogue is a pool when its
// shape is given: the cloud gets that machine type (with GKE's accelerators, the NVIDIA AMI, the
// GPU taint where it has GPUs), and the same stack on the simulated cloud has Nodes of exactly the
// configured capacity.
func TestCustomMachineTypes(t *testing.T) {
	for _, c := range customPools {
		t.Run(c.stack, func(t *testing.T) {
			if _, ok := stacks.LookupMachineType(map[string]string{"prod": stacks.CloudGCP, "aws": stacks.CloudAWS, "azure": stacks.CloudAzure}[c.stack], c.machineType); ok {
				t.Fatalf("%s is in the catalogue; the test needs a type outside it", c.machineType)
			}
			rec := deploy(t, cloudRaw(t, c.stack, map[string]string{"nodePools": c.pools}))
			var machine, taints, labels any
			switch c.stack {
			case "prod":
				nc := get(inputs(rec.one(t, tGKENodePool, "cluster-custom")), "nodeConfig")
				machine, taints, labels = get(nc, "machineType"), get(nc, "taints"), get(nc, "labels")
				if get(nc, "guestAccelerators") != nil {
					t.Errorf("CPU shape got accelerators: %v", get(nc, "guestAccelerators"))
				}
			case "aws":
				ng := inputs(rec.one(t, tEKSNodeGroup, "cluster-custom"))
				machine, taints, labels = get(ng, "instanceTypes", "[0]"), get(ng, "taints"), get(ng, "labels")
				if get(ng, "amiType") != "AL2023_x86_64_NVIDIA" {
					t.Errorf("GPU shape on %v, want the NVIDIA AMI", get(ng, "amiType"))
				}
			case "azure":
				ap := inputs(rec.one(t, tAgentPool, "cluster-custom"))
				machine, labels = get(ap, "vmSize"), get(ap, "nodeLabels")
				if !containsString(get(ap, "nodeTaints"), "nvidia.com/gpu=present:NoSchedule") {
					t.Errorf("GPU shape lacks the GPU taint: %v", get(ap, "nodeTaints"))
				}
			}
			if machine != c.machineType {
				t.Errorf("machine type %v, want %s", machine, c.machineType)
			}
			if c.gpus > 0 {
				if get(labels, "nvidia.com/gpu.product") != c.gpuType {
					t.Errorf("labels %v, want nvidia.com/gpu.product=%s", labels, c.gpuType)
				}
				if c.stack == "aws" && !hasTaint(taints, "nvidia.com/gpu", "present", "NO_SCHEDULE") {
					t.Errorf("GPU shape lacks the GPU taint: %v", taints)
				}
			} else if taints != nil {
				t.Errorf("CPU shape is tainted: %v", taints)
			}

			// The same stack on the simulated cloud: Nodes of the configured shape.
			raw := mirroredRaw(t, c.stack, map[string]string{"nodePools": c.pools})
			want := map[string]string{"cpu": fmt.Sprint(c.cpus), "memory": c.memory}
			if c.gpus > 0 {
				want["nvidia.com/gpu"] = fmt.Sprint(c.gpus)
			}
			n := 0
			for _, node := range deploy(t, raw).simulatedNodes() {
				md := get(inputs(node), "metadata")
				if get(md, "labels", "kolotoc.dev/pool") != "custom" {
					continue
				}
				n++
				var capacity map[string]string
				_ = json.Unmarshal([]byte(get(md, "annotations", "kolotoc.dev/simulated-capacity").(string)), &capacity)
				for k, v := range want {
					if capacity[k] != v {
						t.Errorf("simulated node %s: capacity %s = %q, want %q (the configured shape)", node.Name, k, capacity[k], v)
					}
				}
				if get(md, "labels", "node.kubernetes.io/instance-type") != c.machineType {
					t.Errorf("simulated node %s labels %v, want instance-type %s", node.Name, get(md, "labels"), c.machineType)
				}
			}
			if n != 2 {
				t.Errorf("%d simulated nodes of the custom pool, want 2", n)
			}
		})
	}
}
