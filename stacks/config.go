package stacks

import (
	"kolotoc/components/dask"
	"kolotoc/components/datain"
	"kolotoc/components/elastic"
	"kolotoc/components/entrypoint"
	"kolotoc/components/etcd"
	"kolotoc/components/meta"
	"kolotoc/components/monitoring"
	"kolotoc/components/queue"
	"kolotoc/components/ring"
	"kolotoc/components/storage"
	"kolotoc/components/tfcluster"
)

// Version is the program's version, stamped on every object as app.kubernetes.io/version. Its one
// home is here, and CHANGELOG.md's latest release names it (a test checks they agree). A release
// build may stamp another at build time, through the language host's go toolchain:
// GOFLAGS=-ldflags=-X=kolotoc/stacks.Version=<version> pulumi up.
var Version = "0.1.0"

// ConfigNamespace is the Pulumi config namespace of every key (`kolotoc:towers`, …).
const ConfigNamespace = "kolotoc"

// Clouds a stack can name in `kolotoc:cloud`. Each is an entry of its own,
// stacks/clouds/<name> (cloud.go); these names are the one place this package names them.
const (
	CloudSimulated = "simulated" // kwok-managed Node objects in a local cluster
	CloudExisting  = "existing"  // a cluster reached through a kubeconfig; nothing created
	CloudGCP       = "gcp"
	CloudAWS       = "aws"
	CloudAzure     = "azure"
)

// cloudNames are the clouds in the order RegisterCloud keeps them: the order of the allowed
// values in messages, and of the catalogues a simulated stack mirrors (gcp's first).
var cloudNames = []string{CloudSimulated, CloudExisting, CloudGCP, CloudAWS, CloudAzure}

// Config is one environment, as validated. Field comments give the config key, unit and default.
//
// The workloads' sections (towers … dataIn): each entry (stacks/workloads/<key>) registers under
// its section's key, and every phase takes the workloads in the order of these fields
// (workloads.go): the entrypoint's pool defaults to the carriers' above it, and etcd deploys
// before the elastic workers below it.
type Config struct {
	Project string // Pulumi project name (Pulumi.yaml)
	Stack   string // Pulumi stack name; instance label and default names derive from it

	Cloud          string  `key:"cloud"`          // kolotoc:cloud — where the stack runs: simulated (a local cluster), existing (a cluster of yours), gcp, aws or azure; required
	Namespace      string  `key:"namespace"`      // kolotoc:namespace — Kubernetes namespace of every object; default kolotoc-<stack>
	AdoptNamespace bool    `key:"adoptNamespace"` // kolotoc:adoptNamespace — take kolotoc:namespace over although it exists and is not this stack's (adopt.go); an adopted namespace is kept on destroy; default false
	Cluster        Cluster `key:"cluster"`        // kolotoc:cluster — which cluster: the one Kolotoc creates on gcp, aws or azure, or the one a kubeconfig reaches

	NodePools  []NodePool           `key:"nodePools"`  // kolotoc:nodePools — the node pools, each a set of identical nodes; at least one
	Storage    storage.Config       `key:"storage"`    // kolotoc:storage — the shared ReadWriteMany volume for data, checkpoints and logs (mounted by every workload), and each pod's scratch space
	Towers     ring.Config          `key:"towers"`     // kolotoc:towers — the MPI hosts (one pod per GPU node, with sshd) and the launcher Job that runs mpirun over them
	Sentinels  dask.SentinelsConfig `key:"sentinels"`  // kolotoc:sentinels — Dask workers beside each tower, on its spare cores; off by default
	Carriers   dask.CarriersConfig  `key:"carriers"`   // kolotoc:carriers — Dask workers on CPU nodes
	Entrypoint entrypoint.Config    `key:"entrypoint"` // kolotoc:entrypoint — the pod serving the Dask scheduler, Jupyter, TensorBoard and the Dask dashboard

	DevicePlugin DevicePlugin   `key:"devicePlugin"` // kolotoc:devicePlugin — the NVIDIA device plugin that advertises the GPU nodes' GPUs
	Fabric       FabricSettings `key:"fabric"`       // kolotoc:fabric — what runs the fast network between GPU nodes (each pool's nodePools[i].fabric says whether it has one)

	// Optional training workloads, each off unless enabled (each stacks/workloads/<key>).
	Etcd       etcd.Config       `key:"etcd"`       // kolotoc:etcd — an etcd cluster, the rendezvous store of elastic's etcd backends; off by default
	Elastic    elastic.Config    `key:"elastic"`    // kolotoc:elastic — PyTorch elastic workers run by torchrun; off by default
	TFCluster  tfcluster.Config  `key:"tfcluster"`  // kolotoc:tfcluster — a TensorFlow cluster: parameter servers, workers, chief and evaluator; off by default
	Monitoring monitoring.Config `key:"monitoring"` // kolotoc:monitoring — Prometheus, Grafana and the DCGM exporter of the GPU nodes; off by default
	// DataIn (kolotoc:dataIn): a one-off Job that puts the training data into the shared store
	// before any training pod starts; off by default.
	DataIn datain.Config `key:"dataIn"`
	Queue  queue.Config  `key:"queue"` // kolotoc:queue — gang admission, queue and quota through Kueue (queue.go); off by default

	// RunAsUser (kolotoc:runAsUser): the uid and gid every training container runs as (towers,
	// launcher, carriers, sentinels, elastic and TF workers, Jupyter), and the owner of the shared
	// claim's root (runas.go); 0 keeps each image's own user; default 0.
	RunAsUser int `key:"runAsUser"`

	Code    Code `key:"code"`    // kolotoc:code — a git repository cloned into every pod of the training workloads (towers and launcher, carriers and sentinels, elastic workers, TF tasks) before they start (runs.go)
	Suspend bool `key:"suspend"` // kolotoc:suspend — no towers, elastic or TF pods: every GPU of the stack freed; default false

	// AwaitTimeout (kolotoc:awaitTimeout): how long `pulumi up` waits for each awaited workload,
	// Service and claim (Pulumi customTimeouts), and the launcher for its towers; a Go duration
	// of whole seconds, 1m to 24h; default 30m, 10m on the simulated cloud (timeouts.go).
	AwaitTimeout string `key:"awaitTimeout"`

	JupyterPassword  Secret `key:"jupyterPassword"`  // kolotoc:jupyterPassword — secret; required when entrypoint.jupyter is on
	SSHKeySeed       Secret `key:"sshKeySeed"`       // kolotoc:sshKeySeed — secret; required when towers.count > 0
	GrafanaPassword  Secret `key:"grafanaPassword"`  // kolotoc:grafanaPassword — secret; required when monitoring is enabled
	EntrypointTLSKey Secret `key:"entrypointTLSKey"` // kolotoc:entrypointTLSKey — secret; the PEM key of entrypoint.tlsCertificate

	PreviewOf         string            `key:"previewOf"`         // kolotoc:previewOf — set only on a preview copy (cmd/previewstack): the stack it previews, whose names it uses; never deployed (preview.go); default unset
	Fit               bool              `key:"fit"`               // kolotoc:fit — set only by `make fit` on its throw-away stacks: no readiness waits (fit.go); simulated only; default false
	Registries        []Registry        `key:"registries"`        // kolotoc:registries — private registries every pod may pull from, each password or token in kolotoc:registryPasswords (registries.go); default none
	RegistryPasswords map[string]Secret `key:"registryPasswords"` // kolotoc:registryPasswords — secret; registry server → password or token
	StorageAccountKey Secret            `key:"storageAccountKey"` // kolotoc:storageAccountKey — secret; the key of an existing SMB share (storage.share)
}

// Cluster says which cluster to use (kolotoc:cluster).
type Cluster struct {
	Name       string `json:"name"`       // cluster name; prefixes node names; default kolotoc-<stack>
	Kubeconfig string `json:"kubeconfig"` // path to a kubeconfig; simulated default .kolotoc/kubeconfig, required for existing
	Context    string `json:"context"`    // kubeconfig context; default its current-context
	Region     string `json:"region"`     // cloud region (gcp, aws, azure); required for clouds
	Zone       string `json:"zone"`       // gcp: a zone makes the cluster zonal; default regional
	Project    string `json:"project"`    // gcp project id; default the gcp provider's

	KubernetesVersion string   `json:"kubernetesVersion"` // control-plane version (gcp, aws, azure), e.g. "1.30"; default the cloud's default
	ReleaseChannel    string   `json:"releaseChannel"`    // gcp: RAPID | REGULAR | STABLE; default REGULAR
	Network           string   `json:"network"`           // gcp: VPC network of the cluster and Filestore; default "default"
	Zones             []string `json:"zones"`             // aws: availability zones of the created subnets (at least 2); default the region's first two
	VPCCIDR           string   `json:"vpcCidr"`           // aws: CIDR of the created VPC; default 10.0.0.0/16
	VPCID             string   `json:"vpcId"`             // aws: an existing VPC to use instead of creating one; needs subnetIds
	SubnetIDs         []string `json:"subnetIds"`         // aws: existing subnets (in at least 2 zones) for the cluster, nodes and EFS; needs vpcId
	SystemVMSize      string   `json:"systemVmSize"`      // azure: VM size of the AKS system pool (no workloads run there); default Standard_D4s_v5
	SystemNodes       int      `json:"systemNodes"`       // azure: nodes of the AKS system pool; default 1
	// SubnetID (azure): ARM resource ID of an existing subnet every AKS pool runs in
	// (/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/…/subnets/…),
	// with the Microsoft.Storage service endpoint; it lets the Azure Files account deny every
	// other network and serve NFS without a key; default none: AKS creates its own network.
	SubnetID    string `json:"subnetId"`
	ServiceCIDR string `json:"serviceCidr"` // azure: the Kubernetes Services' range, outside the subnet's virtual network; default AKS's 10.0.0.0/16
	PodCIDR     string `json:"podCidr"`     // azure: the CNI overlay's pod range, outside the subnet's virtual network; default AKS's 10.244.0.0/16

	// AuthorizedNetworks (gcp, aws, azure): CIDRs allowed to reach the API server (GKE master
	// authorized networks, EKS public access CIDRs, AKS authorized IP ranges); 0.0.0.0/0 and ::/0
	// are refused; default none: the public endpoint answers any address (authentication still
	// required).
	AuthorizedNetworks []string `json:"authorizedNetworks"`
	// PrivateEndpoint (gcp, aws, azure): the API server has no public endpoint, only an address in
	// the cluster's network (GKE private endpoint and private nodes, EKS private access only, AKS
	// private cluster); `pulumi up` must then run from inside that network; default false.
	PrivateEndpoint bool `json:"privateEndpoint"`
	// MaintenanceWindow (gcp): when GKE may upgrade the control plane and the nodes; default
	// Saturday and Sunday 01:00-07:00 UTC.
	MaintenanceWindow MaintenanceWindow `json:"maintenanceWindow"`
	// Protect (gcp, aws, azure): refuse `pulumi destroy` of the cluster (Pulumi protect, and the
	// GKE provider's deletionProtection); default false.
	Protect bool `json:"protect"`
	// ACRID (azure): ARM ID of an Azure Container Registry the cluster's kubelet identity may pull
	// from (AcrPull, as `az aks --attach-acr`); default none.
	ACRID string `json:"acrId"`
	// AdminPrincipalType (azure): what kind of Entra ID principal runs `pulumi up`, User or
	// ServicePrincipal (a managed identity is one); it gets the AKS RBAC Cluster Admin role, and
	// Azure refuses the grant when the kind is wrong; default User.
	AdminPrincipalType string `json:"adminPrincipalType"`
	// RegistryProjects (gcp): further projects whose Artifact Registry the node service account
	// reads (roles/artifactregistry.reader there; it always holds it on the cluster's own); default none.
	RegistryProjects []string `json:"registryProjects"`
	// PodMetadataAccess: the stack's pods may reach the clouds' node metadata endpoints
	// (169.254.169.254 and the like: the node's credentials, or GKE Workload Identity's and EKS
	// Pod Identity's token endpoints); default false, every Kolotoc namespace denies egress to
	// them.
	PodMetadataAccess bool `json:"podMetadataAccess"`
}

// MaintenanceWindow is a weekly window for GKE's automatic upgrades (kolotoc:cluster.maintenanceWindow).
type MaintenanceWindow struct {
	Start    string   `json:"start"`    // start time of day, HH:MM in UTC; default 01:00
	Duration string   `json:"duration"` // length of each window as a Go duration, 4h to 24h; default 6h
	Days     []string `json:"days"`     // days it starts on: MO, TU, WE, TH, FR, SA, SU; default [SA, SU]
}

// NodePool is one pool of identical nodes (kolotoc:nodePools[i]).
type NodePool struct {
	Name        string            `json:"name"`        // DNS-1123 label, unique; towers/carriers refer to it
	Nodes       int               `json:"nodes"`       // node count (an autoscaled pool's first count on gcp and azure); default 1, or 0 with minNodes: 0
	MaxNodes    int               `json:"maxNodes"`    // autoscaling upper bound; default nodes
	MachineType string            `json:"machineType"` // cloud machine type (clouds); optional for simulated
	GPUsPerNode int               `json:"gpusPerNode"` // nvidia.com/gpu per node; 0 = CPU pool; default 0
	GPUType     string            `json:"gpuType"`     // accelerator type, e.g. nvidia-tesla-a100; required when gpusPerNode > 0
	CPUs        int               `json:"cpus"`        // logical cores per node; default the machine type's (clouds), else 8
	Memory      string            `json:"memory"`      // memory per node as a Kubernetes quantity; default the machine type's (clouds), else 32Gi
	Labels      map[string]string `json:"labels"`      // extra node labels
	Taints      []Taint           `json:"taints"`      // extra taints; GPU pools always get nvidia.com/gpu=present:NoSchedule
	Spot        bool              `json:"spot"`        // spot/preemptible capacity (clouds); default false
	LocalSSDs   int               `json:"localSsds"`   // local SSDs per node (gcp); default 0
	Zones       []string          `json:"zones"`       // gcp: zones of the nodes, required with a regional cluster (counts are totals, split evenly); azure: availability zones "1".."3"; default the cluster's
	GPUDriver   string            `json:"gpuDriver"`   // gcp: NVIDIA driver GKE installs: DEFAULT | LATEST | INSTALLATION_DISABLED; default DEFAULT
	// MinNodes: the fewest nodes the pool's autoscaler keeps. 0 lets the pool sit at zero nodes
	// while no run needs one, so its GPUs bill only while a run holds them (docs/using/autoscaling.md);
	// maxNodes is then required. Default nodes: a fixed pool unless maxNodes is larger. (Before
	// this release minNodes: 0 meant "the same as nodes": remove the key to keep that.)
	MinNodes *int `json:"minNodes"`
	// ScaleDownAfter: how long an autoscaled pool's node stays once its last pod has left before
	// it is given back, a duration such as 30s, 10m or 1h. Default 10m.
	ScaleDownAfter string `json:"scaleDownAfter"`
	// Placement: compact | spread. compact keeps the pool's nodes in one zone and, where the
	// cloud and machine type have one, in its compact placement (GKE compact placement policy, EC2
	// cluster placement group, Azure proximity placement group), for the traffic between ranks;
	// spread lets the pool span zones. Default compact for GPU pools, spread for CPU pools
	// (fabric.go).
	Placement string `json:"placement"`
	// Fabric: auto | off. auto gives a GPU pool the fast network its machine type has between
	// nodes: EFA on AWS (interfaces, security group, device plugin, towers requesting
	// vpc.amazonaws.com/efa, NCCL's environment), gVNIC on GCP; off leaves plain TCP over the
	// pod network. Default auto (fabric.go).
	Fabric string `json:"fabric"`
	// CloudName (gcp, aws, azure): the pool's name on the cloud, pinned; a replacement then
	// deletes the old pool first (one name cannot exist twice). Default empty: a generated name
	// that changes at each replacement, the new pool created before the old one is deleted
	// (docs/recovery.md). Set it to a pool's current name to keep a pool made before generated
	// names without replacing it.
	CloudName string `json:"cloudName"`
	// Replace (gcp, aws, azure): createFirst | deleteFirst, how a change the cloud cannot make
	// in place replaces the pool. createFirst keeps the old pool (and its GPUs) until the new one
	// is created, and needs quota for both; deleteFirst needs quota for one and leaves no nodes
	// in between. Default createFirst, deleteFirst with cloudName (clouds_recovery.go).
	Replace string `json:"replace"`
	// Real: the pool is the local cluster's real node(s) (simulated cloud only): no Node is
	// registered, workloads select the label kolotoc.dev/real-node=true, cpus and memory describe
	// the real node for the capacity checks, and gpusPerNode must be 0; default false.
	Real bool `json:"real"`
	// Devices are what each node advertises beyond cpu, memory and GPUs, name to quantity per
	// node: extended resources of a device plugin (rdma/hca: 1) and pre-allocated huge pages
	// (hugepages-2Mi: 4Gi). Simulated nodes carry them as capacity; on the clouds they say what
	// the pool's device plugins and kubelet provide, so that towers.resources is checked against
	// them. Default none.
	Devices meta.QuantityMap `json:"devices"`
}

// Taint is a node taint (kolotoc:nodePools[i].taints[j]).
type Taint struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"` // NoSchedule | PreferNoSchedule | NoExecute
}

// DevicePlugin is the NVIDIA device plugin DaemonSet (kolotoc:devicePlugin).
type DevicePlugin struct {
	Enabled *bool  `json:"enabled"` // default true when any pool has GPUs and provider is kolotoc
	Image   string `json:"image"`   // the NVIDIA device plugin's image, pinned by tag; default DefaultDevicePluginImage
	// Provider: who runs the device plugin on the GPU nodes, kolotoc | gke | gpuOperator
	// (gpuagents.go); default gke on gcp, kolotoc elsewhere.
	Provider string `json:"provider"`
}

// FabricSettings are what runs the node pools' fabric (kolotoc:fabric); each pool says whether it
// has one (nodePools[i].fabric).
type FabricSettings struct {
	// EFAPluginImage: the EFA device plugin's image, run on EFA nodes; default its release in the
	// cluster region's EKS registry (us-east-1's on a simulated stack without a region).
	EFAPluginImage string `json:"efaPluginImage"`
}

// Secret is a secret config value. It prints as "[secret]" so that it cannot leak through a log
// or an error message by accident; Reveal is the only way to read it.
type Secret struct {
	value string
	set   bool
}

// NewSecret wraps a secret value.
func NewSecret(v string) Secret { return Secret{value: v, set: v != ""} }

// Reveal returns the plaintext, to be handed to pulumi.ToSecret and nowhere else.
func (s Secret) Reveal() string { return s.value }

// IsSet reports whether a value was given.
func (s Secret) IsSet() bool { return s.set }

// String keeps the value out of fmt output.
func (s Secret) String() string { return "[secret]" }

// GoString keeps the value out of %#v output.
func (s Secret) GoString() string { return "[secret]" }
