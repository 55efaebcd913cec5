package tfcluster

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/queue"
	"kolotoc/components/tfcluster"
	"kolotoc/stacks"
)

func init() { stacks.Register(entry) } // in Config's order (stacks/workloads.go)

// The TensorFlow cluster (kolotoc:tfcluster): parameter servers, workers, a chief and an
// evaluator (components/tfcluster), with a TensorBoard of its own when the entrypoint runs none.
var entry = &stacks.Workload{
	Key:          tfcluster.Key,
	Enabled:      func(c *stacks.Config) bool { return c.TFCluster.Enabled },
	Preset:       func(c *stacks.Config) { c.TFCluster = tfcluster.NewConfig() },
	PoolDefaults: func(c *stacks.Config, pools meta.Pools) { c.TFCluster.DefaultPools(pools) },
	Defaults: func(c *stacks.Config) {
		meta.Fill(&c.TFCluster.TensorBoardImage, entrypoint.DefaultTensorBoardImage) // the entrypoint's
		c.TFCluster.Default()                                                        // components/tfcluster/config.go
		// The chief's time to checkpoint at SIGTERM, within every task's pool's Spot notice.
		grace := meta.DefaultTerminationGraceSeconds
		for _, r := range c.TFCluster.Roles() {
			if p := c.Pool(r.Role.Pool); r.Role.Count > 0 && p != nil {
				grace = min(grace, meta.GraceDefault(c.CloudEntry().SpotNotice, p.Spot))
			}
		}
		meta.Fill(&c.TFCluster.TerminationGracePeriodSeconds, grace)
	},
	OnSuccess: func(c *stacks.Config) *string { return &c.TFCluster.OnSuccess },
	Check:     validateTFCluster,
	Pools: func(c *stacks.Config) []stacks.PoolUse {
		var out []stacks.PoolUse
		for _, r := range c.TFCluster.Roles() {
			if r.Role.Count > 0 {
				out = append(out, stacks.PoolUse{Pool: r.Role.Pool, Who: "the TF " + r.Type + " tasks"})
			}
		}
		return out
	},
	GPUs: func(c *stacks.Config) []stacks.GPUDemand {
		var out []stacks.GPUDemand
		for _, r := range c.TFCluster.Roles() {
			out = append(out, stacks.GPUDemand{Who: strings.TrimPrefix(r.Key, "tfcluster."), Pods: r.Role.Count, GPUs: r.Role.GPUs, Pool: r.Role.Pool})
		}
		return out
	},
	Env: func(c *stacks.Config) []stacks.EnvSetting {
		return []stacks.EnvSetting{{Key: "tfcluster.env", Env: c.TFCluster.Env}}
	},
	Gang: func(c *stacks.Config) *stacks.GangNeed {
		return &stacks.GangNeed{Key: "tfcluster", Value: "(enabled)", What: "the TF cluster (every task)", Need: c.TFNeed()}
	},
	Image:   func(c *stacks.Config) string { return c.TFCluster.Image },
	Dirs:    func(c *stacks.Config) []string { return []string{"logs/tfcluster", "checkpoints/tfcluster"} },
	Scratch: true,
	Deploy: func(ctx *pulumi.Context, c *stacks.Config, w *stacks.Wiring) error {
		a := Args(c)
		a.Site = w.Site.WithPodDeps(append(append([]pulumi.Resource{}, w.Mount...), w.Queue...)...)
		_, err := tfcluster.New(ctx, "tfcluster", a, w.Opts...)
		return err
	},
	Allows: func(c *stacks.Config) []isolation.Allow { return tfcluster.Allows(Args(c)) }, // the tasks' gRPC port, its own TensorBoard
	Outputs: func(c *stacks.Config, kube stacks.KubeAccess) pulumi.Map {
		return tfcluster.Outputs(Args(c), kube.Kubectlf)
	},
}

// Args is the TensorFlow cluster's configuration, less its site's namespace input and
// PodDeps. Its logs go under the entrypoint's TensorBoard log directory (storage.mountPath/logs),
// so that TensorBoard shows them; the cluster runs its own TensorBoard only when the entrypoint
// runs none.
func Args(c *stacks.Config) *tfcluster.Args {
	on := func(dir string) string {
		return strings.TrimRight(c.Storage.MountPath, "/") + "/" + strings.Trim(dir, "/")
	}
	a := &tfcluster.Args{
		Config: c.TFCluster, Site: stacks.WorkloadSite(c), ScriptsName: tfcluster.ScriptsName,
		LogDir:        on(c.TFCluster.LogDir),        // tfcluster.logDir
		CheckpointDir: on(c.TFCluster.CheckpointDir), // tfcluster.checkpointDir
	}
	if c.TFCluster.EvalDir != "" {
		a.EvalDir = on(c.TFCluster.EvalDir)
	}
	// The cluster's own TensorBoard reads logs/ as the entrypoint's does, or the log directory
	// itself when it lies elsewhere.
	tbLogDir := on("logs")
	if !strings.HasPrefix(strings.Trim(c.TFCluster.LogDir, "/")+"/", "logs/") {
		tbLogDir = a.LogDir
	}
	a.Tasks = a.Config.Tasks(func(r tfcluster.Role) string { return stacks.GPUShareCPULimit(r.CPU, c.Pool(r.Pool), r.GPUs) })
	for i := range a.Tasks { // EFA as the towers take it, for every task with GPUs
		a.Tasks[i].Fabric = c.PodFabric(a.Tasks[i].Pool, a.Tasks[i].GPUs)
	}
	a.Gang = tfGang(c, a.Tasks)
	if tfOwnTensorBoard(c) {
		a.OwnTensorBoard = &tfcluster.TensorBoard{
			Name: tfcluster.TensorBoardName, Image: c.TFCluster.TensorBoardImage, Pool: c.Entrypoint.Pool, LogDir: tbLogDir,
		}
	}
	return a
}

// tfOwnTensorBoard: the TensorFlow cluster runs its own TensorBoard, since the entrypoint runs
// none and tfcluster.tensorboard is not off.
func tfOwnTensorBoard(c *stacks.Config) bool {
	return !c.Entrypoint.TensorBoard && (c.TFCluster.TensorBoard == nil || *c.TFCluster.TensorBoard)
}

func validateTFCluster(c *stacks.Config, v *stacks.Validator) {
	tf := c.TFCluster
	if !tf.Enabled {
		return
	}
	tf.Validate(v) // the cluster's own settings (components/tfcluster/config.go)
	v.Args("tfcluster.command", tf.Command)
	v.Image("tfcluster.image", tf.Image)
	if tfOwnTensorBoard(c) {
		v.Image("tfcluster.tensorboardImage", tf.TensorBoardImage)
	}
	for _, r := range c.TFCluster.Roles() {
		role, name := *r.Role, tfcluster.TaskName(r.Type)
		if role.Count > 0 && role.Image != tf.Image {
			v.Image(r.Key+".image", role.Image)
		}
		if role.Count < 1 || role.GPUs < 0 {
			continue // none run, or their negative gpus is reported with the cluster's own settings
		}
		if pool := v.Pool(c, r.Key+".pool", role.Pool, role.GPUs > 0); pool != nil {
			if role.GPUs == 0 && pool.GPUsPerNode > 0 {
				v.Add(r.Key+".pool", role.Pool, fmt.Sprintf("is a GPU pool (tainted %s); a task with gpus 0 does not tolerate it: name a CPU pool or give %s.gpus", stacks.GPUTaint, r.Key))
			} else if role.GPUs > 0 {
				v.GPUPods(pool, r.Key, r.Key+".pool", role.Pool, r.Key+".gpus", role.GPUs, r.Key+".count", role.Count, "tasks")
			}
			v.Fits(r.Key, pool, role.CPU, role.Memory)
			meta.CheckGrace(v, "tfcluster.terminationGracePeriodSeconds", tf.TerminationGracePeriodSeconds, c.Cloud, c.CloudEntry().SpotNotice, pool.Spot, pool.Name)
		}
		v.Hostname(r.Key+".count", strconv.Itoa(role.Count), fmt.Sprintf("%s-%d", name, role.Count-1), name, c.Namespace)
	}
}

// tfGang is the TF cluster's pod group when the stack queues it: every task of every type (the
// evaluator too: it is placed with the cluster or not at all).
func tfGang(c *stacks.Config, tasks []tfcluster.Task) *meta.Gang {
	if !c.Queue.On() {
		return nil
	}
	total := 0
	for _, t := range tasks {
		total += t.Count
	}
	g := &meta.Gang{Queue: c.Queue.LocalQueue, Group: meta.GroupName(stacks.TFGroupName, ""), Total: total}
	if _, ok := c.Queue.Priorities["tfcluster"]; ok {
		g.Priority = queue.PriorityClass(c.Namespace, "tfcluster")
	}
	return g
}
