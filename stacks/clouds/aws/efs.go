package aws

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
	"kolotoc/components/storage"
	"kolotoc/stacks"
)

// EFS throughput modes for `kolotoc:storage.tier`, and performance modes
// (storage.performanceMode), as the EFS API names them.
const (
	EFSElastic        = "elastic"
	EFSBursting       = "bursting"
	EFSProvisioned    = "provisioned"
	EFSGeneralPurpose = "generalPurpose"
	EFSMaxIO          = "maxIO"
	// defaultEFSThroughput: elastic throughput scales with the burst of a checkpoint write
	// without provisioning; bursting starves after its credits run out.
	defaultEFSThroughput = EFSElastic
	// efsMaxProvisionedMibps: the CreateFileSystem API's upper bound on
	// ProvisionedThroughputInMibps (MiB/s; "Valid values are 1-3414 MiBps, with the upper limit
	// depending on Region", https://docs.aws.amazon.com/efs/latest/ug/API_CreateFileSystem.html).
	efsMaxProvisionedMibps = 3414
)

var (
	allowedEFSThroughput  = []string{EFSElastic, EFSBursting, EFSProvisioned}
	allowedEFSPerformance = []string{EFSGeneralPurpose, EFSMaxIO}
	// efsFileSystemID: fs- and 8 (older) or 17 hexadecimal digits.
	efsFileSystemID = regexp.MustCompile(`^fs-([0-9a-f]{8}|[0-9a-f]{17})$`)
	// efsAccessPointID: fsap- and 17 hexadecimal digits.
	efsAccessPointID = regexp.MustCompile(`^fsap-[0-9a-f]{17}$`)
)

// store is EFS (storage.type efs): a file system the aws cloud creates, or an existing one
// (storage.fileSystemId) it or an existing cluster mounts through the EFS CSI driver.
var store = &stacks.Store{
	Type:         storage.TypeEFS,
	ExistingHint: storage.TypeEFS + " (with storage.fileSystemId)",
	Existing:     func(s storage.Config) bool { return s.FileSystemID != "" },
	Defaults: func(c *stacks.Config) {
		s := &c.Storage
		if s.Tier == "" && s.FileSystemID == "" { // an existing file system's throughput is its own
			s.Tier = defaultEFSThroughput
		}
		if s.FileSystemID == "" {
			meta.Fill(&s.PerformanceMode, EFSGeneralPurpose)
		}
	},
	Check:    checkStore,
	Identity: identity,
	Mount:    mountExisting,
	Backup: func(c *stacks.Config, v *stacks.Validator) {
		if b := c.Storage.Backup; b.RetentionDays != 0 {
			v.Add("storage.backup.retentionDays", strconv.Itoa(b.RetentionDays),
				"EFS automatic backups keep AWS Backup's default plan (daily, kept 35 days); allowed with storage.type efs: unset")
		}
	},
}

// checkStore checks a created file system's modes and an existing one's IDs; the keys are EFS's
// alone.
func checkStore(c *stacks.Config, v *stacks.Validator) {
	s := c.Storage
	if s.Type != storage.TypeEFS {
		if s.PerformanceMode != "" || s.ThroughputMibps != 0 {
			v.Add("storage.performanceMode", meta.OrUnset(s.PerformanceMode), "storage.performanceMode and storage.throughputMibps are for storage.type efs")
		}
		only := func(key, value, typ string) {
			if value != "" {
				v.Add(key, value, "only for storage.type "+typ)
			}
		}
		only("storage.fileSystemId", s.FileSystemID, storage.TypeEFS)
		only("storage.accessPointId", s.AccessPointID, storage.TypeEFS+" with storage.fileSystemId")
		return
	}
	if s.FileSystemID == "" {
		v.OneOf("storage.tier", s.Tier, allowedEFSThroughput)
		v.OneOf("storage.performanceMode", s.PerformanceMode, allowedEFSPerformance)
		// "Max I/O performance mode is not supported ... with Elastic throughput" (Amazon EFS
		// User Guide, Performance modes: https://docs.aws.amazon.com/efs/latest/ug/performance.html#performancemodes).
		if s.PerformanceMode == EFSMaxIO && s.Tier == EFSElastic {
			v.Add("storage.performanceMode", s.PerformanceMode, "EFS does not offer Max I/O with elastic throughput; allowed with storage.tier elastic: generalPurpose (or set storage.tier bursting or provisioned)")
		}
		switch {
		case s.Tier == EFSProvisioned && (s.ThroughputMibps < 1 || s.ThroughputMibps > efsMaxProvisionedMibps):
			v.Add("storage.throughputMibps", strconv.Itoa(s.ThroughputMibps), fmt.Sprintf("required with storage.tier provisioned: MiB/s; allowed: 1..%d", efsMaxProvisionedMibps))
		case s.Tier != EFSProvisioned && s.ThroughputMibps != 0:
			v.Add("storage.throughputMibps", strconv.Itoa(s.ThroughputMibps), "only with storage.tier provisioned")
		}
	} else if s.PerformanceMode != "" || s.ThroughputMibps != 0 {
		v.Add("storage.performanceMode", meta.OrUnset(s.PerformanceMode), "an existing file system (storage.fileSystemId) keeps its own modes; leave storage.performanceMode and storage.throughputMibps unset")
	}
	checkExisting(c, v)
}

// checkExisting checks an existing file system's keys.
func checkExisting(c *stacks.Config, v *stacks.Validator) {
	s := c.Storage
	switch {
	case s.FileSystemID == "" && s.AccessPointID != "":
		v.Add("storage.accessPointId", s.AccessPointID, "needs storage.fileSystemId: the existing file system the access point belongs to")
	case s.FileSystemID == "" && c.CloudEntry().Given():
		v.Add("storage.fileSystemId", "(unset)", "required with storage.type efs on cloud existing: Kolotoc creates no file system there; "+
			"name yours, e.g. fs-0123456789abcdef0 (the cluster needs the EFS CSI driver)")
	}
	if s.FileSystemID == "" {
		return
	}
	if !efsFileSystemID.MatchString(s.FileSystemID) {
		v.Add("storage.fileSystemId", s.FileSystemID, "not an EFS file system ID; allowed: fs- and 8 or 17 hexadecimal digits, e.g. fs-0123456789abcdef0 "+
			"(aws efs describe-file-systems --query 'FileSystems[].FileSystemId')")
	}
	if s.AccessPointID != "" && !efsAccessPointID.MatchString(s.AccessPointID) {
		v.Add("storage.accessPointId", s.AccessPointID, "not an EFS access point ID; allowed: fsap- and 17 hexadecimal digits, e.g. fsap-0123456789abcdef0")
	}
	if s.Tier != "" {
		v.Add("storage.tier", s.Tier, "an existing file system keeps its own throughput mode; remove it (or storage.fileSystemId, to create one)")
	}
}

// identity: an EFS file system lives in one region, and its performance mode is fixed when it is
// created; an existing one is named by its file system, subdirectory and access point.
func identity(c *stacks.Config, id map[string]string) {
	s := c.Storage
	id["cluster.region"] = c.Cluster.Region
	if s.PerformanceMode != "" && s.PerformanceMode != EFSGeneralPurpose {
		// Fixed when the file system is created. Recorded only when not the default, so
		// that the identity of a stack from before the key is unchanged.
		id["storage.performanceMode"] = s.PerformanceMode
	}
	if s.FileSystemID != "" {
		id["storage.fileSystemId"], id["storage.path"] = s.FileSystemID, s.Path
		if s.AccessPointID != "" {
			id["storage.accessPointId"] = s.AccessPointID
		}
	}
}

// mountExisting makes the shared volume a CSI volume of the existing file system.
func mountExisting(c *stacks.Config, a *storage.Args) {
	a.InCluster = false
	a.MountOptions = []string{"tls"} // efs-utils encrypts NFS in transit (and access points need it)
	a.CSI = &storage.CSI{Driver: storage.EFSDriver, VolumeHandle: pulumi.String(EFSVolumeHandle(c.Storage))}
}

// EFSVolumeHandle is the EFS CSI driver's handle of an existing file system:
// <fileSystemId>[:<subdirectory>][:<accessPointId>] (storage.path as the subdirectory, relative to
// the access point's root when there is one; "/" is the root).
func EFSVolumeHandle(s storage.Config) string {
	path := s.Path
	if path == "/" {
		path = ""
	}
	switch {
	case s.AccessPointID != "":
		return s.FileSystemID + ":" + path + ":" + s.AccessPointID
	case path != "":
		return s.FileSystemID + ":" + path
	}
	return s.FileSystemID
}
