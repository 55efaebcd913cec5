package stacks_test

import (
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	"kolotoc/stacks/clouds/gcp"
	_ "kolotoc/stacks/workloads"
	"testing"
)

// TestMachineShapes: what a pool is, once loaded, for machine types the catalogue knows (figures
// filled from it, smaller cpus/memory kept), N1 machines with attached GPUs, and machine types it
// does not know (the configured shape stands).
func TestMachineShapes(t *testing.T) {
	for _, tc := range []struct {
		name, cloud, cluster, pool string
		want                       stacks.NodePool // the fields compared: CPUs, Memory, GPUsPerNode, GPUType, GPUDriver
	}{
		{name: "the old chart's default", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n1-standard-4"}`,
			want: stacks.NodePool{CPUs: 4, Memory: "15Gi"}},
		{name: "N1 in MiB", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n1-highcpu-2"}`,
			want: stacks.NodePool{CPUs: 2, Memory: "1843Mi"}},
		{name: "N1 with a T4", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4"}`,
			want: stacks.NodePool{CPUs: 8, Memory: "30Gi", GPUsPerNode: 1, GPUType: stacks.GPUT4, GPUDriver: gcp.GKEDriverDefault}},
		{name: "N1 with eight V100s", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n1-highmem-96","gpusPerNode":8,"gpuType":"nvidia-tesla-v100","gpuDriver":"LATEST"}`,
			want: stacks.NodePool{CPUs: 96, Memory: "624Gi", GPUsPerNode: 8, GPUType: stacks.GPUV100, GPUDriver: gcp.GKEDriverLatest}},
		{name: "N1 with a T4 mirrored", cloud: stacks.CloudSimulated, pool: `{"name":"extra","machineType":"n1-standard-8","gpusPerNode":1,"gpuType":"nvidia-tesla-t4"}`,
			want: stacks.NodePool{CPUs: 8, Memory: "30Gi", GPUsPerNode: 1, GPUType: stacks.GPUT4}},
		{name: "P3", cloud: stacks.CloudAWS, cluster: `{"region":"us-east-1"}`, pool: `{"name":"extra","machineType":"p3.2xlarge"}`,
			want: stacks.NodePool{CPUs: 8, Memory: "61Gi", GPUsPerNode: 1, GPUType: stacks.GPUV100}},
		{name: "P3dn", cloud: stacks.CloudAWS, cluster: `{"region":"us-east-1"}`, pool: `{"name":"extra","machineType":"p3dn.24xlarge"}`,
			want: stacks.NodePool{CPUs: 96, Memory: "768Gi", GPUsPerNode: 8, GPUType: stacks.GPUV100_32}},
		// The rule for catalogued types: GPUs as the catalogue says, cpus and memory at most the
		// machine's (a smaller figure stands, e.g. to leave room for system daemons).
		{name: "catalogued type described smaller", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n2-standard-16","cpus":12,"memory":"60Gi"}`,
			want: stacks.NodePool{CPUs: 12, Memory: "60Gi"}},
		{name: "custom CPU shape", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"n2d-custom-8-32768","cpus":8,"memory":"32Gi"}`,
			want: stacks.NodePool{CPUs: 8, Memory: "32Gi"}},
		{name: "custom GPU shape", cloud: stacks.CloudAWS, cluster: `{"region":"us-east-1"}`, pool: `{"name":"extra","machineType":"g6e.12xlarge","cpus":48,"memory":"384Gi","gpusPerNode":4,"gpuType":"nvidia-l40s"}`,
			want: stacks.NodePool{CPUs: 48, Memory: "384Gi", GPUsPerNode: 4, GPUType: "nvidia-l40s"}},
		{name: "custom GPU shape on GKE", cloud: stacks.CloudGCP, cluster: gkeZonal, pool: `{"name":"extra","machineType":"a3-megagpu-8g","cpus":208,"memory":"1872Gi","gpusPerNode":8,"gpuType":"nvidia-h100-mega-80gb"}`,
			want: stacks.NodePool{CPUs: 208, Memory: "1872Gi", GPUsPerNode: 8, GPUType: "nvidia-h100-mega-80gb", GPUDriver: gcp.GKEDriverDefault}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := gpuRaw(t)
			raw.Values["kolotoc:cloud"] = tc.cloud
			pools := map[string]string{
				stacks.CloudGCP:       `{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2},{"name":"cpu","machineType":"n2-standard-16"}`,
				stacks.CloudSimulated: `{"name":"gpu","machineType":"a2-highgpu-8g","nodes":2},{"name":"cpu","machineType":"n2-standard-16"}`,
				stacks.CloudAWS:       `{"name":"gpu","machineType":"p4d.24xlarge","nodes":2},{"name":"cpu","machineType":"m6i.4xlarge"}`,
			}[tc.cloud]
			raw.Values["kolotoc:nodePools"] = "[" + pools + "," + tc.pool + "]"
			if tc.cluster != "" {
				raw.Values["kolotoc:cluster"] = tc.cluster
			}
			if stacks.IsCloud(tc.cloud) {
				raw.Values["kolotoc:storage"] = `{"type":"nfs","server":"10.0.0.2"}`
			}
			c, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pool("extra")
			got := stacks.NodePool{CPUs: p.CPUs, Memory: p.Memory, GPUsPerNode: p.GPUsPerNode, GPUType: p.GPUType, GPUDriver: p.GPUDriver}
			if got.CPUs != tc.want.CPUs || got.Memory != tc.want.Memory || got.GPUsPerNode != tc.want.GPUsPerNode ||
				got.GPUType != tc.want.GPUType || got.GPUDriver != tc.want.GPUDriver {
				t.Errorf("pool %+v, want %+v", got, tc.want)
			}
		})
	}
}
