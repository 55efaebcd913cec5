package aks

import (
	"encoding/base64"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/meta/rendertest"
)

const (
	tCluster   = "azure-native:containerservice:ManagedCluster"
	tAgentPool = "azure-native:containerservice:AgentPool"
	tRole      = "azure-native:authorization:RoleAssignment"
	tPPG       = "azure-native:compute:ProximityPlacementGroup"
	tAccount   = "azure-native:storage:StorageAccount"
	tShare     = "azure-native:storage:FileShare"
	tLock      = "azure-native:authorization:ManagementLockByScope"

	caller       = "cccccccc-0000-0000-0000-000000000003"
	subscription = "bbbbbbbb-0000-0000-0000-000000000002"
	testCA       = "Q0EtREFUQQ=="
	userToken    = "user-token-that-must-not-pass"
)

// azureMocks answer what the cloud computes: the caller (getClientConfig), the user credentials
// (with a token Kolotoc must drop), the cluster's identity and FQDN, the storage key.
type azureMocks struct{ *rendertest.Recorder }

func (m azureMocks) NewResource(args pulumi.MockResourceArgs) (string, resource.PropertyMap, error) {
	id, state, err := m.Recorder.NewResource(args)
	if args.TypeToken == tCluster {
		state["name"] = state["resourceName"]
		state["fqdn"] = resource.NewProperty("kolotoc.hcp.eastus.azmk8s.io")
		state["identity"] = resource.NewPropertyValue(map[string]any{"principalId": "principal-1"})
		state["identityProfile"] = resource.NewPropertyValue(map[string]any{"kubeletidentity": map[string]any{"objectId": "kubelet-1"}})
	}
	return id, state, err
}

func (m azureMocks) Call(args pulumi.MockCallArgs) (resource.PropertyMap, error) {
	_, _ = m.Recorder.Call(args)
	switch args.Token {
	case "azure-native:authorization:getClientConfig":
		return resource.NewPropertyMapFromMap(map[string]any{"objectId": caller, "subscriptionId": subscription, "tenantId": "tenant-1", "clientId": "client-1"}), nil
	case "azure-native:containerservice:listManagedClusterUserCredentials":
		kc := "clusters: [{name: c, cluster: {certificate-authority-data: " + testCA + "}}]\nusers: [{name: u, user: {token: " + userToken + "}}]\n"
		return resource.NewPropertyMapFromMap(map[string]any{"kubeconfigs": []any{map[string]any{"name": "clusterUser", "value": base64.StdEncoding.EncodeToString([]byte(kc))}}}), nil
	case "azure-native:storage:listStorageAccountKeys":
		return resource.NewPropertyMapFromMap(map[string]any{"keys": []any{map[string]any{"keyName": "key1", "value": "account-key"}}}), nil
	}
	return resource.PropertyMap{}, nil
}

func run(t *testing.T, body func(ctx *pulumi.Context) error) *rendertest.Recorder {
	t.Helper()
	m := azureMocks{&rendertest.Recorder{}}
	err := pulumi.RunErr(func(ctx *pulumi.Context) error {
		if err := body(ctx); err != nil {
			return err
		}
		return meta.WaitOutputs(ctx)
	}, pulumi.WithMocks(rendertest.Project, rendertest.Stack, m))
	if err != nil {
		t.Fatal(err)
	}
	return m.Recorder
}

var gpuTaint = Taint{Key: "nvidia.com/gpu", Value: "present", Effect: "NoSchedule"}

func testArgs() *ClusterArgs {
	return &ClusterArgs{
		Name: "kolotoc-az", ResourceGroup: "kolotoc-az", NodeResourceGroup: "kolotoc-az-nodes", Location: "eastus",
		SystemVMSize: "Standard_D4s_v5", SystemNodes: 2, Protect: true, Tags: map[string]string{"team": "ml"},
		SubnetID:     "/subscriptions/s/resourceGroups/net/providers/Microsoft.Network/virtualNetworks/v/subnets/nodes",
		Subscription: "s",
		Pools: []Pool{
			{Name: "gpuspot", VMSize: "Standard_ND96asr_v4", Nodes: 1, MinNodes: 0, MaxNodes: 4, Zones: []string{"1"}, Spot: true, Compact: true,
				Labels: map[string]string{"kolotoc.dev/pool": "gpuspot"}, Taints: []Taint{gpuTaint}},
			{Name: "cpu", CloudName: "cpupinned", DeleteFirst: true, VMSize: "Standard_D16s_v5", Nodes: 2, MinNodes: 2, MaxNodes: 2,
				Labels: map[string]string{"kolotoc.dev/pool": "cpu"}},
		},
	}
}

type agentPool struct {
	Name         string            `json:"agentPoolName"`
	Mode         string            `json:"mode"`
	VMSize       string            `json:"vmSize"`
	Count        int               `json:"count"`
	Autoscaling  bool              `json:"enableAutoScaling"`
	Min          *int              `json:"minCount"`
	Max          *int              `json:"maxCount"`
	Labels       map[string]string `json:"nodeLabels"`
	Taints       []string          `json:"nodeTaints"`
	Zones        []string          `json:"availabilityZones"`
	Priority     string            `json:"scaleSetPriority"`
	Eviction     string            `json:"scaleSetEvictionPolicy"`
	SpotMaxPrice *float64          `json:"spotMaxPrice"`
	PPG          string            `json:"proximityPlacementGroupID"`
	Subnet       string            `json:"vnetSubnetID"`
}

func renderCluster(t *testing.T, a *ClusterArgs) (*rendertest.Recorder, string, bool) {
	t.Helper()
	var kubeconfig pulumi.StringOutput
	var secret bool
	rec := run(t, func(ctx *pulumi.Context) error {
		c, err := NewCluster(ctx, "cluster", a)
		if err != nil {
			return err
		}
		kubeconfig = c.Kubeconfig
		secret = pulumi.IsSecret(c.Kubeconfig)
		return nil
	})
	return rec, rendertest.Value[string](t, kubeconfig), secret
}

// TestSpotGPUPool: the GPU taint and Azure's Spot taint in kubectl's notation, Spot priority
// evicted by deletion at any price, autoscaling bounds owned by the autoscaler, the pool in its
// zone, placement group and subnet, a generated name AKS accepts.
func TestSpotGPUPool(t *testing.T) {
	rec, _, _ := renderCluster(t, testArgs())
	r := rec.One(t, tAgentPool, "cluster-gpuspot")
	ap := rendertest.DecodeSome[agentPool](t, r)
	want := []string{"nvidia.com/gpu=present:NoSchedule", "kubernetes.azure.com/scalesetpriority=spot:NoSchedule"}
	if d := cmp.Diff(want, ap.Taints); d != "" {
		t.Errorf("taints (-want +got):\n%s", d)
	}
	if ap.Priority != "Spot" || ap.Eviction != "Delete" || ap.SpotMaxPrice == nil || *ap.SpotMaxPrice != -1 {
		t.Errorf("priority %q eviction %q max price %v: want Spot, Delete, -1 (up to the on-demand price)", ap.Priority, ap.Eviction, ap.SpotMaxPrice)
	}
	if !ap.Autoscaling || ap.Min == nil || *ap.Min != 0 || ap.Max == nil || *ap.Max != 4 || ap.Count != 1 {
		t.Errorf("autoscaling %v %v..%v count %d: want 0..4 from 1", ap.Autoscaling, val(ap.Min), val(ap.Max), ap.Count)
	}
	if !cmp.Equal(r.IgnoreChanges, []string{"count"}) || r.DeleteBeforeReplace || r.CreateTimeout != "90m" {
		t.Errorf("ignore %v deleteBeforeReplace %v timeout %q", r.IgnoreChanges, r.DeleteBeforeReplace, r.CreateTimeout)
	}
	if ap.Mode != "User" || ap.Labels["kolotoc.dev/pool"] != "gpuspot" || !cmp.Equal(ap.Zones, []string{"1"}) || ap.Subnet != testArgs().SubnetID {
		t.Errorf("pool %+v", ap)
	}
	if !regexp.MustCompile(`^gpuspot[0-9a-f]{4}$`).MatchString(ap.Name) || len(ap.Name) > 12 {
		t.Errorf("agent pool name %q: want the stem and 4 hex digits, at most 12 characters", ap.Name)
	}
	ppg := rec.One(t, tPPG, "cluster-gpuspot")
	if ap.PPG != "cluster-gpuspot-id" || rendertest.Get(rendertest.Inputs(ppg), "zones", "[0]") != "1" {
		t.Errorf("placement group %q (zones %v): want the compact pool's own, in its zone", ap.PPG, rendertest.Get(rendertest.Inputs(ppg), "zones"))
	}
	if !slices.Contains(r.DependsOn, "cluster-subnet") {
		t.Errorf("depends on %v: the pool would join the subnet before the cluster may", r.DependsOn)
	}
}

// TestFixedPool: a pinned name, delete-first, no autoscaling, no taint.
func TestFixedPool(t *testing.T) {
	rec, _, _ := renderCluster(t, testArgs())
	r := rec.One(t, tAgentPool, "cluster-cpu")
	ap := rendertest.DecodeSome[agentPool](t, r)
	if ap.Name != "cpupinned" || !r.DeleteBeforeReplace || ap.Autoscaling || ap.Min != nil || len(ap.Taints) != 0 || ap.Priority != "" || len(r.IgnoreChanges) != 0 {
		t.Errorf("%+v deleteBeforeReplace %v ignore %v", ap, r.DeleteBeforeReplace, r.IgnoreChanges)
	}
}

// TestClusterAccess: protect; Entra ID with Azure RBAC and no local account; NetworkPolicy by
// Cilium; the caller made RBAC Cluster Admin of this cluster alone; a secret kubeconfig holding
// the CA and kubelogin, never the user credentials' token.
func TestClusterAccess(t *testing.T) {
	rec, kubeconfig, secret := renderCluster(t, testArgs())
	r := rec.One(t, tCluster, "cluster")
	cl := rendertest.DecodeSome[struct {
		DisableLocalAccounts bool `json:"disableLocalAccounts"`
		AAD                  struct {
			Managed   bool   `json:"managed"`
			AzureRBAC bool   `json:"enableAzureRBAC"`
			Tenant    string `json:"tenantID"`
		} `json:"aadProfile"`
		Network struct {
			Policy    string `json:"networkPolicy"`
			Dataplane string `json:"networkDataplane"`
		} `json:"networkProfile"`
	}](t, r)
	if !r.Protect || !cmp.Equal(r.IgnoreChanges, []string{"agentPoolProfiles"}) {
		t.Errorf("protect %v, ignore %v", r.Protect, r.IgnoreChanges)
	}
	if !cl.DisableLocalAccounts || !cl.AAD.Managed || !cl.AAD.AzureRBAC || cl.AAD.Tenant != "tenant-1" {
		t.Errorf("sign-in %+v local accounts off %v", cl.AAD, cl.DisableLocalAccounts)
	}
	if cl.Network.Policy != "cilium" || cl.Network.Dataplane != "cilium" {
		t.Errorf("network %+v: NetworkPolicy would not be enforced", cl.Network)
	}
	admin := rendertest.DecodeSome[struct {
		Scope, PrincipalId, PrincipalType, RoleDefinitionId string
	}](t, rec.One(t, tRole, "cluster-admin"))
	wantRole := "/subscriptions/" + subscription + "/providers/Microsoft.Authorization/roleDefinitions/b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b"
	if admin.Scope != "cluster-id" || admin.PrincipalId != caller || admin.PrincipalType != "User" || admin.RoleDefinitionId != wantRole {
		t.Errorf("admin grant %+v", admin)
	}
	if !secret {
		t.Error("the kubeconfig output is not a secret")
	}
	if !strings.Contains(kubeconfig, testCA) || !strings.Contains(kubeconfig, "command: kubelogin") || strings.Contains(kubeconfig, userToken) {
		t.Errorf("kubeconfig: want the CA and kubelogin, never the user token:\n%s", kubeconfig)
	}
}

// TestNFSFiles: a Premium NFS share behind a private endpoint: no shared key, public access
// off, the subnet alone admitted, root kept; storage.protect is Pulumi's protect and a
// CanNotDelete lock.
func TestNFSFiles(t *testing.T) {
	a := testArgs()
	rec := run(t, func(ctx *pulumi.Context) error {
		_, err := NewFiles(ctx, "shared-store", &FilesArgs{
			Account: "kolotocaz", ResourceGroup: pulumi.String("kolotoc-az"), Location: "eastus", Tier: "Premium", Protocol: NFS,
			QuotaGiB: 1024, Protect: true, SubnetID: a.SubnetID, PrivateEndpoint: true,
		})
		return err
	})
	acct := rec.One(t, tAccount, "shared-store")
	in := rendertest.DecodeSome[struct {
		SharedKey bool   `json:"allowSharedKeyAccess"`
		Public    string `json:"publicNetworkAccess"`
		Rules     struct {
			Default string `json:"defaultAction"`
			VNets   []struct {
				ID string `json:"virtualNetworkResourceId"`
			} `json:"virtualNetworkRules"`
		} `json:"networkRuleSet"`
	}](t, acct)
	if in.SharedKey || in.Public != "Disabled" || in.Rules.Default != "Deny" || len(in.Rules.VNets) != 1 || in.Rules.VNets[0].ID != a.SubnetID {
		t.Errorf("account %+v", in)
	}
	share := rec.One(t, tShare, "shared-store")
	if !acct.Protect || !share.Protect || rendertest.Get(rendertest.Inputs(share), "rootSquash") != "NoRootSquash" {
		t.Errorf("protect account %v share %v, share %v", acct.Protect, share.Protect, rendertest.Inputs(share))
	}
	if lock := rec.One(t, tLock, "shared-store"); rendertest.Get(rendertest.Inputs(lock), "level") != "CanNotDelete" || lock.Protect {
		t.Errorf("lock %+v: want CanNotDelete, itself removable", lock)
	}
	for _, tok := range []string{PrivateEndpointType, PrivateZoneType, VirtualNetworkLinkType, PrivateDNSZoneGroupType} {
		if len(rec.OfType(tok)) != 1 {
			t.Errorf("%d %s, want 1", len(rec.OfType(tok)), tok)
		}
	}
	if rec.Called("azure-native:storage:listStorageAccountKeys") {
		t.Error("an NFS share reads the account key")
	}
}

// TestSMBKeySecret: an SMB share's key is read and handed on as a secret only.
func TestSMBKeySecret(t *testing.T) {
	var secret bool
	run(t, func(ctx *pulumi.Context) error {
		f, err := NewFiles(ctx, "shared-store", &FilesArgs{
			Account: "kolotocaz", ResourceGroup: pulumi.String("kolotoc-az"), Location: "eastus", Tier: "Standard", Protocol: SMB, QuotaGiB: 100,
		})
		if err != nil {
			return err
		}
		secret = pulumi.IsSecret(f.Key)
		return nil
	})
	if !secret {
		t.Error("the storage account key is not a secret")
	}
}

// val prints an optional number: its value, or "unset".
func val[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}
