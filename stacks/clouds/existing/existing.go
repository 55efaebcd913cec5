// Package existing is the entry of cloud existing (kolotoc:cloud: existing): a cluster that runs
// already, reached through a kubeconfig; Kolotoc creates no cluster, pool or file store there. It
// registers itself with the stack (stacks.RegisterCloud); importing kolotoc/stacks/clouds
// registers it.
package existing

import "kolotoc/stacks"

func init() { stacks.RegisterCloud(entry) }

var entry = &stacks.Cloud{
	Name: stacks.CloudExisting,
	// An existing cluster may run any of them: GKE's own plugin, NVIDIA's GPU Operator, or none
	// (Kolotoc's).
	DevicePlugins: []string{stacks.DevicePluginKolotoc, stacks.DevicePluginGKE, stacks.DevicePluginGPUOperator},
	Check: func(c *stacks.Config, v *stacks.Validator) {
		if c.Cloud == stacks.CloudExisting && c.Cluster.Kubeconfig == "" {
			v.Add("cluster.kubeconfig", "(unset)", "required with cloud existing: the path of the cluster's kubeconfig")
		}
	},
}
