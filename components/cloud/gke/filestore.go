package gke

import (
	"errors"
	"fmt"

	"github.com/pulumi/pulumi-gcp/sdk/v7/go/gcp/filestore"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// ShareName is the Filestore file share every stack exports; the volume mounts /<ShareName>.
// Filestore share names are at most 16 characters: letters, digits and underscores.
const ShareName = "shared"

// NFSMountOptions are the mount options of a Filestore volume: Filestore serves NFSv3 (v4.1 only
// on some tiers, when asked for), and a hard mount makes a checkpoint write wait out a failover
// instead of failing.
var NFSMountOptions = []string{"nfsvers=3", "hard"}

// FilestoreArgs are the inputs of the shared Filestore instance.
type FilestoreArgs struct {
	Name        string            // instance id (1-63 characters)
	Project     string            // project id; empty = the provider's
	Location    string            // a zone for BASIC_* and ZONAL tiers, the region for REGIONAL
	Tier        string            // BASIC_HDD | BASIC_SSD | ZONAL | REGIONAL
	CapacityGiB int               // share capacity in GiB, within the tier's range
	Network     string            // VPC network the nodes are on: the cluster's
	Clients     []string          // CIDRs allowed to mount the share: the cluster's node ranges
	Protect     bool              // refuse `pulumi destroy` of the instance (it holds the checkpoints)
	Labels      map[string]string // GCP labels
}

// Filestore is the shared Filestore instance.
type Filestore struct {
	pulumi.ResourceState
	Instance *filestore.Instance
	Address  pulumi.StringOutput // the NFS server's IP address
	Path     string              // the exported path
}

// NewFilestore registers the instance.
func NewFilestore(ctx *pulumi.Context, name string, args *FilestoreArgs, opts ...pulumi.ResourceOption) (*Filestore, error) {
	if args == nil {
		return nil, errors.New("filestore: args are required")
	}
	if args.CapacityGiB < 1 || args.Location == "" || len(args.Clients) == 0 {
		return nil, fmt.Errorf("filestore %q: a capacity, a location and the clients' ranges are required", name)
	}
	f := &Filestore{Path: "/" + ShareName}
	if err := ctx.RegisterComponentResource("kolotoc:gke:Filestore", name, f, opts...); err != nil {
		return nil, fmt.Errorf("filestore %q: %w", name, err)
	}
	inst, err := filestore.NewInstance(ctx, name, RenderFilestore(args), pulumi.Parent(f), pulumi.Protect(args.Protect))
	if err != nil {
		return nil, fmt.Errorf("filestore %q: instance %q: %w", name, name, err)
	}
	f.Instance = inst
	f.Address = inst.Networks.Index(pulumi.Int(0)).IpAddresses().Index(pulumi.Int(0))
	return f, meta.RegisterOutputs(ctx, f, pulumi.Map{"address": f.Address, "path": pulumi.String(f.Path)})
}

// RenderFilestore builds the instance: one share on the cluster's network, reachable by direct
// peering (GKE nodes mount it by IP), exported to the cluster's node ranges only. The workloads
// write as root, so root is not squashed for those ranges; every other address is refused.
// pulumi-gcp v7 has no field for Filestore's own deletion protection (deletionProtectionEnabled
// came with v8): storage.protect is Pulumi's protect alone.
func RenderFilestore(a *FilestoreArgs) *filestore.InstanceArgs {
	return &filestore.InstanceArgs{
		Name:     pulumi.String(a.Name),
		Project:  optional(a.Project),
		Location: pulumi.String(a.Location),
		Tier:     pulumi.String(a.Tier),
		FileShares: &filestore.InstanceFileSharesArgs{
			Name:       pulumi.String(ShareName),
			CapacityGb: pulumi.Int(a.CapacityGiB),
			NfsExportOptions: filestore.InstanceFileSharesNfsExportOptionArray{filestore.InstanceFileSharesNfsExportOptionArgs{
				IpRanges:   pulumi.ToStringArray(a.Clients),
				AccessMode: pulumi.String("READ_WRITE"),
				SquashMode: pulumi.String("NO_ROOT_SQUASH"),
			}},
		},
		Networks: filestore.InstanceNetworkArray{filestore.InstanceNetworkArgs{
			Network:     pulumi.String(a.Network),
			Modes:       pulumi.StringArray{pulumi.String("MODE_IPV4")},
			ConnectMode: pulumi.String("DIRECT_PEERING"),
		}},
		Labels: pulumi.ToStringMap(a.Labels),
	}
}
