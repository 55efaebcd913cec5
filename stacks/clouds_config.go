package stacks

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/meta"
)

// Filestore tiers for `kolotoc:storage.tier` with storage.type filestore.
const (
	FilestoreBasicHDD = "BASIC_HDD"
	FilestoreBasicSSD = "BASIC_SSD"
	FilestoreZonal    = "ZONAL"
	FilestoreRegional = "REGIONAL"
)

// EFS throughput modes and Azure Files tiers for `kolotoc:storage.tier`.
const (
	EFSElastic     = "elastic"
	EFSBursting    = "bursting"
	EFSProvisioned = "provisioned"
	// EFS performance modes (storage.performanceMode), as the EFS API names them.
	EFSGeneralPurpose = "generalPurpose"
	EFSMaxIO          = "maxIO"
	// defaultAzureShareName: the share every stack used before storage.shareName.
	defaultAzureShareName = "shared"
	// efsMaxProvisionedMibps: the CreateFileSystem API's upper bound on
	// ProvisionedThroughputInMibps (MiB/s; "Valid values are 1-3414 MiBps, with the upper limit
	// depending on Region", https://docs.aws.amazon.com/efs/latest/ug/API_CreateFileSystem.html).
	efsMaxProvisionedMibps = 3414
	AzureFilesPremium      = "Premium"
	AzureFilesStandard     = "Standard"
)

// GPU driver installation choices of a GKE pool (`kolotoc:nodePools[i].gpuDriver`).
const (
	GKEDriverDefault  = "DEFAULT"
	GKEDriverLatest   = "LATEST"
	GKEDriverDisabled = "INSTALLATION_DISABLED"
)

// Cloud defaults that fill zero values. Each says its unit and why.
const (
	// defaultFilestoreTier: ZONAL is the tier Google positions for ML training (high throughput,
	// NFSv3, 1 TiB minimum); BASIC_HDD is too slow for checkpoints of large models.
	defaultFilestoreTier = FilestoreZonal
	// defaultEFSThroughput: elastic throughput scales with the burst of a checkpoint write
	// without provisioning; bursting starves after its credits run out.
	defaultEFSThroughput = EFSElastic
	// defaultAzureFilesTier: Premium (SSD, FileStorage account) gives the IOPS that many ranks
	// writing checkpoints at once need; Standard is for small experiments.
	defaultAzureFilesTier = AzureFilesPremium
	// defaultReleaseChannel: GKE's REGULAR channel, the one GKE recommends for production.
	defaultReleaseChannel = "REGULAR"
	// defaultGCPNetwork: the network every GCP project starts with.
	defaultGCPNetwork = "default"
	// defaultVPCCIDR: the created AWS VPC; a /16 leaves a /20 (4096 addresses) per zone for the
	// VPC CNI, which gives every pod an address of the subnet.
	defaultVPCCIDR = "10.0.0.0/16"
	// defaultAWSZones: EKS needs subnets in at least two availability zones.
	defaultAWSZones = 2
	// defaultSystemVMSize, defaultSystemNodes: the AKS system pool runs only system pods (CoreDNS,
	// metrics-server, CSI drivers); 4 vCPU, 16 GiB is the smallest size AKS recommends for it.
	defaultSystemVMSize = "Standard_D4s_v5"
	defaultSystemNodes  = 1
)

// Limits of the clouds on names that derive from cluster.name (characters).
const (
	gkeNameMax       = 40 // GKE cluster and node pool names
	eksRoleSuffixMax = 8  // "-efs-csi": the longest suffix of the IAM roles named <cluster>-<role>
	iamRoleNameMax   = 64 // AWS IAM role names
	aksDNSPrefixMax  = 54 // AKS dnsPrefix, which is cluster.name
	aksPoolNameMax   = 12 // AKS Linux agent pool names: lower-case letters and digits
	// AKSSystemPool is the name of the AKS system pool; no configured pool may take it.
	AKSSystemPool = "system"
)

var (
	allowedFilestoreTiers  = []string{FilestoreBasicHDD, FilestoreBasicSSD, FilestoreZonal, FilestoreRegional}
	allowedEFSThroughput   = []string{EFSElastic, EFSBursting, EFSProvisioned}
	allowedEFSPerformance  = []string{EFSGeneralPurpose, EFSMaxIO}
	allowedAzureFilesTiers = []string{AzureFilesPremium, AzureFilesStandard}
	allowedReleaseChannels = []string{"RAPID", "REGULAR", "STABLE"}
	allowedGPUDrivers      = []string{GKEDriverDefault, GKEDriverLatest, GKEDriverDisabled}
	allowedAzureZones      = []string{"1", "2", "3"}

	// filestoreMinGiB, filestoreMaxGiB: capacity range of each Filestore tier (GiB), from
	// Google's service-tier tables.
	filestoreMinGiB = map[string]int64{FilestoreBasicHDD: 1024, FilestoreBasicSSD: 2560, FilestoreZonal: 1024, FilestoreRegional: 1024}
	filestoreMaxGiB = map[string]int64{FilestoreBasicHDD: 65434, FilestoreBasicSSD: 65434, FilestoreZonal: 102400, FilestoreRegional: 102400}
	// azureFilesMinGiB, azureFilesMaxGiB: share quota range (GiB); Premium shares are provisioned
	// from 100 GiB, large file shares go up to 100 TiB.
	azureFilesMinGiB = map[string]int64{AzureFilesPremium: 100, AzureFilesStandard: 1}
	azureFilesMaxGiB = int64(102400)

	aksPoolName    = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)
	storageAccount = regexp.MustCompile(`^[a-z0-9]{3,24}$`)
)

// IsCloud reports whether the stack's cloud is one whose cluster Kolotoc creates.
func IsCloud(cloud string) bool { return cloud == CloudGCP || cloud == CloudAWS || cloud == CloudAzure }

// applyCloudDefaults runs first in applyDefaults: pool figures from the catalogue (so the generic
// 8-core default never hides a machine type's real size), storage tier and size, and the cloud
// keys. Like applyDefaults, it fills zero values only.
func (c *Config) applyCloudDefaults() {
	for i := range c.NodePools {
		p := &c.NodePools[i]
		if cloud, ok := catalogueCloud(c.Cloud, p.MachineType); ok {
			m := catalogue[cloud][p.MachineType]
			meta.Fill(&p.CPUs, m.VCPUs)
			meta.Fill(&p.Memory, m.Memory())
			meta.Fill(&p.GPUsPerNode, m.GPUs)
			meta.Fill(&p.GPUType, m.GPUType)
		}
		if c.Cloud == CloudGCP && p.GPUsPerNode > 0 && p.GPUDriver == "" {
			p.GPUDriver = GKEDriverDefault
		}
	}

	k := &c.Cluster
	switch c.Cloud {
	case CloudGCP:
		meta.Fill(&k.ReleaseChannel, defaultReleaseChannel)
		meta.Fill(&k.Network, defaultGCPNetwork)
	case CloudAWS:
		if k.VPCCIDR == "" && k.VPCID == "" {
			k.VPCCIDR = defaultVPCCIDR
		}
	case CloudAzure:
		meta.Fill(&k.SystemVMSize, defaultSystemVMSize)
		meta.Fill(&k.SystemNodes, defaultSystemNodes)
	}
	c.applyAccessDefaults()
	c.applyRecoveryDefaults()
	c.applyCloudStoreDefaults() // storage_cloud.go
}

// towersPool is the pool the towers will run on, as applyDefaults will choose it.
func (c *Config) towersPool() *NodePool {
	if c.Towers.Pool != "" {
		return c.Pool(c.Towers.Pool)
	}
	return c.firstPool(true)
}

// defaultStorageAccount derives a storage account name: letters and digits of the cluster name
// (or kolotoc) and a hash of project, stack and cluster, so two stacks never collide on Azure's
// global namespace and the name is the same on every run.
func defaultStorageAccount(project, stack, cluster string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(cluster) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		}
	}
	base := b.String()
	meta.Fill(&base, "kolotoc")
	sum := sha256.Sum256([]byte(project + "/" + stack + "/" + cluster))
	suffix := hex.EncodeToString(sum[:])[:8]
	if len(base) > 24-len(suffix) {
		base = base[:24-len(suffix)]
	}
	return base + suffix
}

// validateCloud checks the keys of the clouds: machine types against the catalogue, the names
// each cloud derives from cluster.name, pool zones, and the file store. It runs on every stack:
// a simulated stack that mirrors a cloud stack is checked against the same catalogue.
func (c *Config) validateCloud(v *Validator) {
	cloud := c.Cloud
	k := c.Cluster
	if IsCloud(cloud) {
		c.validateClusterNames(v)
	}
	if cloud == CloudGCP {
		v.oneOf("cluster.releaseChannel", k.ReleaseChannel, allowedReleaseChannels)
		if k.Zone != "" && k.Region != "" && !strings.HasPrefix(k.Zone, k.Region+"-") {
			v.add("cluster.zone", k.Zone, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", k.Region, k.Region, k.Region))
		}
	}
	if cloud == CloudAWS {
		c.validateAWSNetwork(v)
	}
	if cloud == CloudAzure {
		if k.SystemNodes < 1 {
			v.add("cluster.systemNodes", strconv.Itoa(k.SystemNodes), "must be at least 1 (AKS needs a system pool)")
		}
		if _, ok := LookupMachineType(CloudAzure, k.SystemVMSize); !ok {
			v.add("cluster.systemVmSize", k.SystemVMSize, "not an Azure VM size Kolotoc knows; allowed: "+machineTypeHint(CloudAzure, "Standard_D"))
		}
	}

	for i, p := range c.NodePools {
		c.validatePoolMachine(v, i, p)
		c.validatePoolZones(v, i, p)
		key := fmt.Sprintf("nodePools[%d]", i)
		if p.LocalSSDs > 0 && IsCloud(cloud) && cloud != CloudGCP {
			v.add(key+".localSsds", strconv.Itoa(p.LocalSSDs), "only gcp attaches local SSDs to a pool; on "+cloud+
				" pick a machine type with local NVMe instead; allowed: 0")
		}
		if p.GPUDriver != "" && IsCloud(cloud) && cloud != CloudGCP {
			v.add(key+".gpuDriver", p.GPUDriver, "only GKE installs GPU drivers for a pool; remove it on cloud "+cloud)
		} else if cloud == CloudGCP && p.GPUsPerNode > 0 {
			v.oneOf(key+".gpuDriver", p.GPUDriver, allowedGPUDrivers)
		}
		if cloud == CloudAzure && !aksPoolName.MatchString(p.Name) || cloud == CloudAzure && p.Name == AKSSystemPool {
			v.add(key+".name", p.Name, fmt.Sprintf("AKS pool names are 1-%d lower-case letters and digits starting with a letter, and not %q; e.g. gpu, cpu, a100",
				aksPoolNameMax, AKSSystemPool))
		}
		if cloud == CloudGCP && len(p.Name) > gkeNameMax {
			v.add(key+".name", p.Name, fmt.Sprintf("GKE node pool names are at most %d characters", gkeNameMax))
		}
	}
	if cloud == CloudAzure {
		c.validateAzureSpot(v)
	}
	c.validateCloudStorage(v) // storage_cloud.go
	c.validateAzureNetwork(v)
	c.validateAzureFilesNetwork(v) // storage_cloud.go
	c.validateAccess(v)
	c.validateFilestoreAccess(v) // storage_cloud.go
	c.validateRecovery(v)
	c.validateBackup(v) // storage_cloud.go
}

// validateAzureSpot refuses Spot for the pools Kolotoc's workloads run on: AKS taints every Spot
// node kubernetes.azure.com/scalesetpriority=spot:NoSchedule, and the workloads tolerate only the
// GPU taint, so their pods would stay Pending. Every enabled workload's pools count (workloads.go);
// Spot pools for other jobs are fine.
func (c *Config) validateAzureSpot(v *Validator) {
	users := c.workloadPools()
	for i, p := range c.NodePools {
		if p.Spot && len(users[p.Name]) > 0 {
			v.add(fmt.Sprintf("nodePools[%d].spot", i), "true", fmt.Sprintf(
				"AKS taints Spot nodes kubernetes.azure.com/scalesetpriority=spot:NoSchedule and %s do not tolerate it; allowed: false (keep Spot for pools no Kolotoc workload uses)",
				strings.Join(users[p.Name], " and ")))
		}
	}
}

func (c *Config) validateClusterNames(v *Validator) {
	name := c.Cluster.Name
	switch c.Cloud {
	case CloudGCP:
		if len(name) > gkeNameMax || (name != "" && (name[0] < 'a' || name[0] > 'z')) {
			v.add("cluster.name", name, fmt.Sprintf("GKE cluster names start with a letter and are at most %d characters (%d here)", gkeNameMax, len(name)))
		}
	case CloudAWS:
		if max := iamRoleNameMax - eksRoleSuffixMax; len(name) > max {
			v.add("cluster.name", name, fmt.Sprintf("at most %d characters on aws: the IAM roles are named <cluster.name>-efs-csi and the like (%d characters allowed)", max, iamRoleNameMax))
		}
	case CloudAzure:
		if len(name) > aksDNSPrefixMax {
			v.add("cluster.name", name, fmt.Sprintf("at most %d characters on azure: it is the AKS DNS prefix", aksDNSPrefixMax))
		}
	}
}

func (c *Config) validateAWSNetwork(v *Validator) {
	k := c.Cluster
	switch {
	case k.VPCID != "" && len(k.SubnetIDs) == 0:
		v.add("cluster.subnetIds", "[]", "required with cluster.vpcId: the existing subnets (in at least 2 zones) for the cluster, nodes and EFS")
	case k.VPCID == "" && len(k.SubnetIDs) > 0:
		v.add("cluster.vpcId", "(unset)", "required with cluster.subnetIds: the VPC those subnets are in (the EFS security group lives there)")
	case len(k.SubnetIDs) == 1:
		v.add("cluster.subnetIds", strings.Join(k.SubnetIDs, ","), "EKS needs subnets in at least 2 availability zones")
	}
	if k.VPCID != "" && len(k.Zones) > 0 {
		v.add("cluster.zones", strings.Join(k.Zones, ","), "only for a created VPC; with cluster.vpcId the subnets' zones are used")
	}
	if len(k.Zones) == 1 {
		v.add("cluster.zones", k.Zones[0], "EKS needs at least 2 availability zones")
	}
	for i, z := range k.Zones {
		if k.Region != "" && !strings.HasPrefix(z, k.Region) {
			v.add(fmt.Sprintf("cluster.zones[%d]", i), z, fmt.Sprintf("not a zone of region %s; allowed: %sa, %sb, …", k.Region, k.Region, k.Region))
		}
	}
	if k.VPCID == "" {
		_, n, err := net.ParseCIDR(k.VPCCIDR)
		ones, bits := 0, 0
		if err == nil {
			ones, bits = n.Mask.Size()
		}
		if err != nil || bits != 32 || ones < 16 || ones > 20 {
			v.add("cluster.vpcCidr", k.VPCCIDR, "allowed: an IPv4 CIDR from /16 to /20, such as 10.0.0.0/16 (each zone gets a sixteenth of it)")
		}
	}
}

// validatePoolMachine checks a pool against its machine type in the catalogue. A machine type
// the catalogue does not know stands with the shape the stack gives it (checked before defaults
// by validateShapes, machines.go).
func (c *Config) validatePoolMachine(v *Validator, i int, p NodePool) {
	key := fmt.Sprintf("nodePools[%d]", i)
	if IsCloud(c.Cloud) && p.MachineType == "" {
		v.add(key+".machineType", "(unset)", fmt.Sprintf("required with cloud %s; e.g. %s", c.Cloud, machineTypeHint(c.Cloud, "")))
		return
	}
	cloud, ok := catalogueCloud(c.Cloud, p.MachineType)
	if !ok {
		c.validateUncatalogued(v, key, p)
		return
	}
	m := catalogue[cloud][p.MachineType]
	if m.Attach {
		validateAttachedGPUs(v, key, p, m)
	} else {
		if p.GPUsPerNode != m.GPUs {
			hint := ""
			if m.GPUs == 0 && cloud == CloudGCP {
				hint = "; GCP attaches GPUs to N1 machine types only (e.g. n1-standard-8 with 1 × " + GPUT4 + ")"
			}
			v.add(key+".gpusPerNode", strconv.Itoa(p.GPUsPerNode), fmt.Sprintf("machine type %s has %d GPUs; allowed: %d (or leave it unset)%s", m.Name, m.GPUs, m.GPUs, hint))
		}
		if m.GPUs > 0 && p.GPUType != m.GPUType {
			v.add(key+".gpuType", p.GPUType, fmt.Sprintf("machine type %s carries %s; allowed: %s (or leave it unset)", m.Name, m.GPUType, m.GPUType))
		}
	}
	if p.CPUs > m.VCPUs {
		v.add(key+".cpus", strconv.Itoa(p.CPUs), fmt.Sprintf("machine type %s has %d vCPUs; allowed: 1..%d", m.Name, m.VCPUs, m.VCPUs))
	}
	if q, err := resource.ParseQuantity(p.Memory); err == nil {
		if q.Cmp(resource.MustParse(m.Memory())) > 0 {
			v.add(key+".memory", p.Memory, fmt.Sprintf("machine type %s has %s; allowed: up to %s", m.Name, m.Memory(), m.Memory()))
		}
	}
}

// validatePoolZones checks pool zones: GKE counts nodes per zone, so with a regional cluster the
// zones must be named and the totals must split evenly between them.
func (c *Config) validatePoolZones(v *Validator, i int, p NodePool) {
	key := fmt.Sprintf("nodePools[%d].zones", i)
	switch c.Cloud {
	case CloudGCP:
		region := c.Cluster.Region
		for j, z := range p.Zones {
			if region != "" && !strings.HasPrefix(z, region+"-") {
				v.add(fmt.Sprintf("%s[%d]", key, j), z, fmt.Sprintf("not a zone of region %s; allowed: %s-a, %s-b, …", region, region, region))
			}
		}
		zones := len(p.Zones)
		if zones == 0 && c.Cluster.Zone == "" {
			v.add(key, "[]", fmt.Sprintf("required with a regional cluster (cluster.zone unset): GKE would create the pool's nodes in every zone of %s; name them, e.g. [%s-a]",
				region, region))
			return
		}
		meta.Fill(&zones, 1)
		for _, n := range []struct {
			name  string
			count int
		}{{"nodes", p.Nodes}, {"minNodes", p.Min()}, {"maxNodes", p.MaxNodes}} {
			if n.count%zones != 0 {
				v.add(fmt.Sprintf("nodePools[%d].%s", i, n.name), strconv.Itoa(n.count),
					fmt.Sprintf("GKE places the same number of nodes in each of the pool's %d zones; allowed: a multiple of %d", zones, zones))
			}
		}
	case CloudAzure:
		for j, z := range p.Zones {
			v.oneOf(fmt.Sprintf("%s[%d]", key, j), z, allowedAzureZones)
		}
	case CloudAWS:
		if len(p.Zones) > 0 && p.Placement != PlacementCompact {
			v.add(key, strings.Join(p.Zones, ","), fmt.Sprintf("on aws a spread pool spans the cluster's subnets (set cluster.zones instead); "+
				"only a compact pool names its one zone (nodePools[%d].placement: %s)", i, PlacementCompact))
		}
	}
}
