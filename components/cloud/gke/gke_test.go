package gke

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta/rendertest"
)

const (
	tCluster  = "gcp:container/cluster:Cluster"
	tNodePool = "gcp:container/nodePool:NodePool"
	tMember   = "gcp:projects/iAMMember:IAMMember"
	tInstance = "gcp:filestore/instance:Instance"
	tFirewall = "gcp:compute/firewall:Firewall"
	tAccount  = "gcp:serviceaccount/account:Account"
)

// nodePool is what the tests read of a registered node pool.
type nodePool struct {
	Name             string   `json:"name"`
	NamePrefix       string   `json:"namePrefix"`
	NodeLocations    []string `json:"nodeLocations"`
	NodeCount        *int     `json:"nodeCount"`
	InitialNodeCount *int     `json:"initialNodeCount"`
	Autoscaling      *struct {
		Min int `json:"minNodeCount"`
		Max int `json:"maxNodeCount"`
	} `json:"autoscaling"`
	UpgradeSettings *struct {
		MaxSurge       int `json:"maxSurge"`
		MaxUnavailable int `json:"maxUnavailable"`
	} `json:"upgradeSettings"`
	PlacementPolicy *struct {
		Type string `json:"type"`
	} `json:"placementPolicy"`
	Management struct {
		AutoRepair  bool `json:"autoRepair"`
		AutoUpgrade bool `json:"autoUpgrade"`
	} `json:"management"`
	NodeConfig struct {
		MachineType            string            `json:"machineType"`
		Spot                   bool              `json:"spot"`
		Labels                 map[string]string `json:"labels"`
		OauthScopes            []string          `json:"oauthScopes"`
		Taints                 []Taint           `json:"taints"`
		WorkloadMetadataConfig struct {
			Mode string `json:"mode"`
		} `json:"workloadMetadataConfig"`
		GuestAccelerators []struct {
			Type   string `json:"type"`
			Count  int    `json:"count"`
			Driver struct {
				Version string `json:"gpuDriverVersion"`
			} `json:"gpuDriverInstallationConfig"`
		} `json:"guestAccelerators"`
		LocalSsdCount int `json:"localSsdCount"`
		Ephemeral     *struct {
			Count int `json:"localSsdCount"`
		} `json:"ephemeralStorageLocalSsdConfig"`
		Gvnic *struct {
			Enabled bool `json:"enabled"`
		} `json:"gvnic"`
	} `json:"nodeConfig"`
}

var gpuTaint = Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}

func testArgs() *ClusterArgs {
	return &ClusterArgs{
		Name: "kolotoc-prod", Project: "p1", Region: "us-central1", Network: "default", ReleaseChannel: "REGULAR",
		ServiceAccountID: "kolotoc-prod-nodes", ResourceLabels: map[string]string{"team": "ml"}, Protect: true,
		RegistryProjects: []string{"example.com:images"},
		Pools: []Pool{
			{Name: "gpu", MachineType: "a2-highgpu-8g", Nodes: 4, MinNodes: 2, MaxNodes: 6, Zones: []string{"us-central1-a", "us-central1-b"},
				GPUs: 8, GPUType: "nvidia-tesla-a100", GPUDriver: "DEFAULT", Spot: true, LocalSSDs: 2, SSDsAsEphemeral: true, Compact: false, GVNIC: true,
				Labels: map[string]string{"kolotoc.dev/pool": "gpu"}, Taints: []Taint{gpuTaint}},
			{Name: "cpu", CloudName: "cpu-pinned", DeleteFirst: true, MachineType: "n2-standard-16", Nodes: 3, MinNodes: 3, MaxNodes: 3,
				Labels: map[string]string{"kolotoc.dev/pool": "cpu"}},
		},
		Maintenance: &Maintenance{Start: "03:00", Duration: 4 * time.Hour, Days: []string{"SA", "SU"}},
	}
}

func renderCluster(t *testing.T, a *ClusterArgs) (*rendertest.Recorder, bool) {
	t.Helper()
	var secret bool
	rec := rendertest.Run(t, func(ctx *pulumi.Context) error {
		c, err := NewCluster(ctx, "cluster", a)
		if err != nil {
			return err
		}
		secret = pulumi.IsSecret(c.Kubeconfig)
		return nil
	})
	return rec, secret
}

// TestGPUPool: accelerators with their driver, the GPU taint as GKE spells it, Spot, the
// autoscaling bounds and node count per zone (GKE counts per zone), one node at a time on
// upgrade, local SSDs behind emptyDir.
func TestGPUPool(t *testing.T) {
	rec, _ := renderCluster(t, testArgs())
	r := rec.One(t, tNodePool, "cluster-gpu")
	np := rendertest.DecodeSome[nodePool](t, r)
	nc := np.NodeConfig
	if len(nc.GuestAccelerators) != 1 || nc.GuestAccelerators[0].Type != "nvidia-tesla-a100" || nc.GuestAccelerators[0].Count != 8 ||
		nc.GuestAccelerators[0].Driver.Version != "DEFAULT" {
		t.Errorf("accelerators %+v: want 8 nvidia-tesla-a100 with the DEFAULT driver", nc.GuestAccelerators)
	}
	if d := cmp.Diff([]Taint{{Key: "nvidia.com/gpu", Value: "present", Effect: "NO_SCHEDULE"}}, nc.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if !nc.Spot || nc.MachineType != "a2-highgpu-8g" || nc.Labels["kolotoc.dev/pool"] != "gpu" {
		t.Errorf("node config %+v: want Spot a2-highgpu-8g labelled pool gpu", nc)
	}
	if np.Autoscaling == nil || np.Autoscaling.Min != 1 || np.Autoscaling.Max != 3 || np.InitialNodeCount == nil || *np.InitialNodeCount != 2 || np.NodeCount != nil {
		t.Errorf("autoscaling %+v initial %v count %v: want 1..3 from 2 per zone (totals 2..6 from 4 over 2 zones)", np.Autoscaling, val(np.InitialNodeCount), val(np.NodeCount))
	}
	if np.UpgradeSettings == nil || np.UpgradeSettings.MaxSurge != 0 || np.UpgradeSettings.MaxUnavailable != 1 {
		t.Errorf("upgrade %+v: a GPU pool has no quota for a surge node", np.UpgradeSettings)
	}
	if nc.Ephemeral == nil || nc.Ephemeral.Count != 2 || nc.LocalSsdCount != 0 || nc.Gvnic == nil || !nc.Gvnic.Enabled {
		t.Errorf("local SSDs %+v/%d, gVNIC %+v: want 2 SSDs behind emptyDir and gVNIC", nc.Ephemeral, nc.LocalSsdCount, nc.Gvnic)
	}
	if nc.WorkloadMetadataConfig.Mode != "GKE_METADATA" {
		t.Errorf("workload metadata %q: pods would reach the node's credentials", nc.WorkloadMetadataConfig.Mode)
	}
	if !strings.HasPrefix(np.NamePrefix, "gpu-") || np.Name != "" {
		t.Errorf("name %q prefix %q: want a generated name from gpu-", np.Name, np.NamePrefix)
	}
	if d := cmp.Diff([]string{"initialNodeCount", "nodeCount"}, r.IgnoreChanges); d != "" {
		t.Errorf("ignoreChanges (-want +got): the autoscaler owns the count\n%s", d)
	}
	if r.DeleteBeforeReplace || r.CreateTimeout != "90m" {
		t.Errorf("deleteBeforeReplace %v, create timeout %q: want the new pool first, 90m", r.DeleteBeforeReplace, r.CreateTimeout)
	}
	if r.Protect {
		t.Error("a node pool is protected: cluster.protect guards the cluster, pools are replaceable")
	}
}

// TestFixedPool: a pool with a pinned name is replaced delete-first, has a fixed count and no taint.
func TestFixedPool(t *testing.T) {
	rec, _ := renderCluster(t, testArgs())
	r := rec.One(t, tNodePool, "cluster-cpu")
	np := rendertest.DecodeSome[nodePool](t, r)
	if np.Name != "cpu-pinned" || np.NamePrefix != "" || !r.DeleteBeforeReplace {
		t.Errorf("name %q prefix %q deleteBeforeReplace %v: want the pinned name, deleted first", np.Name, np.NamePrefix, r.DeleteBeforeReplace)
	}
	if np.NodeCount == nil || *np.NodeCount != 3 || np.Autoscaling != nil || len(r.IgnoreChanges) != 0 {
		t.Errorf("count %v autoscaling %+v ignore %v: want 3 fixed nodes, Pulumi owning the count", val(np.NodeCount), np.Autoscaling, r.IgnoreChanges)
	}
	if len(np.NodeConfig.Taints) != 0 || len(np.NodeConfig.GuestAccelerators) != 0 || np.UpgradeSettings != nil {
		t.Errorf("CPU pool: taints %v accelerators %v upgrade %+v", np.NodeConfig.Taints, np.NodeConfig.GuestAccelerators, np.UpgradeSettings)
	}
}

// TestClusterProtectAndAccess: cluster.protect is Pulumi's protect and the provider's deletion
// protection; the kubeconfig is a secret; the nodes' account holds exactly its roles.
func TestClusterProtectAndAccess(t *testing.T) {
	rec, secret := renderCluster(t, testArgs())
	if !secret {
		t.Error("the kubeconfig output is not a secret")
	}
	r := rec.One(t, tCluster, "cluster")
	cl := rendertest.DecodeSome[struct {
		DeletionProtection    bool   `json:"deletionProtection"`
		RemoveDefaultNodePool bool   `json:"removeDefaultNodePool"`
		DatapathProvider      string `json:"datapathProvider"`
		Location              string `json:"location"`
		MaintenancePolicy     struct {
			Window struct {
				Start      string `json:"startTime"`
				End        string `json:"endTime"`
				Recurrence string `json:"recurrence"`
			} `json:"recurringWindow"`
		} `json:"maintenancePolicy"`
	}](t, r)
	if !r.Protect || !cl.DeletionProtection {
		t.Errorf("protect %v, deletionProtection %v: want both", r.Protect, cl.DeletionProtection)
	}
	if !cl.RemoveDefaultNodePool || cl.DatapathProvider != "ADVANCED_DATAPATH" || cl.Location != "us-central1" {
		t.Errorf("cluster %+v", cl)
	}
	w := cl.MaintenancePolicy.Window
	if w.Start != "2024-01-06T03:00:00Z" || w.End != "2024-01-06T07:00:00Z" || w.Recurrence != "FREQ=WEEKLY;BYDAY=SA,SU" {
		t.Errorf("maintenance window %+v: want 03:00-07:00 UTC on SA,SU", w)
	}
	roles := map[string]string{}
	for _, m := range rec.OfType(tMember) {
		in := rendertest.DecodeSome[struct{ Role, Project string }](t, m)
		roles[m.Name] = in.Project + " " + in.Role
	}
	want := map[string]string{
		"cluster-nodes":                             "p1 roles/container.defaultNodeServiceAccount",
		"cluster-nodes-registry":                    "p1 roles/artifactregistry.reader",
		"cluster-nodes-registry-example.com-images": "example.com:images roles/artifactregistry.reader",
	}
	if d := cmp.Diff(want, roles); d != "" {
		t.Errorf("node account roles (-want +got):\n%s", d)
	}
}

// TestPrivateEndpoint: a private cluster has private nodes and endpoint, and only its own subnet
// reaches the control plane when no network is listed.
func TestPrivateEndpoint(t *testing.T) {
	a := testArgs()
	a.PrivateEndpoint = true
	rec, _ := renderCluster(t, a)
	cl := rendertest.DecodeSome[struct {
		Private *struct {
			Nodes    bool `json:"enablePrivateNodes"`
			Endpoint bool `json:"enablePrivateEndpoint"`
		} `json:"privateClusterConfig"`
		Authorized *struct {
			Blocks []any `json:"cidrBlocks"`
		} `json:"masterAuthorizedNetworksConfig"`
	}](t, rec.One(t, tCluster, "cluster"))
	if cl.Private == nil || !cl.Private.Nodes || !cl.Private.Endpoint {
		t.Errorf("private config %+v", cl.Private)
	}
	if cl.Authorized == nil || len(cl.Authorized.Blocks) != 0 {
		t.Errorf("authorized networks %+v: want the config with no block", cl.Authorized)
	}
}

// TestFilestore: the share is exported read-write to the node ranges only, with root kept (the
// workloads write as root), and storage.protect protects the instance.
func TestFilestore(t *testing.T) {
	rec := rendertest.Render(t, "shared-store", &FilestoreArgs{
		Name: "kolotoc-prod-shared", Location: "us-central1-a", Tier: "ZONAL", CapacityGiB: 2048, Network: "default",
		Clients: []string{"10.0.0.0/8"}, Protect: true,
	}, NewFilestore)
	r := rec.One(t, tInstance, "shared-store")
	in := rendertest.DecodeSome[struct {
		Tier   string `json:"tier"`
		Shares struct {
			Name     string `json:"name"`
			Capacity int    `json:"capacityGb"`
			Exports  []struct {
				IPRanges []string `json:"ipRanges"`
				Access   string   `json:"accessMode"`
				Squash   string   `json:"squashMode"`
			} `json:"nfsExportOptions"`
		} `json:"fileShares"`
	}](t, r)
	if !r.Protect {
		t.Error("the instance holding the checkpoints is not protected")
	}
	if in.Shares.Name != "shared" || in.Shares.Capacity != 2048 || in.Tier != "ZONAL" {
		t.Errorf("instance %+v", in)
	}
	if len(in.Shares.Exports) != 1 || !cmp.Equal(in.Shares.Exports[0].IPRanges, []string{"10.0.0.0/8"}) ||
		in.Shares.Exports[0].Access != "READ_WRITE" || in.Shares.Exports[0].Squash != "NO_ROOT_SQUASH" {
		t.Errorf("exports %+v: want read-write, root kept, to the node ranges only", in.Shares.Exports)
	}
}

// val prints an optional count: its value, or "unset".
func val(p *int) any {
	if p == nil {
		return "unset"
	}
	return *p
}

func TestArgsRequired(t *testing.T) {
	a := testArgs()
	a.Pools = nil
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		_, err := NewCluster(ctx, "cluster", a)
		return err
	}, pulumi.WithMocks(rendertest.Project, rendertest.Stack, &rendertest.Recorder{}))
	if err == nil || !strings.Contains(err.Error(), `gke "cluster"`) {
		t.Errorf("a cluster without pools: %v", err)
	}
}

// controlPlane is the mock GKE: what it reports of a private cluster's control plane (its range
// with VPC peering; only its private endpoint with Private Service Connect).
type controlPlane struct {
	rendertest.Recorder
	cidr, endpoint string
}

func (m *controlPlane) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	id, state, err := m.Recorder.NewResource(args)
	if args.TypeToken == tCluster {
		pcc := map[string]any{"privateEndpoint": m.endpoint}
		if m.cidr != "" {
			pcc["masterIpv4CidrBlock"] = m.cidr
		}
		state["privateClusterConfig"] = resource.NewPropertyValue(pcc)
	}
	if args.TypeToken == tAccount {
		state["email"] = resource.NewProperty(args.Inputs["accountId"].StringValue() + "@p1.iam.gserviceaccount.com")
	}
	return id, state, err
}

// TestWebhookFirewall: with a private endpoint and webhook ports, an ingress rule admits the
// control plane to those ports on the nodes of the cluster's node account, from the range GKE
// reports for the control plane, or its private endpoint's address when GKE reports no range;
// GKE's own rule for private clusters opens only TCP 443 and 10250
// (https://cloud.google.com/kubernetes-engine/docs/how-to/latest/network-isolation#add_firewall_rules;
// https://cloud.google.com/kubernetes-engine/docs/concepts/firewall-rules). No rule without a
// private endpoint or without ports.
func TestWebhookFirewall(t *testing.T) {
	for _, tc := range []struct {
		name, cidr, endpoint, want string
	}{
		{"VPC peering", "172.16.0.32/28", "172.16.0.34", "172.16.0.32/28"},
		{"Private Service Connect", "", "10.128.0.2", "10.128.0.2/32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := testArgs()
			a.PrivateEndpoint, a.WebhookPorts = true, []int{9443}
			m := &controlPlane{cidr: tc.cidr, endpoint: tc.endpoint}
			if err := pulumi.RunErr(func(ctx *pulumi.Context) error {
				_, err := NewCluster(ctx, "cluster", a)
				return err
			}, pulumi.WithMocks(rendertest.Project, rendertest.Stack, m)); err != nil {
				t.Fatal(err)
			}
			fw := rendertest.DecodeSome[struct {
				Name, Network, Direction string
				Priority                 int
				SourceRanges             []string
				TargetServiceAccounts    []string
				Allows                   []struct {
					Protocol string
					Ports    []string
				}
			}](t, m.One(t, tFirewall, "cluster-webhooks"))
			if fw.Name != "kolotoc-prod-webhooks" || fw.Network != "default" || fw.Direction != "INGRESS" || fw.Priority >= 1000 {
				t.Errorf("firewall rule %+v", fw)
			}
			if !slices.Equal(fw.SourceRanges, []string{tc.want}) {
				t.Errorf("source ranges %v, want the control plane's %s", fw.SourceRanges, tc.want)
			}
			if len(fw.Allows) != 1 || fw.Allows[0].Protocol != "tcp" || !slices.Equal(fw.Allows[0].Ports, []string{"9443"}) {
				t.Errorf("allows %+v, want tcp 9443", fw.Allows)
			}
			if !slices.Equal(fw.TargetServiceAccounts, []string{"kolotoc-prod-nodes@p1.iam.gserviceaccount.com"}) {
				t.Errorf("targets %v, want the node account", fw.TargetServiceAccounts)
			}
		})
	}
	for what, a := range map[string]func(*ClusterArgs){
		"public endpoint": func(a *ClusterArgs) { a.WebhookPorts = []int{9443} },
		"no webhooks":     func(a *ClusterArgs) { a.PrivateEndpoint = true },
	} {
		args := testArgs()
		a(args)
		rec, _ := renderCluster(t, args)
		if fw := rec.OfType(tFirewall); len(fw) != 0 {
			t.Errorf("%s: firewall rule %s", what, fw[0].Name)
		}
	}
}
