package storage

import (
	"kolotoc/components/meta"
)

// Key is the storage's config key, kolotoc:storage: the prefix of every problem Validate reports.
const Key = "storage"

// Types a stack can name in kolotoc:storage.type. Which ones a cloud allows, and what a cloud
// type creates, the stack decides (it selects the store); the claim every workload mounts is
// this package's whatever the type.
const (
	TypeInClusterNFS = "in-cluster-nfs" // an NFS server Deployment inside the namespace
	TypeNFS          = "nfs"            // an external NFS server: storage.server + storage.path
	TypeFilestore    = "filestore"      // gcp: a Filestore instance, mounted over NFS
	TypeEFS          = "efs"            // aws: an EFS file system through the EFS CSI driver
	TypeAzureFiles   = "azurefiles"     // azure: an Azure Files share through the Azure Files CSI driver
	TypeLocal        = "local"          // simulated, existing: a directory of the node (hostPath), for one-node clusters
)

// Scratch types for kolotoc:storage.scratch.type.
const (
	ScratchEmptyDir = "emptyDir" // node-local, wiped with the pod
	ScratchHostPath = "hostPath" // a local SSD mounted on the node at scratch.path
)

// ScratchTypes are the allowed kolotoc:storage.scratch.type values.
var ScratchTypes = []string{ScratchEmptyDir, ScratchHostPath}

// Config is the shared storage's config section, kolotoc:storage, as the stack file says it: the
// ReadWriteMany volume for checkpoints and logs, plus per-pod scratch. The cloud stores' own
// settings (tier, zone, account, protocol, the existing stores) are read by the stack, which
// selects and creates the store; this package mounts it.
type Config struct {
	Type      string `json:"type"`      // in-cluster-nfs | nfs | local (simulated, existing) | filestore (gcp) | efs (aws) | azurefiles (azure); default in-cluster-nfs
	Server    string `json:"server"`    // nfs: server address; required for type nfs
	Path      string `json:"path"`      // nfs: exported path, default /; local: the node's directory, default /var/lib/kolotoc/<namespace>/shared
	Size      string `json:"size"`      // claim size as a quantity; default 100Gi, on filestore its tier's smallest instance (1024Gi for ZONAL)
	MountPath string `json:"mountPath"` // where every workload mounts it; default /shared
	Image     string `json:"image"`     // in-cluster-nfs: server image; default DefaultServerImage
	Protect   bool   `json:"protect"`   // refuse `pulumi destroy` of the claim, its volume and the cloud file store; default false
	Tier      string `json:"tier"`      // filestore: BASIC_HDD | BASIC_SSD | ZONAL | REGIONAL (default ZONAL); efs: throughput mode elastic | bursting | provisioned (default elastic); azurefiles: Premium | Standard (default Premium)
	Zone      string `json:"zone"`      // filestore: zone of a BASIC_* or ZONAL instance; default cluster.zone, else the first zone of the towers' pool
	Account   string `json:"account"`   // azurefiles: storage account name, 3-24 lowercase letters and digits, globally unique; default derived from project, stack and cluster name
	// Protocol (azurefiles): nfs (NFS 4.1, no account key, needs tier Premium and cluster.subnetId)
	// | smb (mounted with the account key); default nfs with cluster.subnetId, else smb.
	Protocol string `json:"protocol"`
	// ClientRanges (filestore): CIDRs allowed to mount the share (its NFS export's ipRanges, read-write, no
	// root squash); default the node ranges of GCP's auto-mode `default` network, 10.128.0.0/9;
	// required on another cluster.network.
	ClientRanges []string `json:"clientRanges"`
	// PrivateEndpoint (azurefiles, protocol nfs): the account's public endpoint refuses every
	// network (publicNetworkAccess Disabled) and the share is reached through a private endpoint
	// in cluster.subnetId, named through the privatelink.file.core.windows.net zone linked to the
	// subnet's virtual network; default false (turned on for a share already mounted, its mounts
	// stall until they are made again).
	PrivateEndpoint bool `json:"privateEndpoint"`
	// PrivateDNSZoneID (with privateEndpoint): an existing privatelink.file.core.windows.net zone,
	// already linked to that virtual network, used instead of making one (a network can be linked
	// to one zone of that name only); default none.
	PrivateDNSZoneID string        `json:"privateDnsZoneId"`
	Scratch          ScratchConfig `json:"scratch"`

	// Existing stores (stacks/storage_existing.go): Kolotoc mounts them and creates nothing cloud-side.
	FileSystemID  string `json:"fileSystemId"`  // efs: an existing file system (fs-…) to mount instead of creating one
	AccessPointID string `json:"accessPointId"` // efs with fileSystemId: mount through this access point (fsap-…); default none
	Share         string `json:"share"`         // azurefiles: an existing share in storage.account to mount instead of creating one
	// ShareName is the name of the Azure Files share Kolotoc creates (the TF charts named theirs);
	// default "shared". Changing it is a new, empty share (guarded as storage.type is).
	ShareName string `json:"shareName"`
	// PerformanceMode is the EFS file system's performance mode: generalPurpose | maxIO, fixed
	// when it is created; default generalPurpose.
	PerformanceMode string `json:"performanceMode"`
	// ThroughputMibps is the provisioned throughput of an EFS file system with tier provisioned,
	// in MiB/s; required with it, refused otherwise.
	ThroughputMibps int      `json:"throughputMibps"`
	ResourceGroup   string   `json:"resourceGroup"` // azurefiles with share: the account's resource group; required with share
	MountOptions    []string `json:"mountOptions"`  // nfs: mount options of the volume; default nfsvers=4.1, hard

	// Backup (a file store Kolotoc creates: efs, azurefiles): copies of the shared data that
	// outlive a deletion or an overwrite (stacks/storage_cloud.go, docs/recovery.md).
	Backup BackupConfig `json:"backup"`

	// AllowReplace: one update may replace storage deployed with protect (stacks/guard.go); default false.
	AllowReplace bool `json:"allowReplace"`
}

// BackupConfig is kolotoc:storage.backup.
type BackupConfig struct {
	// Enabled: efs, the file system's automatic backups (AWS Backup's default plan: daily, kept
	// 35 days); azurefiles, share soft delete (a deleted share is kept retentionDays days and
	// can be undeleted). Default false.
	Enabled bool `json:"enabled"`
	// RetentionDays (azurefiles): days a deleted share stays recoverable, 1..365; default 7.
	RetentionDays int `json:"retentionDays"`
}

// ScratchConfig is per-pod fast local space (kolotoc:storage.scratch).
type ScratchConfig struct {
	Type      string `json:"type"`      // emptyDir | hostPath; default emptyDir
	Path      string `json:"path"`      // hostPath: node path (a local SSD mount); required for hostPath
	SizeLimit string `json:"sizeLimit"` // emptyDir: size limit as a quantity; default 50Gi
	MountPath string `json:"mountPath"` // where workloads mount it; default /scratch
}

// DefaultServerImage is the in-cluster NFS server's image when storage.image is empty. The
// volume-nfs image of the Kubernetes examples is a Docker v1 manifest that containerd 2.1
// refuses to pull; this one is a current manifest.
const DefaultServerImage = "itsthenetwork/nfs-server-alpine:12"

// Defaults that fill zero values. Each says its unit and why.
const (
	// defaultSize: the shared claim (quantity); checkpoints of a few large models.
	defaultSize = "100Gi"
	// defaultMountPath, defaultScratchMountPath: where every workload sees storage and scratch.
	defaultMountPath        = "/shared"
	defaultScratchMountPath = "/scratch"
	// defaultScratchSizeLimit: emptyDir scratch limit (quantity) so one pod cannot fill a node's
	// disk.
	defaultScratchSizeLimit = "50Gi"
)

// Default fills the zero values the storage decides alone: the claim's size and mount path, the
// in-cluster server's image and the scratch space. The type and the path depend on the cloud
// and the namespace, and a cloud store's tier, zone and account on the cloud: the stack fills
// them. It fills zero values only, so applying it twice changes nothing.
func (s *Config) Default() {
	meta.Fill(&s.Size, defaultSize)
	meta.Fill(&s.MountPath, defaultMountPath)
	meta.Fill(&s.Image, DefaultServerImage)
	meta.Fill(&s.Scratch.Type, ScratchEmptyDir)
	meta.Fill(&s.Scratch.SizeLimit, defaultScratchSizeLimit)
	meta.Fill(&s.Scratch.MountPath, defaultScratchMountPath)
}

// Validate reports what is wrong with the storage's own settings, with their full keys: what an
// in-cluster server or a node's directory cannot do, what an external server needs, and the
// scratch space's type. Which types the cloud allows, the cloud stores' settings, and the
// syntax of quantities, paths and images (shared with every section) the stack checks.
func (s Config) Validate(p meta.Problems) {
	if s.Type == TypeInClusterNFS && s.Protect {
		p.Add(Key+".protect", "true", "storage.type in-cluster-nfs keeps its data in the server pod's emptyDir, which nothing can protect "+
			"(a restart of the pod erases it); allowed with in-cluster-nfs: false (keep checkpoints that must survive on nfs or a cloud file store)")
	}
	if s.Type == TypeNFS && s.Server == "" {
		p.Add(Key+".server", "(unset)", "required with storage.type nfs: the NFS server's address")
	}
	if s.Type == TypeLocal {
		if s.Protect {
			p.Add(Key+".protect", "true", "storage.type local is a directory of one node, which Kolotoc cannot protect (it outlives the stack on that node only); "+
				"allowed with local: false (keep checkpoints that must survive on nfs or a cloud file store)")
		}
		if s.Server != "" {
			p.Add(Key+".server", s.Server, "only for storage.type nfs; storage.type local is storage.path on the node")
		}
	}
	if s.Scratch.Type == ScratchHostPath && s.Scratch.Path == "" {
		p.Add(Key+".scratch.path", "(unset)", "required with scratch.type hostPath: the local SSD's mount point on the node")
	}
}

// Site is the scratch space as every workload's pods mount it.
func (s ScratchConfig) Site() meta.Scratch {
	out := meta.Scratch{SizeLimit: s.SizeLimit, MountPath: s.MountPath}
	if s.Type == ScratchHostPath {
		out.HostPath = s.Path
	}
	return out
}

// SharedAcross reports whether pods on as many nodes as that share a store of that type: every
// type but local, which is one node's directory (hostPath), shared only on one node. Restarts
// from a checkpoint need it (towers.maxRestarts, elastic.maxRestarts).
func SharedAcross(storageType string, nodes int) bool { return storageType != TypeLocal || nodes <= 1 }
