package stacks

import (
	"fmt"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"

	"kolotoc/components/fabric"
	"kolotoc/components/meta"
	"kolotoc/components/queue"
	"kolotoc/components/tfcluster"
)

// The stack's queue (kolotoc:queue, components/queue): which workloads join it, the quota it
// derives from the pools, and the checks of each queued workload against that quota.

// applyQueueDefaults fills the queue's defaults: Kolotoc installs Kueue on the clouds it makes.
func (c *Config) applyQueueDefaults() { c.Queue.Default(c.CloudEntry().Creates) }

// validateQueue checks the queue's own settings, where its Kueue comes from, and that every
// queued workload fits the quota at once: a gang larger than its queue would wait forever.
func (c *Config) validateQueue(v *Validator) {
	c.Queue.Validate(v)
	q := c.Queue
	if !q.On() {
		return
	}
	if q.Install != nil && *q.Install && !c.CloudEntry().Creates {
		v.add("queue.install", "true", fmt.Sprintf("on cloud %s the cluster's own Kueue is used (the local test bed runs one); allowed: false", c.Cloud))
	}
	if q.Image != "" {
		v.Image("queue.image", q.Image)
	}
	if q.Queued() && c.CloudEntry().ProvisioningClass == "" {
		var offer []string
		for _, cl := range registeredClouds() {
			if cl.ProvisioningClass != "" {
				offer = append(offer, cl.Name)
			}
		}
		v.add("queue.provisioning", q.Provisioning, fmt.Sprintf("cloud %s has no queued provisioning of nodes; allowed: %s, or cloud %s",
			c.Cloud, queue.ProvisioningStandard, strings.Join(offer, ", ")))
	}
	for _, wl := range c.enabledWorkloads() { // each queued workload's gang (stacks/workloads/<key>)
		if wl.Gang == nil {
			continue
		}
		if g := wl.Gang(c); g != nil {
			c.checkGang(v, g.Key, g.Value, g.What, g.Need)
		}
	}
}

// checkGang refuses a gang whose need exceeds the queue's quota in any resource.
func (c *Config) checkGang(v *Validator, key, value, what string, need map[string]string) {
	quota := c.QueueQuota()
	for _, r := range meta.SortedKeys(need) {
		have, known := quota[r]
		if !known {
			continue // an existing ClusterQueue's quota Kolotoc does not know (queue.quota)
		}
		n, errN := resource.ParseQuantity(need[r])
		h, errH := resource.ParseQuantity(have)
		if errN == nil && errH == nil && n.Cmp(h) > 0 { // a bad quantity is reported by its own key
			v.add(key, value, fmt.Sprintf(
				"%s needs %s %s at once, more than the queue's quota of %s (%s): it would never be admitted; "+
					"allowed: a workload within the quota, or a larger queue.quota", what, need[r], r, have, c.quotaSource()))
		}
	}
}

// quotaSource says where the quota the checks use comes from.
func (c *Config) quotaSource() string {
	if c.Queue.Quota != (queue.Quota{}) {
		return "queue.quota"
	}
	return "the sum of nodePools"
}

// QueueQuota is the stack's ClusterQueue quota by resource name: queue.quota where set, else the
// sum over the pools of maxNodes × each node's GPUs, CPUs and memory. With queue.clusterQueue
// (a queue the stack does not make) only what queue.quota says is known.
func (c *Config) QueueQuota() map[string]string {
	q := c.Queue.Quota
	out := map[string]string{}
	if c.Queue.ClusterQueue == "" {
		gpus, cpus := 0, 0
		mem := resource.Quantity{}
		for _, p := range c.NodePools {
			n := max(p.Nodes, p.MaxNodes)
			gpus += n * p.GPUsPerNode
			cpus += n * p.CPUs
			if m, err := resource.ParseQuantity(p.Memory); err == nil {
				for range n {
					mem.Add(m)
				}
			}
		}
		out["cpu"] = fmt.Sprint(cpus)
		out["memory"] = mem.String()
		out[meta.GPUResource] = fmt.Sprint(gpus)
		// Kueue admits a workload only if its ClusterQueue covers every resource the pods
		// request (Kueue, "Cluster Queue": "resources not covered by the ClusterQueue" leave the
		// workload inadmissible), so the quota names each further resource a queued workload
		// requests: what the pools' nodes advertise of it, or, where no pool says, what the
		// workloads request (the scheduler then decides whether nodes have it).
		for name, q := range c.poolExtras() {
			out[name] = q
		}
		for name, q := range c.queuedExtras() {
			if _, ok := out[name]; !ok {
				out[name] = q
			}
		}
	}
	if q.GPUs > 0 {
		out[meta.GPUResource] = fmt.Sprint(q.GPUs)
	}
	if q.CPU != "" {
		out["cpu"] = q.CPU
	}
	if q.Memory != "" {
		out["memory"] = q.Memory
	}
	return out
}

// poolExtras is what the pools' nodes advertise besides CPU, memory and GPUs, summed over each
// pool's largest size: EFA interfaces and their huge pages (PoolFabric), and nodePools[].devices.
func (c *Config) poolExtras() map[string]string {
	var n podsNeed
	for _, p := range c.NodePools {
		per := map[string]string{}
		if f := c.PoolFabric(p); f.EFAs > 0 {
			per[fabric.EFAResource] = fmt.Sprint(f.EFAs)
			if f.HugePages {
				per[fabric.HugePagesResource] = fmt.Sprintf("%dMi", fabric.NodeHugePagesMi)
			}
		}
		for name, q := range p.Devices.Values {
			per[name] = q
		}
		n.addExtra(max(p.Nodes, p.MaxNodes), per)
	}
	return n.extraResources()
}

// queuedExtras is what the queued workloads' gangs request besides CPU, memory and GPUs, summed.
func (c *Config) queuedExtras() map[string]string {
	var n podsNeed
	for _, wl := range c.enabledWorkloads() {
		if wl.Gang == nil {
			continue
		}
		if g := wl.Gang(c); g != nil {
			extra := map[string]string{}
			for name, q := range g.Need {
				if name != "cpu" && name != "memory" && name != meta.GPUResource {
					extra[name] = q
				}
			}
			n.addExtra(1, extra)
		}
	}
	return n.extraResources()
}

// TowersNeed is what the ring asks its queue for at once: every tower's requests (Kueue sums
// the StatefulSet's replicas; the launcher is not queued, meta.SetGang), its fabric's and
// towers.resources' included (which override the fabric's, as in the towers' containers).
func (c *Config) TowersNeed() map[string]string {
	t := c.Towers
	var n podsNeed
	n.add(t.Count, t.CPU, t.Memory, t.GPUsPerTower)
	extra := c.TowerFabric().Requests()
	req, _ := t.Resources.Quantities()
	for name, q := range req {
		if name != "cpu" && name != "memory" && name != meta.GPUResource {
			extra[name] = q
		}
	}
	n.addExtra(t.Count, extra)
	return n.resources()
}

// podsNeed sums the requests of a gang's pods, as Kueue sums a pod group's.
type podsNeed struct {
	cpu, mem resource.Quantity
	gpus     int
	extra    map[string]*resource.Quantity // further resources (EFA, huge pages, devices) by name
}

// addExtra counts pods, each requesting the further resources req (name to quantity).
func (n *podsNeed) addExtra(pods int, req map[string]string) {
	for name, s := range req {
		q, err := resource.ParseQuantity(s)
		if err != nil || pods < 1 {
			continue // reported under its own key
		}
		if n.extra == nil {
			n.extra = map[string]*resource.Quantity{}
		}
		if n.extra[name] == nil {
			n.extra[name] = &resource.Quantity{}
		}
		for range pods {
			n.extra[name].Add(q)
		}
	}
}

// extraResources is the further resources' sums by name.
func (n *podsNeed) extraResources() map[string]string {
	out := map[string]string{}
	for name, q := range n.extra {
		out[name] = q.String()
	}
	return out
}

// add counts pods, each requesting cpu, memory and gpus (an unparsable quantity, which
// validation reports under its own key, counts as none).
func (n *podsNeed) add(pods int, cpu, memory string, gpus int) {
	for range pods {
		addQuantity(&n.cpu, cpu)
		addQuantity(&n.mem, memory)
	}
	n.gpus += pods * gpus
}

// resources is the need by resource name, as the queue's quota is given.
func (n *podsNeed) resources() map[string]string {
	out := n.extraResources()
	out["cpu"], out["memory"], out[meta.GPUResource] = n.cpu.String(), n.mem.String(), fmt.Sprint(n.gpus)
	return out
}

func addQuantity(sum *resource.Quantity, s string) {
	if q, err := resource.ParseQuantity(s); err == nil {
		sum.Add(q)
	}
}

// ElasticExtras: the stack queues elastic workers above minNodes.
func (c *Config) ElasticExtras() bool {
	return c.Queue.On() && c.Elastic.Enabled && c.Elastic.Nodes > c.Elastic.MinNodes
}

// ElasticNeed is what the elastic workers' group asks its queue for at once: minNodes workers'
// requests (the workers above minNodes are admitted one at a time).
func (c *Config) ElasticNeed() map[string]string {
	el := c.Elastic
	var n podsNeed
	n.add(el.MinNodes, el.CPU, el.Memory, el.GPUsPerNode)
	n.addExtra(el.MinNodes, c.PodFabric(el.Pool, el.GPUsPerNode).Requests())
	return n.resources()
}

// TFGroupName is the TF cluster's pod group (and Kueue Workload) name.
const TFGroupName = "tfcluster"

// TFNeed is what the TF cluster asks its queue for at once: every task's requests.
func (c *Config) TFNeed() map[string]string {
	var n podsNeed
	for _, t := range c.TFCluster.Tasks(func(tfcluster.Role) string { return "" }) {
		n.add(t.Count, t.CPU, t.Memory, t.GPUs)
		n.addExtra(t.Count, c.PodFabric(t.Pool, t.GPUs).Requests())
	}
	return n.resources()
}

// WebhookPorts are the pod ports of the admission webhooks the stack installs, which a cloud's
// control plane must reach (a GKE private cluster's firewall opens them, components/cloud/gke):
// Kueue's when the stack installs it.
func (c *Config) WebhookPorts() []int {
	if q := c.Queue; q.On() && q.Install != nil && *q.Install {
		return []int{queue.KueueWebhookPort}
	}
	return nil
}

// QueueArgs is the queue's configuration, less its namespace input.
func QueueArgs(c *Config) *queue.Args {
	a := &queue.Args{
		Config: c.Queue, NamespaceDNS: c.Namespace, Labels: stackLabels(c),
		Check: c.CloudEntry().Local || c.CloudEntry().Given(),
	}
	if c.ElasticExtras() {
		// The extras' class, one below the group's (0 unless queue.priorities.elastic says), and
		// a stack-made ClusterQueue that lets a waiting group take extras' quota back.
		p := map[string]int32{queue.ElasticExtra: c.Queue.Priorities["elastic"] - 1}
		for w, v := range c.Queue.Priorities {
			p[w] = v
		}
		a.Priorities = p
		a.Preempt = c.Queue.ClusterQueue == ""
	}
	if c.Queue.ClusterQueue == "" {
		a.Quota = c.QueueQuota()
	}
	if c.Queue.Queued() {
		// Only the GPU pod sets wait for provisioned nodes: the launcher and CPU workloads run
		// on the pools that are there.
		secs, _ := queue.MaxRunDurationSeconds(c.Queue.MaxRunDuration) // validated
		a.Provisioning = &queue.Provisioning{
			Class: c.CloudEntry().ProvisioningClass, ManagedResources: []string{meta.GPUResource}, MaxRunDurationSeconds: secs,
		}
	}
	return a
}

// QueuedPool reports whether a pool's nodes come through the cloud's queued provisioning: every
// GPU pool of a stack with queue.provisioning queued.
func (c *Config) QueuedPool(p NodePool) bool { return c.Queue.Queued() && p.GPUsPerNode > 0 }

// deployQueue registers the stack's queue when it has one; what queued pods wait for.
func deployQueue(ctx *pulumi.Context, c *Config, namespace pulumi.StringInput, opts ...pulumi.ResourceOption) ([]pulumi.Resource, error) {
	if !c.Queue.On() {
		return nil, nil
	}
	a := QueueArgs(c)
	a.Namespace = namespace
	q, err := queue.New(ctx, "queue", a, opts...)
	if err != nil {
		return nil, err
	}
	return q.Ready, nil
}

// QueueOutputs are the stack's queue outputs (none without a queue).
func QueueOutputs(c *Config, kube KubeAccess) pulumi.Map {
	if !c.Queue.On() {
		return nil
	}
	cq := c.Queue.ClusterQueue
	if cq == "" {
		cq = c.Namespace
	}
	return pulumi.Map{"queue": queue.Outputs(c.Queue, cq, c.Namespace, kube.Kubectlf)}
}
