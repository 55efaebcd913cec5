// Package gke makes a stack's cluster on Google Cloud: a GKE cluster whose default pool is
// removed, one node pool per configured pool (GPUs attached with their driver, the GPU taint, the
// Kolotoc pool label), a least-privilege node service account, the kubeconfig that reaches the
// cluster, and a Filestore instance for the shared storage. It is the only package that imports
// the GCP SDK, so that only the stack layer pays for compiling it.
package gke

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/container"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/projects"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/serviceaccount"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/cloud/kubeaccess"
	"kolotoc/components/meta"
)

const (
	// NodeRole is GKE's own least-privilege role for nodes: write logs and metrics, read
	// monitoring config.
	NodeRole = "roles/container.defaultNodeServiceAccount"
	// RegistryRole lets the nodes pull a team's private images from the project's Artifact
	// Registry; Kolotoc's default images are public and need nothing.
	RegistryRole = "roles/artifactregistry.reader"
	// WorkloadMetadata: pods see GKE's metadata server, which hands out Workload Identity
	// tokens only, never the node service account's.
	WorkloadMetadata = "GKE_METADATA"
	// maintenanceAnchor is the date the recurring maintenance window is written from; only its
	// time of day and the recurrence's days matter (a Saturday, for reading ease).
	maintenanceAnchor = "2024-01-06"
	// Dataplane is GKE Dataplane V2 (eBPF), which enforces NetworkPolicy.
	Dataplane = "ADVANCED_DATAPATH"
	// AuthPlugin is the kubectl credential plugin GKE requires since 1.26.
	AuthPlugin = "gke-gcloud-auth-plugin"
)

// NodeRoles are every role the node service account holds, nothing broader.
var NodeRoles = []string{NodeRole, RegistryRole}

// roleSuffix names each role's IAM member resource: <cluster>-nodes<suffix>.
var roleSuffix = map[string]string{NodeRole: "", RegistryRole: "-registry"}

// NodeScopes are the nodes' OAuth scopes, GKE's own default set (gcloud's gke-default) rather
// than cloud-platform: even a process that gets the node's token can only pull images
// (devstorage.read_only reads Container and Artifact Registry), write logs, metrics and traces,
// and report service usage, whatever roles the account is later given.
var NodeScopes = []string{
	"https://www.googleapis.com/auth/devstorage.read_only",
	"https://www.googleapis.com/auth/logging.write",
	"https://www.googleapis.com/auth/monitoring",
	"https://www.googleapis.com/auth/service.management.readonly",
	"https://www.googleapis.com/auth/servicecontrol",
	"https://www.googleapis.com/auth/trace.append",
}

// NodePoolTimeouts: creating a pool of 8-GPU machines has taken over 30 minutes when GCP must
// find the capacity; the provider's 30-minute default would fail a healthy `pulumi up`.
var NodePoolTimeouts = &pulumi.CustomTimeouts{Create: "90m", Update: "90m", Delete: "45m"}

// Taint is a node taint (one type on every cloud).
type Taint = kubeaccess.Taint

// Pool is one GKE node pool. Node counts are totals across the pool's zones.
type Pool struct {
	Name string // the pool's Kolotoc name; the node pool's name starts with it (NamePrefix)
	// CloudName pins the node pool's name on GKE (at most 40 characters); empty = GKE's provider
	// makes a new one from NamePrefix at each creation, so a replacement can create first.
	CloudName string
	// DeleteFirst: a replacement deletes the old pool before creating the new one (quota for one
	// pool only, and no GPUs between the two); otherwise the new pool is up before the old goes.
	// Required with CloudName: one name cannot exist twice.
	DeleteFirst     bool
	MachineType     string            // e.g. a2-highgpu-8g
	Nodes           int               // initial nodes (total)
	MinNodes        int               // autoscaling lower bound (total); autoscaling is on when MinNodes < MaxNodes
	MaxNodes        int               // autoscaling upper bound (total)
	Zones           []string          // node locations; empty = the cluster's zone
	GPUs            int               // GPUs per node; 0 for a CPU pool
	GPUType         string            // accelerator type, e.g. nvidia-tesla-a100
	GPUDriver       string            // DEFAULT | LATEST | INSTALLATION_DISABLED
	Spot            bool              // Spot VMs
	LocalSSDs       int               // local SSDs per node
	SSDsAsEphemeral bool              // local SSDs back emptyDir (ephemeral storage) rather than mounted at /mnt/disks/ssd*
	Labels          map[string]string // every Kubernetes label of the nodes
	Taints          []Taint           // every taint of the nodes, the GPU taint included
	// Compact: GKE's compact placement policy (nodes physically close within the pool's one
	// zone: GKE, "Define compact placement for GKE nodes"), for the traffic between ranks.
	Compact bool
	// GVNIC: Google Virtual NIC on the nodes, the network interface GCP's higher bandwidths
	// (and A3's) need (GKE, "Use Google Virtual NIC").
	GVNIC bool
	// Queued: the pool's nodes come only through GKE's queued provisioning (ProvisioningRequests
	// of class queued-provisioning.gke.io, Dynamic Workload Scheduler), all of a request at
	// once; the pool sits at zero (MinNodes 0) between requests.
	Queued bool
}

// GKE's settings of a queued pool (RenderNodePool), as GKE's guide creates one
// (https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest: gcloud container
// node-pools create --enable-queued-provisioning --enable-autoscaling --num-nodes=0
// --total-max-nodes --location-policy=ANY --reservation-affinity=none --no-enable-autorepair).
const (
	// QueuedLocationPolicy: the autoscaler takes the nodes in whichever of the pool's zones has
	// them, rather than balancing zones.
	QueuedLocationPolicy = "ANY"
	// QueuedReservation: queued nodes consume no reservation; GKE refuses queued provisioning
	// otherwise ("Queued_provisioning requires reservation affinity to be set to none",
	// hashicorp/terraform-provider-google#18341).
	QueuedReservation = "NO_RESERVATION"
)

// CompactPlacement is the placement policy type of compact pools.
const CompactPlacement = "COMPACT"

// ClusterArgs are the inputs of a GKE cluster.
type ClusterArgs struct {
	Name              string            // cluster name (at most 40 characters)
	Project           string            // project id; empty = the provider's
	Region            string            // region of a regional cluster
	Zone              string            // zone of a zonal cluster; empty = regional
	Network           string            // VPC network
	ReleaseChannel    string            // RAPID | REGULAR | STABLE
	KubernetesVersion string            // minimum control-plane version; empty = the channel's default
	ServiceAccountID  string            // account id of the node service account (6-30 characters)
	Pools             []Pool            // node pools
	ResourceLabels    map[string]string // GCP labels on the cluster and its nodes
	// RegistryProjects are further projects whose Artifact Registry the node account reads
	// (RegistryRole there); the cluster's own project is always granted.
	RegistryProjects []string

	AuthorizedNetworks []string     // CIDRs allowed to reach the control plane; empty = any (with a public endpoint)
	PrivateEndpoint    bool         // private nodes and a private control-plane endpoint only
	Maintenance        *Maintenance // when GKE may upgrade; nil = any time
	Protect            bool         // refuse `pulumi destroy` of the cluster (Pulumi protect and the provider's deletionProtection)
	// WebhookPorts are pod ports the control plane must reach (admission webhooks, e.g. Kueue's
	// 9443). A private cluster's control plane may open only 443 and 10250 on the nodes; with
	// PrivateEndpoint a firewall rule admits these (RenderWebhookFirewall). None: no rule.
	WebhookPorts []int
}

// Maintenance is a weekly window for GKE's automatic upgrades.
type Maintenance struct {
	Start    string        // time of day, HH:MM UTC
	Duration time.Duration // length of each window
	Days     []string      // RFC 5545 weekdays it starts on: MO … SU
}

// Cluster is a GKE cluster and its node pools.
type Cluster struct {
	pulumi.ResourceState
	ClusterName    pulumi.StringOutput
	Project        pulumi.StringOutput // the cluster's project: args.Project, or the provider's default
	Endpoint       pulumi.StringOutput
	Kubeconfig     pulumi.StringOutput // secret
	ServiceAccount pulumi.StringOutput // the nodes' service account email
	NodePools      []*container.NodePool
	Firewall       *Firewall // the control plane to the webhooks' ports (WebhookPorts), if any
}

// Location is where the cluster lives: its zone when zonal, else its region.
func (a *ClusterArgs) Location() string {
	if a.Zone != "" {
		return a.Zone
	}
	return a.Region
}

// NewCluster registers the cluster, its node service account and its node pools.
func NewCluster(ctx *pulumi.Context, name string, args *ClusterArgs, opts ...pulumi.ResourceOption) (*Cluster, error) {
	if args == nil {
		return nil, errors.New("gke: args are required")
	}
	if args.Name == "" || args.Location() == "" || len(args.Pools) == 0 {
		return nil, fmt.Errorf("gke %q: name, region and at least one pool are required", name)
	}
	c := &Cluster{}
	if err := ctx.RegisterComponentResource("kolotoc:gke:Cluster", name, c, opts...); err != nil {
		return nil, fmt.Errorf("gke %q: %w", name, err)
	}
	parent := pulumi.Parent(c)

	sa, err := serviceaccount.NewAccount(ctx, name+"-nodes", &serviceaccount.AccountArgs{
		AccountId:   pulumi.String(args.ServiceAccountID),
		DisplayName: pulumi.String("GKE nodes of " + args.Name),
		Project:     optional(args.Project),
	}, parent)
	if err != nil {
		return nil, fmt.Errorf("gke %q: service account %q: %w", name, name+"-nodes", err)
	}
	var roles []pulumi.Resource
	for _, r := range NodeRoles {
		// The first role keeps the name it had when it was the only one.
		role, err := projects.NewIAMMember(ctx, name+"-nodes"+roleSuffix[r], &projects.IAMMemberArgs{
			Project: sa.Project,
			Role:    pulumi.String(r),
			Member:  sa.Member,
		}, parent)
		if err != nil {
			return nil, fmt.Errorf("gke %q: IAM member %q: %w", name, name+"-nodes"+roleSuffix[r], err)
		}
		roles = append(roles, role)
	}
	for _, project := range args.RegistryProjects {
		member := name + "-nodes-registry-" + strings.ReplaceAll(project, ":", "-")
		role, err := projects.NewIAMMember(ctx, member, RenderRegistryReader(project, sa.Member), parent)
		if err != nil {
			return nil, fmt.Errorf("gke %q: IAM member %q: %w", name, member, err)
		}
		roles = append(roles, role)
	}

	// Workload Identity's pool is the project's; the account's project is the provider's
	// default when args.Project is empty.
	pool := pulumi.Sprintf("%s.svc.id.goog", sa.Project)
	cluster, err := container.NewCluster(ctx, name, RenderCluster(args, sa.Email, pool), parent, pulumi.Protect(args.Protect),
		// The default pool exists only while the cluster is created; its config is moot after.
		pulumi.IgnoreChanges([]string{"nodeConfig", "initialNodeCount"}))
	if err != nil {
		return nil, fmt.Errorf("gke %q: cluster %q: %w", name, name, err)
	}
	for _, p := range args.Pools {
		pool, err := container.NewNodePool(ctx, name+"-"+p.Name, RenderNodePool(args, p, cluster.Name, sa.Email), parent,
			pulumi.DependsOn(roles),
			pulumi.Timeouts(NodePoolTimeouts),
			// A generated name lets the new pool exist beside the old: a GPU pool keeps its GPUs
			// until its replacement has nodes, and a stockout fails the creation, not the pool.
			pulumi.DeleteBeforeReplace(p.DeleteFirst || p.CloudName != ""),
			// The autoscaler owns the node count once the pool exists.
			pulumi.IgnoreChanges(ignoredPoolChanges(p)))
		if err != nil {
			return nil, fmt.Errorf("gke %q: node pool %q: %w", name, name+"-"+p.Name, err)
		}
		c.NodePools = append(c.NodePools, pool)
	}

	if args.PrivateEndpoint && len(args.WebhookPorts) > 0 {
		fw := &Firewall{}
		err := ctx.RegisterResource(FirewallType, name+"-webhooks", RenderWebhookFirewall(args, cluster, sa.Email), fw, parent)
		if err != nil {
			return nil, fmt.Errorf("gke %q: firewall rule %q: %w", name, name+"-webhooks", err)
		}
		c.Firewall = fw
	}

	c.ClusterName = cluster.Name
	c.Project = cluster.Project
	c.Endpoint = cluster.Endpoint
	c.ServiceAccount = sa.Email
	c.Kubeconfig = pulumi.ToSecret(pulumi.All(cluster.Name, cluster.Endpoint, cluster.MasterAuth.ClusterCaCertificate()).ApplyT(
		func(v []any) string {
			ca, _ := v[2].(*string)
			return Kubeconfig(v[0].(string), v[1].(string), deref(ca))
		})).(pulumi.StringOutput)
	return c, meta.RegisterOutputs(ctx, c, pulumi.Map{
		"clusterName": c.ClusterName, "endpoint": c.Endpoint, "kubeconfig": c.Kubeconfig, "serviceAccount": c.ServiceAccount,
	})
}

// RenderRegistryReader lets the node account pull from another project's Artifact Registry (a
// team's shared images): the registry role there, nothing else.
func RenderRegistryReader(project string, member pulumi.StringInput) *projects.IAMMemberArgs {
	return &projects.IAMMemberArgs{Project: pulumi.String(project), Role: pulumi.String(RegistryRole), Member: member}
}

// RenderCluster builds the cluster: VPC-native with Dataplane V2 (NetworkPolicy enforced), on a
// release channel, its default pool removed as soon as it is created (so that every pool is one
// Kolotoc declared), Workload Identity on (workloadPool is <project>.svc.id.goog), the control
// plane reachable from the authorized networks only, upgrades in the maintenance window.
func RenderCluster(a *ClusterArgs, serviceAccount, workloadPool pulumi.StringInput) *container.ClusterArgs {
	ca := &container.ClusterArgs{
		Name:               pulumi.String(a.Name),
		Project:            optional(a.Project),
		Location:           pulumi.String(a.Location()),
		Network:            pulumi.String(a.Network),
		NetworkingMode:     pulumi.String("VPC_NATIVE"),
		IpAllocationPolicy: &container.ClusterIpAllocationPolicyArgs{},
		// GKE Dataplane V2 enforces NetworkPolicy: without it Kolotoc's policies are objects
		// that nothing applies. It is chosen when the cluster is created.
		DatapathProvider:      pulumi.String(Dataplane),
		RemoveDefaultNodePool: pulumi.Bool(true),
		InitialNodeCount:      pulumi.Int(1),
		// The provider's own guard (GKE itself has none for clusters): with cluster.protect a
		// destroy or a replacement fails until it is turned off, beside Pulumi's protect.
		DeletionProtection:     pulumi.Bool(a.Protect),
		ReleaseChannel:         &container.ClusterReleaseChannelArgs{Channel: pulumi.String(a.ReleaseChannel)},
		ResourceLabels:         pulumi.ToStringMap(a.ResourceLabels),
		WorkloadIdentityConfig: &container.ClusterWorkloadIdentityConfigArgs{WorkloadPool: workloadPool},
		// Even the short-lived default pool runs as the least-privilege account.
		NodeConfig: &container.ClusterNodeConfigArgs{
			ServiceAccount:         serviceAccount,
			OauthScopes:            pulumi.ToStringArray(NodeScopes),
			WorkloadMetadataConfig: &container.ClusterNodeConfigWorkloadMetadataConfigArgs{Mode: pulumi.String(WorkloadMetadata)},
		},
		MaintenancePolicy: renderMaintenance(a.Maintenance),
	}
	if len(a.AuthorizedNetworks) > 0 || a.PrivateEndpoint {
		// With a private endpoint and no networks listed, only the cluster's own subnet reaches it.
		var blocks container.ClusterMasterAuthorizedNetworksConfigCidrBlockArray
		for _, cidr := range a.AuthorizedNetworks {
			blocks = append(blocks, container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs{
				CidrBlock: pulumi.String(cidr), DisplayName: pulumi.String("kolotoc:cluster.authorizedNetworks"),
			})
		}
		ca.MasterAuthorizedNetworksConfig = &container.ClusterMasterAuthorizedNetworksConfigArgs{CidrBlocks: blocks}
	}
	if a.PrivateEndpoint {
		// Nodes without external addresses, the control plane on an internal one. GKE picks the
		// control plane's range (Private Service Connect) when none is given.
		ca.PrivateClusterConfig = &container.ClusterPrivateClusterConfigArgs{
			EnablePrivateNodes: pulumi.Bool(true), EnablePrivateEndpoint: pulumi.Bool(true),
		}
	}
	if a.KubernetesVersion != "" {
		ca.MinMasterVersion = pulumi.String(a.KubernetesVersion)
	}
	return ca
}

// renderMaintenance is a weekly recurring window: GKE upgrades the control plane and the nodes
// (auto-upgrade is on for every pool) only inside it.
func renderMaintenance(m *Maintenance) *container.ClusterMaintenancePolicyArgs {
	if m == nil {
		return nil
	}
	start, err := time.Parse(time.RFC3339, maintenanceAnchor+"T"+m.Start+":00Z")
	if err != nil {
		return nil // validated by the stack layer
	}
	return &container.ClusterMaintenancePolicyArgs{RecurringWindow: &container.ClusterMaintenancePolicyRecurringWindowArgs{
		StartTime:  pulumi.String(start.Format(time.RFC3339)),
		EndTime:    pulumi.String(start.Add(m.Duration).Format(time.RFC3339)),
		Recurrence: pulumi.String("FREQ=WEEKLY;BYDAY=" + strings.Join(m.Days, ",")),
	}}
}

// RenderNodePool builds one node pool. GKE counts nodes per zone, so the totals are divided by
// the number of zones (validation has made sure they divide evenly).
func RenderNodePool(a *ClusterArgs, p Pool, cluster, serviceAccount pulumi.StringInput) *container.NodePoolArgs {
	zones := len(p.Zones)
	if zones == 0 {
		zones = 1
	}
	np := &container.NodePoolArgs{
		Cluster:  cluster,
		Project:  optional(a.Project),
		Location: pulumi.String(a.Location()),
		// A queued pool's nodes are not repaired: GKE's guide creates it with auto-repair off.
		Management: &container.NodePoolManagementArgs{AutoRepair: pulumi.Bool(!p.Queued), AutoUpgrade: pulumi.Bool(true)},
		NodeConfig: renderNodeConfig(a, p, serviceAccount),
	}
	if p.CloudName != "" {
		np.Name = pulumi.String(p.CloudName)
	} else {
		np.NamePrefix = pulumi.String(NamePrefix(p.Name))
	}
	if len(p.Zones) > 0 {
		np.NodeLocations = pulumi.ToStringArray(p.Zones)
	}
	if p.Compact {
		np.PlacementPolicy = &container.NodePoolPlacementPolicyArgs{Type: pulumi.String(CompactPlacement)}
	}
	if p.Queued {
		// Total bounds (not per zone) and no nodes until a ProvisioningRequest asks for them.
		np.QueuedProvisioning = &container.NodePoolQueuedProvisioningArgs{Enabled: pulumi.Bool(true)}
		np.InitialNodeCount = pulumi.Int(0)
		np.Autoscaling = &container.NodePoolAutoscalingArgs{
			TotalMinNodeCount: pulumi.Int(0),
			TotalMaxNodeCount: pulumi.Int(p.MaxNodes),
			LocationPolicy:    pulumi.String(QueuedLocationPolicy),
		}
	} else if autoscaled(p) {
		np.InitialNodeCount = pulumi.Int(p.Nodes / zones)
		np.Autoscaling = &container.NodePoolAutoscalingArgs{
			MinNodeCount: pulumi.Int(p.MinNodes / zones),
			MaxNodeCount: pulumi.Int(p.MaxNodes / zones),
		}
	} else {
		np.NodeCount = pulumi.Int(p.Nodes / zones)
	}
	if p.GPUs > 0 {
		// A surge node of an 8-GPU machine needs quota nobody has; replace nodes one at a time.
		np.UpgradeSettings = &container.NodePoolUpgradeSettingsArgs{MaxSurge: pulumi.Int(0), MaxUnavailable: pulumi.Int(1)}
	}
	return np
}

func renderNodeConfig(a *ClusterArgs, p Pool, serviceAccount pulumi.StringInput) *container.NodePoolNodeConfigArgs {
	nc := &container.NodePoolNodeConfigArgs{
		MachineType:    pulumi.String(p.MachineType),
		ServiceAccount: serviceAccount,
		OauthScopes:    pulumi.ToStringArray(NodeScopes),
		Spot:           pulumi.Bool(p.Spot),
		Labels:         pulumi.ToStringMap(p.Labels),
		ResourceLabels: pulumi.ToStringMap(a.ResourceLabels),
		// Pods reach Google APIs as their Kubernetes service account's bound identity, never as
		// the node.
		WorkloadMetadataConfig: &container.NodePoolNodeConfigWorkloadMetadataConfigArgs{Mode: pulumi.String(WorkloadMetadata)},
	}
	// The GPU taint is declared, not left to GKE: GKE adds it only when the cluster also has a
	// pool without GPUs at the time, which a cluster whose default pool was removed may not.
	var taints container.NodePoolNodeConfigTaintArray
	for _, t := range p.Taints {
		taints = append(taints, container.NodePoolNodeConfigTaintArgs{
			Key: pulumi.String(t.Key), Value: pulumi.String(t.Value), Effect: pulumi.String(kubeaccess.TaintEffect(t.Effect)),
		})
	}
	if len(taints) > 0 {
		nc.Taints = taints
	}
	if p.GPUs > 0 {
		nc.GuestAccelerators = container.NodePoolNodeConfigGuestAcceleratorArray{container.NodePoolNodeConfigGuestAcceleratorArgs{
			Type:  pulumi.String(p.GPUType),
			Count: pulumi.Int(p.GPUs),
			GpuDriverInstallationConfig: &container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs{
				GpuDriverVersion: pulumi.String(p.GPUDriver),
			},
		}}
	}
	if p.GVNIC {
		nc.Gvnic = &container.NodePoolNodeConfigGvnicArgs{Enabled: pulumi.Bool(true)}
	}
	if p.Queued {
		nc.ReservationAffinity = &container.NodePoolNodeConfigReservationAffinityArgs{ConsumeReservationType: pulumi.String(QueuedReservation)}
	}
	if p.LocalSSDs > 0 {
		if p.SSDsAsEphemeral {
			nc.EphemeralStorageLocalSsdConfig = &container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs{LocalSsdCount: pulumi.Int(p.LocalSSDs)}
		} else {
			nc.LocalSsdCount = pulumi.Int(p.LocalSSDs)
		}
	}
	return nc
}

// PoolNameMax is GKE's limit on node pool names (characters).
const PoolNameMax = 40

// NamePrefix is the namePrefix of a pool without a CloudName: GKE's provider appends a unique
// suffix of kubeaccess.UniqueSuffixLen characters to it, within PoolNameMax.
func NamePrefix(pool string) string { return kubeaccess.NamePrefix(pool, PoolNameMax) }

func autoscaled(p Pool) bool { return p.MinNodes < p.MaxNodes }

func ignoredPoolChanges(p Pool) []string {
	if autoscaled(p) {
		return []string{"initialNodeCount", "nodeCount"}
	}
	return nil
}

func optional(s string) pulumi.StringPtrInput {
	if s == "" {
		return nil
	}
	return pulumi.String(s)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Kubeconfig is a kubeconfig for the cluster: its endpoint and CA, credentials from
// gke-gcloud-auth-plugin (so no token is ever stored in it).
func Kubeconfig(cluster, endpoint, caData string) string {
	return kubeaccess.ExecKubeconfig(cluster, "https://"+endpoint, caData,
		"command: "+AuthPlugin,
		"installHint: Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin)",
		"provideClusterInfo: true")
}
