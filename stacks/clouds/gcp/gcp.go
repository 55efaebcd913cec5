// Package gcp is the entry of cloud gcp (kolotoc:cloud: gcp): a GKE cluster with its node pools
// and a Filestore instance, made by components/cloud/gke. It registers itself with the stack
// (stacks.RegisterCloud); importing kolotoc/stacks/clouds registers it.
package gcp

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/gke"
	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/components/queue"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

func init() { stacks.RegisterCloud(entry) }

var entry = &stacks.Cloud{
	Name:    stacks.CloudGCP,
	Creates: true,

	Catalogue:    catalogue(),
	AttachedGPUs: validateAttachedGPUs,
	NoGPUsHint:   "; GCP attaches GPUs to N1 machine types only (e.g. n1-standard-8 with 1 × " + stacks.GPUT4 + ")",
	SpotLabel:    "cloud.google.com/gke-spot",
	// Compute Engine preempts a Spot VM 30 s after its preemption notice (ACPI G2 soft off); GKE
	// gives the node's pods that 30 s, 15 s of it to non-system pods by default.
	SpotNotice: &meta.SpotNotice{Seconds: 30, What: "GCP Spot VMs' preemption notice",
		Doc: "https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms#termination-graceful-shutdown"},
	Fabric: poolFabric,
	// The zones the local cluster's Karpenter offers GCP's machine types in (stacks' autoscale.go).
	KarpenterZones: []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"},

	// GKE's Dynamic Workload Scheduler, for queue.provisioning: queued (checkQueuedPools).
	ProvisioningClass: ProvisioningClass,

	// The cluster runs GKE Dataplane V2 (components/cloud/gke: ADVANCED_DATAPATH).
	CiliumDataplane: "GKE Dataplane V2",

	DevicePlugins:    []string{stacks.DevicePluginGKE},
	DevicePluginsWhy: "GKE runs its own NVIDIA device plugin on every GPU node",

	Store:    store,
	Defaults: applyDefaults,
	Check:    check,
	Deploy:   deploy,
}

// GPU driver installation choices of a GKE pool (`kolotoc:nodePools[i].gpuDriver`).
const (
	GKEDriverDefault  = "DEFAULT"
	GKEDriverLatest   = "LATEST"
	GKEDriverDisabled = "INSTALLATION_DISABLED"
)

// ProvisioningClass is the ProvisioningRequest class of GKE's queued provisioning (flex-start with
// queued provisioning, Dynamic Workload Scheduler): all the requested nodes at once, or none
// (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest).
const ProvisioningClass = "queued-provisioning.gke.io"

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultReleaseChannel: GKE's REGULAR channel, the one GKE recommends for production.
	defaultReleaseChannel = "REGULAR"
	// defaultGCPNetwork: the network every GCP project starts with.
	defaultGCPNetwork = "default"
	// defaultMaintenanceStart, defaultMaintenanceDuration, defaultMaintenanceDays: GKE upgrades
	// the control plane and the nodes on Saturday and Sunday nights, 01:00-07:00 UTC, when the
	// fewest interactive users are on. 2 days × 6 h gives at least 48 h in any 32 days, the
	// least GKE accepts.
	defaultMaintenanceStart    = "01:00"
	defaultMaintenanceDuration = "6h"
	// minMaintenanceWindow, maxMaintenanceWindow: GKE wants each window at least 4 hours long;
	// a window longer than a day overlaps the next.
	minMaintenanceWindow = 4 * time.Hour
	maxMaintenanceWindow = 24 * time.Hour
	// minMaintenancePer32Days: GKE refuses windows that leave less than 48 hours in any 32 days.
	minMaintenancePer32Days = 48 * time.Hour
	// gkeNameMax: GKE cluster and node pool names (characters), which derive from cluster.name.
	gkeNameMax = 40
)

var (
	defaultMaintenanceDays = []string{"SA", "SU"}
	allowedWeekdays        = []string{"MO", "TU", "WE", "TH", "FR", "SA", "SU"}
	allowedReleaseChannels = []string{"RAPID", "REGULAR", "STABLE"}
	allowedGPUDrivers      = []string{GKEDriverDefault, GKEDriverLatest, GKEDriverDisabled}

	// gkePoolName: a pinned cloudName as GKE takes it: lower-case letters, digits and '-',
	// starting with a letter, at most 40 (the node pool API's name rule).
	gkePoolName = regexp.MustCompile(`^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$`)

	// gkeCompactFamilies are the GCP machine families GKE's compact placement policy accepts
	// (GKE, "Define compact placement for GKE nodes", Limitations: C2, C2D, C3, C3D, … N2, N2D,
	// and the A100, L4 and H100 GPUs, that is A2, G2 and A3). A compact pool of another family
	// (N1 with attached GPUs, E2) still keeps to one zone, without the policy.
	gkeCompactFamilies = []string{"a2", "a3", "g2", "c2", "c2d", "c3", "c3d", "n2", "n2d"}
)

// applyDefaults fills the GKE driver of GPU pools, the cluster's release channel and network,
// and the maintenance window. Zero values only.
func applyDefaults(c *stacks.Config) {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if p.GPUsPerNode > 0 && p.GPUDriver == "" {
			p.GPUDriver = GKEDriverDefault
		}
	}
	k := &c.Cluster
	meta.Fill(&k.ReleaseChannel, defaultReleaseChannel)
	meta.Fill(&k.Network, defaultGCPNetwork)
	w := &c.Cluster.MaintenanceWindow
	meta.Fill(&w.Start, defaultMaintenanceStart)
	meta.Fill(&w.Duration, defaultMaintenanceDuration)
	if len(w.Days) == 0 {
		w.Days = slices.Clone(defaultMaintenanceDays)
	}
}

// check checks gcp's keys: on a gcp stack the names GKE derives from cluster.name, the release
// channel, zones, GPU drivers, the maintenance window and the pools' cloud names; elsewhere that
// the keys only GKE reads are absent.
func check(c *stacks.Config, v *stacks.Validator) {
	on := c.CloudEntry()
	k := c.Cluster
	checkRegistryProjects(c, v)
	if c.Cloud != stacks.CloudGCP {
		for i, p := range c.NodePools {
			key := fmt.Sprintf("nodePools[%d]", i)
			if p.LocalSSDs > 0 && on.Creates {
				v.Add(key+".localSsds", fmt.Sprint(p.LocalSSDs), "only gcp attaches local SSDs to a pool; on "+c.Cloud+
					" pick a machine type with local NVMe instead; allowed: 0")
			}
			if p.GPUDriver != "" && on.Creates {
				v.Add(key+".gpuDriver", p.GPUDriver, "only GKE installs GPU drivers for a pool; remove it on cloud "+c.Cloud)
			}
		}
		if w := k.MaintenanceWindow; on.Creates && (w.Start != "" || w.Duration != "" || len(w.Days) > 0) {
			v.Add("cluster.maintenanceWindow", "(set)", "only GKE's upgrades follow a Kolotoc maintenance window; remove it on cloud "+c.Cloud)
		}
		return
	}
	name := k.Name
	if len(name) > gkeNameMax || (name != "" && (name[0] < 'a' || name[0] > 'z')) {
		v.Add("cluster.name", name, fmt.Sprintf("GKE cluster names start with a letter and are at most %d characters (%d here)", gkeNameMax, len(name)))
	}
	v.OneOf("cluster.releaseChannel", k.ReleaseChannel, allowedReleaseChannels)
	if k.Zone != "" && k.Region != "" && !strings.HasPrefix(k.Zone, k.Region+"-") {
		v.Add("cluster.zone", k.Zone, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", k.Region, k.Region, k.Region))
	}
	for i, p := range c.NodePools {
		key := fmt.Sprintf("nodePools[%d]", i)
		validatePoolZones(c, v, i, p)
		if p.GPUsPerNode > 0 {
			v.OneOf(key+".gpuDriver", p.GPUDriver, allowedGPUDrivers)
		}
		if len(p.Name) > gkeNameMax {
			v.Add(key+".name", p.Name, fmt.Sprintf("GKE node pool names are at most %d characters", gkeNameMax))
		}
		if p.CloudName != "" && !gkePoolName.MatchString(p.CloudName) {
			v.Add(key+".cloudName", p.CloudName, fmt.Sprintf("not a GKE node pool name; allowed: 1-%d lower-case letters, digits and '-', starting with a letter and not ending with '-'", gkeNameMax))
		}
	}
	validateMaintenanceWindow(c, v)
	if c.Queue.Queued() {
		checkQueuedPools(c, v)
	}
	if c.Cluster.Context != "" { // the context's name is gcloud's to choose
		v.Add("cluster.context", c.Cluster.Context, "gcloud names a GKE cluster's context gke_<project>_<location>_<name> (the kubeContext output); "+
			"remove it on gcp (on aws and azure it names the context the kubeconfigCommand output creates)")
	}
}

// checkQueuedPools checks the GPU pools of a stack with queue.provisioning queued against what
// GKE's queued provisioning needs of a node pool: autoscaling from zero nodes up to a total
// maximum (gcloud --enable-autoscaling --num-nodes=0 --total-max-nodes), and the GPU driver that
// GKE installs (--accelerator ...,gpu-driver-version=...), as
// https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest creates the pool.
func checkQueuedPools(c *stacks.Config, v *stacks.Validator) {
	gpuPools := 0
	for i, p := range c.NodePools {
		if !c.QueuedPool(p) {
			continue
		}
		gpuPools++
		key := fmt.Sprintf("nodePools[%d]", i)
		const why = "with queue.provisioning queued GKE adds the pool's nodes for each admitted workload, all at once, and takes them back after it"
		switch {
		case p.Min() != 0:
			v.Add(key+".minNodes", fmt.Sprint(p.Min()), why+": the pool sits at zero; allowed: 0, with maxNodes the most nodes GKE may add")
		case p.Nodes != 0:
			v.Add(key+".nodes", fmt.Sprint(p.Nodes), why+": the pool starts with none; allowed: 0 (unset)")
		}
		if p.GPUDriver == GKEDriverDisabled {
			v.Add(key+".gpuDriver", p.GPUDriver, "GKE's queued nodes arrive with the driver GKE installs, ready for the admitted workload; allowed: "+
				GKEDriverDefault+", "+GKEDriverLatest)
		}
	}
	if gpuPools == 0 {
		v.Add("queue.provisioning", c.Queue.Provisioning, "GKE's queued provisioning brings GPU nodes and the stack has no GPU pool; allowed: "+
			queue.ProvisioningStandard+", or a GPU pool at zero (minNodes: 0, maxNodes)")
	}
}

// validatePoolZones checks pool zones: GKE counts nodes per zone, so with a regional cluster the
// zones must be named and the totals must split evenly between them.
func validatePoolZones(c *stacks.Config, v *stacks.Validator, i int, p stacks.NodePool) {
	key := fmt.Sprintf("nodePools[%d].zones", i)
	region := c.Cluster.Region
	for j, z := range p.Zones {
		if region != "" && !strings.HasPrefix(z, region+"-") {
			v.Add(fmt.Sprintf("%s[%d]", key, j), z, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", region, region, region))
		}
	}
	zones := len(p.Zones)
	if zones == 0 && c.Cluster.Zone == "" {
		v.Add(key, "[]", fmt.Sprintf("required with a regional cluster (cluster.zone unset): GKE would create the pool's nodes in every zone of %s; name them, e.g. [%s-a]",
			region, region))
		return
	}
	meta.Fill(&zones, 1)
	for _, n := range []struct {
		name  string
		count int
	}{{"nodes", p.Nodes}, {"minNodes", p.Min()}, {"maxNodes", p.MaxNodes}} {
		if n.count%zones != 0 {
			v.Add(fmt.Sprintf("nodePools[%d].%s", i, n.name), fmt.Sprint(n.count),
				fmt.Sprintf("GKE places the same number of nodes in each of the pool's %d zones; allowed: a multiple of %d", zones, zones))
		}
	}
}

func validateMaintenanceWindow(c *stacks.Config, v *stacks.Validator) {
	w := c.Cluster.MaintenanceWindow
	const key = "cluster.maintenanceWindow"
	if _, err := time.Parse("15:04", w.Start); err != nil {
		v.Add(key+".start", w.Start, "not a time of day; allowed: HH:MM in UTC, e.g. 01:00")
	}
	d, err := time.ParseDuration(w.Duration)
	if err != nil || d < minMaintenanceWindow || d > maxMaintenanceWindow || d%time.Minute != 0 {
		v.Add(key+".duration", w.Duration, fmt.Sprintf("allowed: whole minutes from %s to %s, e.g. 6h (GKE wants at least 4 hours at a time)",
			stacks.FormatDuration(minMaintenanceWindow), stacks.FormatDuration(maxMaintenanceWindow)))
		d = 0
	}
	seen := map[string]bool{}
	for i, day := range w.Days {
		if seen[day] {
			v.Add(fmt.Sprintf("%s.days[%d]", key, i), day, "named twice; each day once")
		}
		seen[day] = true
		v.OneOf(fmt.Sprintf("%s.days[%d]", key, i), day, allowedWeekdays)
	}
	// Any 32 days hold every weekday at least 4 times.
	if total := 4 * time.Duration(len(seen)) * d; d > 0 && total < minMaintenancePer32Days {
		v.Add(key, fmt.Sprintf("%s on %s", w.Duration, strings.Join(w.Days, ",")), fmt.Sprintf(
			"gives GKE %s in some 32 days, it needs at least %s; allowed: more days or longer windows, e.g. 6h on SA,SU",
			stacks.FormatDuration(total), stacks.FormatDuration(minMaintenancePer32Days)))
	}
}

// poolFabric: a compact pool keeps to its zone or the zonal cluster's, in GKE's compact placement
// policy where its machine family has it; a GPU pool's nodes get gVNIC.
func poolFabric(c *stacks.Config, p stacks.NodePool, _ stacks.MachineType, f *stacks.PoolFabric) {
	if f.Compact {
		meta.Fill(&f.Zone, c.Cluster.Zone)
		family, _, _ := strings.Cut(p.MachineType, "-")
		// A queued pool keeps to its zone without the policy: Google's Cluster Toolkit refuses
		// COMPACT placement on a node pool with queued provisioning (GoogleCloudPlatform/
		// cluster-toolkit#3582, gke-node-pool), and flex-start places its nodes compactly on a
		// best-effort basis itself (https://docs.cloud.google.com/ai-hypercomputer/docs/create/gke-ai-hypercompute).
		f.PlacementGroup = slices.Contains(gkeCompactFamilies, family) && !c.QueuedPool(p)
	}
	if stacks.FabricOn(p) {
		f.GVNIC = true
	}
}

func deploy(ctx *pulumi.Context, c *stacks.Config) (pulumi.StringOutput, []pulumi.Resource, *stacks.CloudResult, error) {
	k := c.Cluster
	prov, err := gke.NewProvider(ctx, "gcp", k.Region, k.Project, stacks.CloudLabels(c))
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onGCP := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store
	pools := make([]gke.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		labels, taints := c.CloudNodeLabels(p), cluster.NodeTaints(c.SimulatedPool(p))
		f := c.PoolFabric(p)
		pools[i] = gke.Pool{
			Compact: f.PlacementGroup, GVNIC: f.GVNIC,
			Name: p.Name, MachineType: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			Zones: p.Zones, GPUs: p.GPUsPerNode, GPUType: p.GPUType, GPUDriver: p.GPUDriver, Spot: p.Spot,
			LocalSSDs: p.LocalSSDs, SSDsAsEphemeral: c.Storage.Scratch.Type == storage.ScratchEmptyDir, Labels: labels,
			Taints: taints, CloudName: p.CloudName, DeleteFirst: p.Replace == stacks.ReplaceDeleteFirst,
			Queued: c.QueuedPool(p),
		}
	}
	cl, err := gke.NewCluster(ctx, stacks.CloudClusterName, &gke.ClusterArgs{
		Name: k.Name, Project: k.Project, Region: k.Region, Zone: k.Zone, Network: k.Network,
		ReleaseChannel: k.ReleaseChannel, KubernetesVersion: k.KubernetesVersion,
		ServiceAccountID: ServiceAccountID(k.Name), Pools: pools, ResourceLabels: stacks.CloudLabels(c), RegistryProjects: k.RegistryProjects,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		Maintenance: gkeMaintenance(k.MaintenanceWindow), WebhookPorts: c.WebhookPorts(),
	}, onGCP, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &stacks.CloudResult{Outputs: pulumi.Map{}, Kube: kubeAccess(c, cl.Project)}
	if s := c.Storage; c.CloudStore() { // a Filestore instance (store.go)
		location := s.Zone
		if s.Tier == FilestoreRegional {
			location = k.Region
		}
		fs, err := gke.NewFilestore(ctx, stacks.CloudStoreName, &gke.FilestoreArgs{
			Name: k.Name + "-shared", Project: k.Project, Location: location, Tier: s.Tier,
			CapacityGiB: stacks.GiB(s.Size), Network: k.Network, Clients: s.ClientRanges, Protect: s.Protect, Labels: stacks.CloudLabels(c),
		}, onGCP, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.Store = &stacks.CloudVolume{ServerAddress: fs.Address, Path: fs.Path, MountOptions: gke.NFSMountOptions}
		res.Outputs["filestoreAddress"] = fs.Address
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

// kubeAccess: gcloud fetches the credentials into the user's kubeconfig and names the context
// itself, gke_<project>_<location>_<name>. gkeProject is the GKE cluster's project
// (cluster.project, or the provider's default as GKE reports it).
func kubeAccess(c *stacks.Config, gkeProject pulumi.StringOutput) stacks.KubeAccess {
	k := c.Cluster
	if k.Project != "" {
		gkeProject = pulumi.String(k.Project).ToStringOutput() // known at preview
	}
	flag, location := "--region", k.Region
	if k.Zone != "" {
		flag, location = "--zone", k.Zone
	}
	// gcloud names the context itself; its project is GKE's, known once the cluster exists
	// when cluster.project is unset.
	return stacks.KubeAccess{
		Context: pulumi.Sprintf("gke_%s_%s_%s", gkeProject, location, k.Name),
		KubeconfigCommand: pulumi.Sprintf("gcloud container clusters get-credentials %s %s %s --project %s",
			k.Name, flag, location, gkeProject),
	}
}

// ServiceAccountID is the GKE node service account's id: <cluster>-nodes, shortened to GCP's
// 30 characters.
func ServiceAccountID(clusterName string) string {
	const suffix, max = "-nodes", 30
	base := clusterName
	if len(base) > max-len(suffix) {
		base = strings.TrimRight(base[:max-len(suffix)], "-")
	}
	return base + suffix
}

// gkeMaintenance is the validated maintenance window for the gke package.
func gkeMaintenance(w stacks.MaintenanceWindow) *gke.Maintenance {
	d, err := time.ParseDuration(w.Duration)
	if err != nil {
		return nil
	}
	return &gke.Maintenance{Start: w.Start, Duration: d, Days: w.Days}
}

// gcpProjectID: 6-30 lower-case letters, digits and hyphens, starting with a letter, not ending
// with a hyphen; optionally domain-scoped (example.com:project).
var gcpProjectID = regexp.MustCompile(`^([a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]$`)

// checkRegistryProjects checks the projects whose Artifact Registry the node account reads: only
// GKE's node account reads them (the simulated cloud accepts them, to mirror a gcp stack).
func checkRegistryProjects(c *stacks.Config, v *stacks.Validator) {
	k := c.Cluster
	if len(k.RegistryProjects) > 0 && c.Cloud != stacks.CloudGCP && !c.CloudEntry().Local {
		v.Add("cluster.registryProjects", strings.Join(k.RegistryProjects, ","), "only for cloud gcp (the GKE node account reads "+
			"Artifact Registry there); on cloud "+c.Cloud+" pull from them with kolotoc:registries")
	}
	projects := map[string]bool{}
	for i, p := range k.RegistryProjects {
		key := fmt.Sprintf("cluster.registryProjects[%d]", i)
		switch {
		case !gcpProjectID.MatchString(p):
			v.Add(key, p, "not a GCP project ID; allowed: 6-30 lower-case letters, digits and hyphens starting with a letter, e.g. shared-images")
		case projects[p]:
			v.Add(key, p, "named twice; each project once")
		case p == k.Project && p != "":
			v.Add(key, p, "the cluster's own project (cluster.project): the node account reads its Artifact Registry already; remove it")
		}
		projects[p] = true
	}
}
