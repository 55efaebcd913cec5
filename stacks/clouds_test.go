package stacks_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"kolotoc/stacks"
	_ "kolotoc/stacks/clouds"
	"kolotoc/stacks/clouds/aws"
	"kolotoc/stacks/clouds/azure"
	"kolotoc/stacks/clouds/gcp"
	_ "kolotoc/stacks/workloads"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/eks"
	"kolotoc/components/storage"
)

// Config values shared by the cloud cases of TestBadConfigs.
const (
	gkeZonal = `{"region":"us-central1","zone":"us-central1-a"}`
	aksPools = `[{"name":"gpu","machineType":"Standard_ND96asr_v4"},{"name":"cpu","machineType":"Standard_D16s_v5"}]`
	azSubnet = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/network/providers/Microsoft.Network/virtualNetworks/training/subnets/aks"
)

// exampleRaw reads a committed cloud stack file with its secrets set.
func exampleRaw(t *testing.T, path, stack string) stacks.Raw {
	t.Helper()
	raw, err := stacks.ReadStackFile(path, "kolotoc", stack, "")
	if err != nil {
		t.Fatal(err)
	}
	raw.Values["kolotoc:jupyterPassword"] = testPassword
	raw.Values["kolotoc:sshKeySeed"] = testSeed
	raw.Secrets["kolotoc:jupyterPassword"] = true
	raw.Secrets["kolotoc:sshKeySeed"] = true
	return raw
}

var cloudFiles = []struct{ path, stack, cloud, storage string }{
	{"../Pulumi.prod.yaml", "prod", stacks.CloudGCP, storage.TypeFilestore},
	{"../examples/aws/Pulumi.aws.yaml", "aws", stacks.CloudAWS, storage.TypeEFS},
	{"../examples/azure/Pulumi.azure.yaml", "azure", stacks.CloudAzure, storage.TypeAzureFiles},
}

// TestExampleStacksLoad: the ready-to-copy stack files load and validate as they are, and
// defaulting them again changes nothing.
func TestExampleStacksLoad(t *testing.T) {
	for _, f := range cloudFiles {
		t.Run(f.stack, func(t *testing.T) {
			c, err := stacks.Load(exampleRaw(t, f.path, f.stack))
			if err != nil {
				t.Fatal(err)
			}
			if c.Cloud != f.cloud || c.Storage.Type != f.storage || !c.Storage.Protect {
				t.Errorf("cloud %s storage %s protect %v", c.Cloud, c.Storage.Type, c.Storage.Protect)
			}
			if c.Towers.GPUsPerTower != 8 || c.Pool(c.Towers.Pool).GPUsPerNode != 8 {
				t.Errorf("towers: %d GPUs each on a pool of %d-GPU nodes, want 8 and 8", c.Towers.GPUsPerTower, c.Pool(c.Towers.Pool).GPUsPerNode)
			}
			again := *c
			stacks.ApplyDefaults(&again)
			if !reflect.DeepEqual(&again, c) {
				t.Errorf("applyDefaults is not idempotent on %s", f.stack)
			}
		})
	}
}

// TestCloudDefaults: what the cloud stacks get without saying it.
func TestCloudDefaults(t *testing.T) {
	prod, err := stacks.Load(exampleRaw(t, "../Pulumi.prod.yaml", "prod"))
	if err != nil {
		t.Fatal(err)
	}
	gpu := prod.Pool("gpu")
	if gpu.CPUs != 96 || gpu.Memory != "680Gi" || gpu.GPUsPerNode != 8 || gpu.GPUType != stacks.GPUA100 {
		t.Errorf("a2-highgpu-8g pool not filled from the catalogue: %+v", *gpu)
	}
	if prod.Storage.Zone != "us-central1-a" || prod.Cluster.ReleaseChannel != "REGULAR" || prod.Cluster.Network != "default" {
		t.Errorf("storage zone %q channel %q network %q", prod.Storage.Zone, prod.Cluster.ReleaseChannel, prod.Cluster.Network)
	}
	if *prod.DevicePlugin.Enabled {
		t.Error("device plugin on GKE, which runs its own")
	}

	onAWS, err := stacks.Load(exampleRaw(t, "../examples/aws/Pulumi.aws.yaml", "aws"))
	if err != nil {
		t.Fatal(err)
	}
	if onAWS.Cluster.VPCCIDR != aws.DefaultVPCCIDR || onAWS.Storage.Tier != aws.EFSElastic || !*onAWS.DevicePlugin.Enabled {
		t.Errorf("aws: vpc %q tier %q device plugin %v", onAWS.Cluster.VPCCIDR, onAWS.Storage.Tier, *onAWS.DevicePlugin.Enabled)
	}

	az, err := stacks.Load(exampleRaw(t, "../examples/azure/Pulumi.azure.yaml", "azure"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^kolotocazure[0-9a-f]{8}$`).MatchString(az.Storage.Account) {
		t.Errorf("derived storage account %q", az.Storage.Account)
	}
	if other := azure.DefaultStorageAccount("kolotoc", "azure2", az.Cluster.Name); other == az.Storage.Account {
		t.Error("two stacks derive the same storage account name")
	}
	if az.Cluster.SystemVMSize != azure.DefaultSystemVMSize || az.Cluster.SystemNodes != 1 {
		t.Errorf("system pool %s × %d", az.Cluster.SystemVMSize, az.Cluster.SystemNodes)
	}
}

// TestAzureFilesProtocolDefault: NFS wherever it can run (a subnet of one's own), SMB without a
// subnet, as every azure stack was before; a named protocol stands. The storage guard records it,
// and reads an update by an older version, which recorded none, as smb.
func TestAzureFilesProtocolDefault(t *testing.T) {
	const subnet = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/n/providers/Microsoft.Network/virtualNetworks/v/subnets/s"
	configs := map[string]*stacks.Config{}
	for _, tc := range []struct {
		name, cluster, storage, want string
	}{
		{"subnet", `{"region":"eastus","subnetId":"` + subnet + `"}`, `{"type":"azurefiles"}`, azure.AzureFilesNFS},
		{"no subnet", `{"region":"eastus"}`, `{"type":"azurefiles"}`, azure.AzureFilesSMB},
		{"smb named with a subnet", `{"region":"eastus","subnetId":"` + subnet + `"}`, `{"type":"azurefiles","protocol":"smb"}`, azure.AzureFilesSMB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := exampleRaw(t, "../examples/azure/Pulumi.azure.yaml", "azure")
			raw.Values["kolotoc:cluster"], raw.Values["kolotoc:storage"] = tc.cluster, tc.storage
			c, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			if c.Storage.Protocol != tc.want {
				t.Errorf("storage.protocol %q, want %q", c.Storage.Protocol, tc.want)
			}
			if got := stacks.StorageIdentity(c)["storage.protocol"]; got != tc.want {
				t.Errorf("storage identity records protocol %q, want %q", got, tc.want)
			}
			configs[tc.name] = c
		})
	}
	smb, nfs := configs["no subnet"], configs["subnet"]
	if smb == nil || nfs == nil {
		t.FailNow()
	}
	smb.Storage.Protect, nfs.Storage.Protect = true, true
	// An SMB share deployed by an older version, which recorded no protocol, is still SMB.
	older := stacks.RecordedIdentity(smb, nil)
	delete(older, "storage.protocol")
	if err := stacks.CheckStorageReplacement(smb, older); err != nil {
		t.Errorf("an older version's SMB share read as changed: %v", err)
	}
	// A protected SMB share becomes NFS: a new share, the checkpoints left behind; refused.
	for name, previous := range map[string]map[string]string{"recorded": stacks.RecordedIdentity(smb, nil), "older": older} {
		err := stacks.CheckStorageReplacement(nfs, previous)
		var ce *stacks.ConfigError
		if !errors.As(err, &ce) || len(ce.Errors) != 1 || ce.Errors[0].Key != "storage.protocol" || !strings.Contains(ce.Errors[0].Msg, "was smb") {
			t.Errorf("%s: smb to nfs on protected storage: %v, want storage.protocol refused", name, err)
		}
	}
}

// TestCatalogue: the figures users size their pools by, checked against the providers' tables.
func TestCatalogue(t *testing.T) {
	want := []stacks.MachineType{
		{Name: "a2-highgpu-1g", Cloud: stacks.CloudGCP, GPUs: 1, GPUType: stacks.GPUA100, VCPUs: 12, MemoryMi: 85 * 1024},
		{Name: "a2-highgpu-8g", Cloud: stacks.CloudGCP, GPUs: 8, GPUType: stacks.GPUA100, VCPUs: 96, MemoryMi: 680 * 1024},
		{Name: "a2-ultragpu-8g", Cloud: stacks.CloudGCP, GPUs: 8, GPUType: stacks.GPUA100_80, VCPUs: 96, MemoryMi: 1360 * 1024},
		{Name: "a3-highgpu-8g", Cloud: stacks.CloudGCP, GPUs: 8, GPUType: stacks.GPUH100_80, VCPUs: 208, MemoryMi: 1872 * 1024},
		{Name: "g2-standard-24", Cloud: stacks.CloudGCP, GPUs: 2, GPUType: stacks.GPUL4, VCPUs: 24, MemoryMi: 96 * 1024},
		{Name: "g2-standard-96", Cloud: stacks.CloudGCP, GPUs: 8, GPUType: stacks.GPUL4, VCPUs: 96, MemoryMi: 384 * 1024},
		{Name: "p4d.24xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUA100, VCPUs: 96, MemoryMi: 1152 * 1024, EFAs: 4, EFARDMA: true},
		{Name: "p5.48xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUH100_80, VCPUs: 192, MemoryMi: 2048 * 1024, EFAs: 32, EFARDMA: true},
		// P5e, P5en (H200 141 GB) and P6-B200: EC2 "Elastic Fabric Adapter", Supported instance
		// types (EFA with RDMA read and write: p5e on Nitro v4, p5en v5, p6-b200 v6); network
		// cards, one EFA each (EC2 User Guide, "Elastic network interfaces", Network cards):
		// p5e 32, p5en 16, p6-b200 8.
		{Name: "p5e.48xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUH200, VCPUs: 192, MemoryMi: 2048 * 1024, EFAs: 32, EFARDMA: true},
		{Name: "p5en.48xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUH200, VCPUs: 192, MemoryMi: 2048 * 1024, EFAs: 16, EFARDMA: true},
		{Name: "p6-b200.48xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUB200, VCPUs: 192, MemoryMi: 2048 * 1024, EFAs: 8, EFARDMA: true},
		{Name: "g5.12xlarge", Cloud: stacks.CloudAWS, GPUs: 4, GPUType: stacks.GPUA10G, VCPUs: 48, MemoryMi: 192 * 1024, EFAs: 1},
		{Name: "g6.48xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUL4, VCPUs: 192, MemoryMi: 768 * 1024, EFAs: 1},
		{Name: "Standard_NC24ads_A100_v4", Cloud: stacks.CloudAzure, GPUs: 1, GPUType: stacks.GPUA100_80, VCPUs: 24, MemoryMi: 220 * 1024},
		{Name: "Standard_NC96ads_A100_v4", Cloud: stacks.CloudAzure, GPUs: 4, GPUType: stacks.GPUA100_80, VCPUs: 96, MemoryMi: 880 * 1024},
		{Name: "Standard_ND96asr_v4", Cloud: stacks.CloudAzure, GPUs: 8, GPUType: stacks.GPUA100, VCPUs: 96, MemoryMi: 900 * 1024},
		{Name: "Standard_NC64as_T4_v3", Cloud: stacks.CloudAzure, GPUs: 4, GPUType: stacks.GPUT4, VCPUs: 64, MemoryMi: 440 * 1024},
		// N1 (GPUs attached, not built in), memory as GCP's machineTypes API reports memoryMb.
		{Name: "n1-standard-1", Cloud: stacks.CloudGCP, VCPUs: 1, MemoryMi: 3840, Attach: true},
		{Name: "n1-standard-4", Cloud: stacks.CloudGCP, VCPUs: 4, MemoryMi: 15 * 1024, Attach: true},
		{Name: "n1-standard-96", Cloud: stacks.CloudGCP, VCPUs: 96, MemoryMi: 360 * 1024, Attach: true},
		{Name: "n1-highmem-2", Cloud: stacks.CloudGCP, VCPUs: 2, MemoryMi: 13312, Attach: true},
		{Name: "n1-highmem-96", Cloud: stacks.CloudGCP, VCPUs: 96, MemoryMi: 624 * 1024, Attach: true},
		{Name: "n1-highcpu-2", Cloud: stacks.CloudGCP, VCPUs: 2, MemoryMi: 1843, Attach: true},
		{Name: "n1-highcpu-8", Cloud: stacks.CloudGCP, VCPUs: 8, MemoryMi: 7373, Attach: true},
		{Name: "n1-highcpu-96", Cloud: stacks.CloudGCP, VCPUs: 96, MemoryMi: 88474, Attach: true},
		{Name: "p3.2xlarge", Cloud: stacks.CloudAWS, GPUs: 1, GPUType: stacks.GPUV100, VCPUs: 8, MemoryMi: 61 * 1024},
		{Name: "p3.8xlarge", Cloud: stacks.CloudAWS, GPUs: 4, GPUType: stacks.GPUV100, VCPUs: 32, MemoryMi: 244 * 1024},
		{Name: "p3.16xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUV100, VCPUs: 64, MemoryMi: 488 * 1024},
		{Name: "p3dn.24xlarge", Cloud: stacks.CloudAWS, GPUs: 8, GPUType: stacks.GPUV100_32, VCPUs: 96, MemoryMi: 768 * 1024, EFAs: 1},
	}
	// EFAs: AWS's EFA "Supported instance types" and each type's maximumEfaInterfaces (EC2
	// DescribeInstanceTypes, EfaInfo); GPUDirect RDMA on P4d, P4de and P5.
	for _, w := range want {
		if got, ok := stacks.LookupMachineType(w.Cloud, w.Name); !ok || got != w {
			t.Errorf("%s: got %+v, want %+v", w.Name, got, w)
		}
	}
	for _, cloud := range []string{stacks.CloudGCP, stacks.CloudAWS, stacks.CloudAzure} {
		for _, m := range stacks.MachineTypes(cloud) {
			if m.VCPUs < 1 || m.MemoryMi < 1 || (m.GPUs > 0) != (m.GPUType != "") || (m.Attach && (m.GPUs > 0 || cloud != stacks.CloudGCP)) ||
				(m.EFAs > 0 && (cloud != stacks.CloudAWS || m.GPUs == 0)) || (m.EFARDMA && m.EFAs == 0) {
				t.Errorf("%s %s: %+v", cloud, m.Name, m)
			}
		}
	}
}

// TestCloudOutputsSecret: the kubeconfig a cloud exports as a stack output is a secret.
func TestCloudOutputsSecret(t *testing.T) {
	for _, f := range cloudFiles {
		t.Run(f.stack, func(t *testing.T) {
			c, err := stacks.Load(exampleRaw(t, f.path, f.stack))
			if err != nil {
				t.Fatal(err)
			}
			var secret, plainName bool
			err = pulumi.RunErr(func(ctx *pulumi.Context) error {
				_, _, res, err := stacks.DeployCloud(ctx, c)
				if err != nil {
					return err
				}
				out := stacks.CloudExports(res)
				secret = pulumi.IsSecret(out["kubeconfig"].(pulumi.StringOutput))
				_, plainName = out["clusterName"].(pulumi.String)
				return nil
			}, pulumi.WithMocks("kolotoc", f.stack, &cloudMocks{}))
			if err != nil {
				t.Fatal(err)
			}
			if !secret {
				t.Error("the kubeconfig output is not a secret")
			}
			if !plainName {
				t.Error("clusterName output missing")
			}
		})
	}
}

// cloudMocks answers registrations with their inputs and the invokes with plausible results.
type cloudMocks struct{}

func (m *cloudMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	return args.Name + "-id", args.Inputs, nil
}

func (m *cloudMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	switch args.Token {
	case "aws:index/getAvailabilityZones:getAvailabilityZones":
		return resource.NewPropertyMapFromMap(map[string]any{"names": []any{"us-east-1a", "us-east-1b"}}), nil
	case "azure-native:containerservice:listManagedClusterUserCredentials":
		// A kubeconfig with its cluster's CA, which the AKS kubeconfig keeps.
		return resource.NewPropertyMapFromMap(map[string]any{"kubeconfigs": []any{map[string]any{"name": "u", "value": "Y2x1c3RlcnM6IFt7bmFtZTogYywgY2x1c3Rlcjoge2NlcnRpZmljYXRlLWF1dGhvcml0eS1kYXRhOiBRMEU9fX1dCg=="}}}), nil
	case "azure-native:authorization:getClientConfig":
		return resource.NewPropertyMapFromMap(map[string]any{"objectId": "o", "subscriptionId": "s", "tenantId": "t"}), nil
	case "azure-native:storage:listStorageAccountKeys":
		return resource.NewPropertyMapFromMap(map[string]any{"keys": []any{map[string]any{"value": "key"}}}), nil
	}
	return resource.PropertyMap{}, fmt.Errorf("unexpected invoke %s", args.Token)
}

// TestAccessDefaults: a GKE stack that names no maintenance window gets weekend nights, and a
// Filestore on the default network is exported to that network's node ranges only.
func TestAccessDefaults(t *testing.T) {
	raw := exampleRaw(t, "../Pulumi.prod.yaml", "prod")
	raw.Values["kolotoc:cluster"] = `{"region":"us-central1"}`
	c, err := stacks.Load(raw)
	if err != nil {
		t.Fatal(err)
	}
	w := c.Cluster.MaintenanceWindow
	if w.Start != "01:00" || w.Duration != "6h" || !reflect.DeepEqual(w.Days, []string{"SA", "SU"}) {
		t.Errorf("default maintenance window %+v, want 01:00 for 6h on SA, SU", w)
	}
	if !reflect.DeepEqual(c.Storage.ClientRanges, []string{"10.128.0.0/9"}) {
		t.Errorf("Filestore clients %v, want the default network's node ranges [10.128.0.0/9]", c.Storage.ClientRanges)
	}
	if len(c.Cluster.AuthorizedNetworks) != 0 || c.Cluster.PrivateEndpoint || c.Cluster.Protect {
		t.Errorf("access defaults: authorized %v private %v protect %v, want none, false, false",
			c.Cluster.AuthorizedNetworks, c.Cluster.PrivateEndpoint, c.Cluster.Protect)
	}

	aws, err := stacks.Load(exampleRaw(t, "../examples/aws/Pulumi.aws.yaml", "aws"))
	if err != nil {
		t.Fatal(err)
	}
	if w := aws.Cluster.MaintenanceWindow; w.Start != "" || len(w.Days) > 0 {
		t.Errorf("a maintenance window on aws, which has none: %+v", w)
	}
}

// TestAzureSpotEveryWorkload: AKS taints Spot nodes and no Kolotoc pod tolerates the taint, so a
// Spot pool under any enabled workload is refused, each named in the message; a Spot pool no
// workload uses is fine. (Until the workloads were registered once the check knew only the
// towers, the carriers and the entrypoint, and let elastic workers, TF tasks, etcd, the
// monitoring and the data-in Job be placed on a pool they could never start on.)
func TestAzureSpotEveryWorkload(t *testing.T) {
	const spotPool = `{"name":"spot","machineType":"Standard_D16s_v5","spot":true,"zones":["1","2"],"placement":"spread"}`
	const spotGPUPool = `{"name":"spotgpu","machineType":"Standard_ND96asr_v4","spot":true}`
	for _, tc := range []struct {
		name string
		set  map[string]string
		want string // "" when the stack loads
	}{
		{"unused", nil, ""},
		{"towers", map[string]string{"kolotoc:towers": `{"count":1,"gpusPerTower":8,"pool":"spotgpu"}`}, "towers do not tolerate it"},
		{"carriers", map[string]string{"kolotoc:carriers": `{"count":1,"pool":"spot"}`}, "carriers and the entrypoint do not tolerate it"},
		{"elastic", map[string]string{"kolotoc:elastic": `{"enabled":true,"pool":"spotgpu","command":["python","train.py"]}`}, "the elastic workers do not tolerate it"},
		{"tfcluster", map[string]string{"kolotoc:tfcluster": `{"enabled":true,"command":["python","train.py"],"ps":{"pool":"spot"}}`}, "the TF ps tasks do not tolerate it"},
		{"etcd", map[string]string{"kolotoc:etcd": `{"enabled":true,"pool":"spot"}`}, "etcd do not tolerate it"},
		{"monitoring", map[string]string{"kolotoc:monitoring": `{"enabled":true,"pool":"spot","grafana":false}`}, "the monitoring do not tolerate it"},
		{"dataIn", map[string]string{"kolotoc:dataIn": `{"enabled":true,"pool":"spot","image":"alpine:3.20","command":["true"]}`}, "the data-in Job do not tolerate it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := exampleRaw(t, "../examples/azure/Pulumi.azure.yaml", "azure")
			var pools []json.RawMessage
			if err := json.Unmarshal([]byte(raw.Values["kolotoc:nodePools"]), &pools); err != nil {
				t.Fatal(err)
			}
			pools = append(pools, json.RawMessage(spotPool), json.RawMessage(spotGPUPool))
			b, _ := json.Marshal(pools)
			raw.Values["kolotoc:nodePools"] = string(b)
			for k, v := range tc.set {
				raw.Values[k] = v
			}
			_, err := stacks.Load(raw)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("a Spot pool no workload uses is refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want a refusal of the Spot pool: %q", err, tc.want)
			}
		})
	}
}

func TestServiceAccountID(t *testing.T) {
	for name, want := range map[string]string{
		"kolotoc-prod":                       "kolotoc-prod-nodes",
		"kolotoc-" + strings.Repeat("x", 32): "kolotoc-xxxxxxxxxxxxxxxx-nodes",
		"kolotoc-research-a-very-long":       "kolotoc-research-a-very-nodes", // trailing hyphen trimmed
	} {
		if got := gcp.ServiceAccountID(name); got != want || len(got) > 30 {
			t.Errorf("ServiceAccountID(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestSubnets: the created VPC's subnets never overlap, for every zone count a region has.
func TestSubnets(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 6; i++ {
		for _, s := range []struct{ bits, index int }{{privateBits, i}, {publicBits, publicBase + i}} {
			cidr, err := eks.Subnet(aws.DefaultVPCCIDR, s.bits, s.index)
			if err != nil {
				t.Fatal(err)
			}
			seen[cidr] = true
		}
	}
	want := "10.0.0.0/20 10.0.16.0/20 10.0.80.0/20 10.0.240.0/24 10.0.245.0/24"
	for _, c := range strings.Fields(want) {
		if !seen[c] {
			t.Errorf("subnet %s not among %v", c, seen)
		}
	}
	if _, err := eks.Subnet("10.0.0.0/28", 8, 0); err == nil {
		t.Error("a /28 VPC split into /36s was accepted")
	}
}

// privateBits, publicBits, publicBase mirror the eks package's layout for TestSubnets.
const privateBits, publicBits, publicBase = 4, 8, 240
