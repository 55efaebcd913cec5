package stacks

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/pulumi/pulumi-aws/sdk/v6/go/aws"
	azurenative "github.com/pulumi/pulumi-azure-native-sdk/v2"
	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp"
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/cloud/aks"
	"kolotoc/components/cloud/eks"
	"kolotoc/components/cloud/gke"
	"kolotoc/components/cluster"
	"kolotoc/components/meta"
	"kolotoc/components/storage"
)

// Logical names of what the clouds register; resource names on the cloud derive from
// cluster.name (default kolotoc-<stack>), never from these.
const (
	cloudClusterName = "cluster"
	cloudStoreName   = "shared-store"
	cloudNetworkName = "network"
)

// cloudResult is what a cloud hands to the rest of the stack besides the Kubernetes provider: how
// the shared volume reaches its file store, and the stack outputs of the cluster. It is nil for
// the simulated cloud and an existing cluster; its methods accept that.
type cloudResult struct {
	store   *cloudVolume // how the shared volume reaches the file store the cloud made; nil for none
	outputs pulumi.Map
	kube    KubeAccess // how a user's kubectl reaches the cluster (kubeaccess.go)
}

// volume is how the shared volume reaches the cloud's file store, nil when the cloud made none.
func (r *cloudResult) volume() *cloudVolume {
	if r == nil {
		return nil
	}
	return r.store
}

// exports are the cloud's stack outputs: the cluster's name and its kubeconfig (a secret).
func (r *cloudResult) exports() pulumi.Map {
	if r == nil {
		return nil
	}
	return r.outputs
}

// deployCloud creates the stack's cluster and file store on gcp, aws or azure, and the one
// Kubernetes provider every component uses, built from the cluster's kubeconfig.
func deployCloud(ctx *pulumi.Context, c *Config) (*kubernetes.Provider, []pulumi.Resource, *cloudResult, error) {
	var (
		kubeconfig pulumi.StringOutput
		deps       []pulumi.Resource
		res        *cloudResult
		err        error
	)
	switch c.Cloud {
	case CloudGCP:
		kubeconfig, deps, res, err = deployGCP(ctx, c)
	case CloudAWS:
		kubeconfig, deps, res, err = deployAWS(ctx, c)
	case CloudAzure:
		kubeconfig, deps, res, err = deployAzure(ctx, c)
	default:
		err = fmt.Errorf("%s:cloud = %s: not a cloud", ConfigNamespace, c.Cloud)
	}
	if err != nil {
		return nil, nil, nil, err
	}
	res.outputs["clusterName"] = pulumi.String(c.Cluster.Name)
	res.outputs["kubeconfig"] = kubeconfig
	provider, err := kubernetes.NewProvider(ctx, "k8s", &kubernetes.ProviderArgs{
		Kubeconfig: kubeconfig,
		// Only a change of cluster replaces the provider (and so every object); new
		// credentials for the same cluster are an update.
		ClusterIdentifier:     pulumi.String(c.Cluster.Name),
		EnableServerSideApply: pulumi.Bool(true),
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return provider, deps, res, nil
}

func deployGCP(ctx *pulumi.Context, c *Config) (pulumi.StringOutput, []pulumi.Resource, *cloudResult, error) {
	k := c.Cluster
	pargs := &gcp.ProviderArgs{Region: pulumi.String(k.Region), DefaultLabels: pulumi.ToStringMap(cloudLabels(c))}
	if k.Project != "" {
		pargs.Project = pulumi.String(k.Project)
	}
	prov, err := gcp.NewProvider(ctx, "gcp", pargs)
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onGCP := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store
	pools := make([]gke.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		labels, taints := c.cloudNodeLabels(p), cluster.NodeTaints(c.SimulatedPool(p))
		f := c.PoolFabric(p)
		pools[i] = gke.Pool{
			Compact: f.PlacementGroup, GVNIC: f.GVNIC,
			Name: p.Name, MachineType: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			Zones: p.Zones, GPUs: p.GPUsPerNode, GPUType: p.GPUType, GPUDriver: p.GPUDriver, Spot: p.Spot,
			LocalSSDs: p.LocalSSDs, SSDsAsEphemeral: c.Storage.Scratch.Type == storage.ScratchEmptyDir, Labels: labels,
			Taints: taints, CloudName: p.CloudName, DeleteFirst: p.Replace == ReplaceDeleteFirst,
		}
	}
	cl, err := gke.NewCluster(ctx, cloudClusterName, &gke.ClusterArgs{
		Name: k.Name, Project: k.Project, Region: k.Region, Zone: k.Zone, Network: k.Network,
		ReleaseChannel: k.ReleaseChannel, KubernetesVersion: k.KubernetesVersion,
		ServiceAccountID: gkeServiceAccountID(k.Name), Pools: pools, ResourceLabels: cloudLabels(c), RegistryProjects: k.RegistryProjects,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		Maintenance: gkeMaintenance(k.MaintenanceWindow), WebhookPorts: c.WebhookPorts(),
	}, onGCP, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &cloudResult{outputs: pulumi.Map{}, kube: cloudKubeAccess(c, cl.Project)}
	if s := c.Storage; c.store().cloudStore { // a Filestore instance (storage_cloud.go)
		location := s.Zone
		if s.Tier == FilestoreRegional {
			location = k.Region
		}
		fs, err := gke.NewFilestore(ctx, cloudStoreName, &gke.FilestoreArgs{
			Name: k.Name + "-shared", Project: k.Project, Location: location, Tier: s.Tier,
			CapacityGiB: gibOf(s.Size), Network: k.Network, Clients: s.ClientRanges, Protect: s.Protect, Labels: cloudLabels(c),
		}, onGCP, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.store = &cloudVolume{serverAddress: fs.Address, path: fs.Path, mountOptions: gke.NFSMountOptions}
		res.outputs["filestoreAddress"] = fs.Address
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

func deployAWS(ctx *pulumi.Context, c *Config) (pulumi.StringOutput, []pulumi.Resource, *cloudResult, error) {
	k := c.Cluster
	tags := pulumi.ToStringMap(cloudLabels(c))
	prov, err := aws.NewProvider(ctx, "aws", &aws.ProviderArgs{
		Region:      pulumi.String(k.Region),
		DefaultTags: &aws.ProviderDefaultTagsArgs{Tags: tags},
	})
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onAWS := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store

	var subnets []pulumi.StringInput
	var vpcID pulumi.StringInput
	var zones []string // the created subnets' zones, in subnet order; none with an existing VPC
	if k.VPCID != "" {
		vpcID = pulumi.String(k.VPCID)
		for _, id := range k.SubnetIDs {
			subnets = append(subnets, pulumi.String(id))
		}
	} else {
		zones = k.Zones
		if len(zones) == 0 {
			if zones, err = eks.DefaultZones(ctx, defaultAWSZones, pulumi.Provider(prov)); err != nil {
				return pulumi.StringOutput{}, nil, nil, fmt.Errorf("%s:cluster.zones: %w", ConfigNamespace, err)
			}
		}
		net, err := eks.NewNetwork(ctx, cloudNetworkName, &eks.NetworkArgs{
			Name: k.Name, CIDR: k.VPCCIDR, Zones: zones, ClusterName: k.Name,
		}, onAWS)
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		vpcID, subnets = net.VPCID, net.PrivateSubnetIDs
	}

	pools := make([]eks.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		f := c.PoolFabric(p)
		pools[i] = eks.Pool{
			Name: p.Name, InstanceType: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			GPUs: p.GPUsPerNode, Spot: p.Spot, Labels: c.cloudNodeLabels(p), Taints: cluster.NodeTaints(c.SimulatedPool(p)),
			// A compact group runs in its zone's subnet: the first zone's unless the pool names
			// one; with an existing VPC, the first of cluster.subnetIds.
			Compact: f.Compact, Subnet: max(slices.Index(zones, f.Zone), 0), EFAs: f.EFAs,
			CloudName: p.CloudName, DeleteFirst: p.Replace == ReplaceDeleteFirst,
		}
	}
	cl, err := eks.NewCluster(ctx, cloudClusterName, &eks.ClusterArgs{
		Name: k.Name, Region: k.Region, KubernetesVersion: k.KubernetesVersion, SubnetIDs: subnets, VPCID: vpcID, Pools: pools,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		// etcd's members claim block volumes; EKS installs no driver for them.
		BlockStorage: c.Etcd.Enabled,
	}, onAWS, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &cloudResult{outputs: pulumi.Map{}, kube: cloudKubeAccess(c, pulumi.StringOutput{})}
	if s := c.Storage; c.store().cloudStore { // an EFS file system, made or existing (storage_cloud.go)
		nodes := []pulumi.Resource{cl.PodIdentity}
		for _, ng := range cl.NodeGroups {
			nodes = append(nodes, ng)
		}
		fs, err := eks.NewEFS(ctx, cloudStoreName, &eks.EFSArgs{
			Name: k.Name + "-efs", ClusterName: cl.ClusterName, VPCID: vpcID, SubnetIDs: subnets,
			NodeSecurityGroupID: cl.NodeSecurityGroupID, ThroughputMode: s.Tier, Protect: s.Protect, DependsOn: nodes,
			PerformanceMode: s.PerformanceMode, ProvisionedMibps: s.ThroughputMibps,
			FileSystemID: s.FileSystemID, // an existing one: only its CSI driver is installed (storage_existing.go mounts it)
			Backup:       s.Backup.Enabled,
		}, onAWS, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.outputs["efsFileSystemId"] = fs.FileSystemID
		if s.FileSystemID != "" {
			return cl.Kubeconfig, track.Resources(), res, nil
		}
		res.store = &cloudVolume{
			// tls: efs-utils encrypts NFS in transit.
			mountOptions: []string{"tls"},
			csi: &storage.CSI{
				Driver: storage.EFSDriver, VolumeHandle: fs.FileSystemID,
				// Further claims of this class get an access point (a directory) of their own.
				ClassParameters: pulumi.StringMap{
					"provisioningMode": pulumi.String("efs-ap"), "fileSystemId": fs.FileSystemID, "directoryPerms": pulumi.String("700"),
				},
			},
		}
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

func deployAzure(ctx *pulumi.Context, c *Config) (pulumi.StringOutput, []pulumi.Resource, *cloudResult, error) {
	k := c.Cluster
	prov, err := azurenative.NewProvider(ctx, "azure-native", &azurenative.ProviderArgs{Location: pulumi.String(k.Region)})
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	onAzure := pulumi.Provider(prov)
	track := &meta.Tracker{} // what the workloads wait for: every resource of the cluster and the store
	pools := make([]aks.Pool, len(c.NodePools))
	for i, p := range c.NodePools {
		pools[i] = aks.Pool{
			Name: p.Name, VMSize: p.MachineType, Nodes: p.Nodes, MinNodes: p.Min(), MaxNodes: p.MaxNodes,
			Zones: p.Zones, Spot: p.Spot, Labels: c.cloudNodeLabels(p), Taints: cluster.NodeTaints(c.SimulatedPool(p)),
			Compact:   c.PoolFabric(p).PlacementGroup,
			CloudName: p.CloudName, DeleteFirst: p.Replace == ReplaceDeleteFirst,
		}
	}
	cl, err := aks.NewCluster(ctx, cloudClusterName, &aks.ClusterArgs{
		Name: k.Name, ResourceGroup: azureResourceGroup(k), NodeResourceGroup: k.Name + "-nodes", Location: k.Region,
		KubernetesVersion: k.KubernetesVersion, SystemVMSize: k.SystemVMSize, SystemNodes: k.SystemNodes,
		Pools: pools, Tags: cloudLabels(c),
		SubnetID: k.SubnetID, Subscription: k.AzureSubscription(),
		ServiceCIDR: k.ServiceCIDR, DNSServiceIP: k.AKSDNSServiceIP(), PodCIDR: k.PodCIDR,
		AuthorizedNetworks: k.AuthorizedNetworks, PrivateEndpoint: k.PrivateEndpoint, Protect: k.Protect,
		ACRID: k.ACRID, ACRSubscription: k.ACRSubscription(), AdminPrincipalType: k.AdminPrincipalType,
	}, onAzure, track.Option())
	if err != nil {
		return pulumi.StringOutput{}, nil, nil, err
	}
	res := &cloudResult{outputs: pulumi.Map{}, kube: cloudKubeAccess(c, pulumi.StringOutput{})}
	if s, st := c.Storage, c.store(); st.cloudStore && st.existing {
		// An existing share: nothing to create, AKS mounts it with its built-in driver (storage_existing.go).
		res.outputs["storageAccount"] = pulumi.String(s.Account)
	} else if st.cloudStore { // an Azure Files share (storage_cloud.go)
		nfs := s.Protocol == AzureFilesNFS
		protocol := aks.SMB
		if nfs {
			protocol = aks.NFS
		}
		files, err := aks.NewFiles(ctx, cloudStoreName, &aks.FilesArgs{
			Account: s.Account, ResourceGroup: cl.ResourceGroup.Name, Location: k.Region, Tier: s.Tier, Protocol: protocol, ShareName: s.ShareName,
			QuotaGiB: gibOf(s.Size), Protect: s.Protect, Tags: cloudLabels(c), SubnetID: k.SubnetID,
			PrivateEndpoint: s.PrivateEndpoint, PrivateDNSZoneID: s.PrivateDNSZoneID,
			ShareRetentionDays: backupDays(s),
		}, onAzure, track.Option())
		if err != nil {
			return pulumi.StringOutput{}, nil, nil, err
		}
		res.store = azureFilesVolume(files, cl.ResourceGroup.Name, nfs)
		res.outputs["storageAccount"] = files.Account
	}
	return cl.Kubeconfig, track.Resources(), res, nil
}

// cloudNodeLabels are the Kubernetes labels of a pool's cloud nodes: those of the simulated
// nodes (the pool label that every workload selects on, the GPU labels, the pool's own) without
// node.kubernetes.io/instance-type, which the kubelet sets itself and the clouds refuse, and
// without the spot label, which the cloud sets itself under its reserved prefix.
func (c *Config) cloudNodeLabels(p NodePool) map[string]string {
	l := cluster.NodeLabels(c.SimulatedPool(p))
	delete(l, "node.kubernetes.io/instance-type")
	if key := spotLabel(p); key != "" {
		delete(l, key)
	}
	return l
}

// cloudLabels are the labels (GCP) and tags (AWS, Azure) of every cloud resource: which stack of
// which program made it. GCP label values are lower-case letters, digits, '-' and '_'.
func cloudLabels(c *Config) map[string]string {
	clean := func(s string) string {
		s = strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
				return r
			case r >= 'A' && r <= 'Z':
				return r + 'a' - 'A'
			}
			return '-'
		}, s)
		if len(s) > 63 {
			s = s[:63]
		}
		return s
	}
	return map[string]string{
		"app":           meta.PartOf,
		"kolotoc-stack": clean(c.Stack),
		"managed-by":    "pulumi",
	}
}

// gkeServiceAccountID is the node service account's id: <cluster>-nodes, shortened to GCP's
// 30 characters.
func gkeServiceAccountID(clusterName string) string {
	const suffix, max = "-nodes", 30
	base := clusterName
	if len(base) > max-len(suffix) {
		base = strings.TrimRight(base[:max-len(suffix)], "-")
	}
	return base + suffix
}

// gkeMaintenance is the validated maintenance window for the gke package.
func gkeMaintenance(w MaintenanceWindow) *gke.Maintenance {
	d, err := time.ParseDuration(w.Duration)
	if err != nil {
		return nil
	}
	return &gke.Maintenance{Start: w.Start, Duration: d, Days: w.Days}
}

// gibOf is a validated quantity in GiB, rounded up.
func gibOf(q string) int {
	v := resource.MustParse(q)
	return int((v.Value() + (1<<30 - 1)) >> 30)
}

// deployClusterOrCloud creates the cluster on a cloud, or reaches the simulated or existing one.
func deployClusterOrCloud(ctx *pulumi.Context, c *Config, labels meta.Labels) (*kubernetes.Provider, []pulumi.Resource, *cloudResult, error) {
	if IsCloud(c.Cloud) {
		return deployCloud(ctx, c)
	}
	provider, err := deployCluster(ctx, c)
	return provider, nil, nil, err
}
