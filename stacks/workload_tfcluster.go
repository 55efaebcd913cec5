package stacks

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/entrypoint"
	"kolotoc/components/isolation"
	"kolotoc/components/meta"
	"kolotoc/components/tfcluster"
)

func init() { register(tfclusterWorkload) } // in Config's order (workloads.go)

// The TensorFlow cluster (kolotoc:tfcluster): parameter servers, workers, a chief and an
// evaluator (components/tfcluster), with a TensorBoard of its own when the entrypoint runs none.
var tfclusterWorkload = &workload{
	key:          tfcluster.Key,
	enabled:      func(c *Config) bool { return c.TFCluster.Enabled },
	preset:       func(c *Config) { c.TFCluster = tfcluster.NewConfig() },
	poolDefaults: func(c *Config, pools meta.Pools) { c.TFCluster.DefaultPools(pools) },
	defaults: func(c *Config) {
		meta.Fill(&c.TFCluster.TensorBoardImage, entrypoint.DefaultTensorBoardImage) // the entrypoint's
		c.TFCluster.Default()                                                        // components/tfcluster/config.go
	},
	onSuccess: func(c *Config) *string { return &c.TFCluster.OnSuccess },
	check:     (*Config).validateTFCluster,
	pools: func(c *Config) []poolUse {
		var out []poolUse
		for _, r := range c.TFCluster.Roles() {
			if r.Role.Count > 0 {
				out = append(out, poolUse{r.Role.Pool, "the TF " + r.Type + " tasks"})
			}
		}
		return out
	},
	gpus: func(c *Config) []gpuDemand {
		var out []gpuDemand
		for _, r := range c.TFCluster.Roles() {
			out = append(out, gpuDemand{who: strings.TrimPrefix(r.Key, "tfcluster."), pods: r.Role.Count, gpus: r.Role.GPUs, pool: r.Role.Pool})
		}
		return out
	},
	env: func(c *Config) []envSetting { return []envSetting{{"tfcluster.env", c.TFCluster.Env}} },
	gang: func(c *Config) *gangNeed {
		return &gangNeed{"tfcluster", "(enabled)", "the TF cluster (every task)", c.TFNeed()}
	},
	image:   func(c *Config) string { return c.TFCluster.Image },
	dirs:    func(c *Config) []string { return []string{"logs/tfcluster", "checkpoints/tfcluster"} },
	scratch: true,
	deploy: func(ctx *pulumi.Context, c *Config, w *wiring) error {
		a := TFClusterArgs(c)
		a.Site = w.site.WithPodDeps(append(append([]pulumi.Resource{}, w.mount...), w.queue...)...)
		_, err := tfcluster.New(ctx, "tfcluster", a, w.opts...)
		return err
	},
	allows:  func(c *Config) []isolation.Allow { return tfcluster.Allows(TFClusterArgs(c)) }, // the tasks' gRPC port, its own TensorBoard
	outputs: func(c *Config, kube KubeAccess) pulumi.Map { return tfcluster.Outputs(TFClusterArgs(c), kube.Kubectlf) },
}

// TFClusterArgs is the TensorFlow cluster's configuration, less its site's namespace input and
// PodDeps. Its logs go under the entrypoint's TensorBoard log directory (storage.mountPath/logs),
// so that TensorBoard shows them; the cluster runs its own TensorBoard only when the entrypoint
// runs none.
func TFClusterArgs(c *Config) *tfcluster.Args {
	on := func(dir string) string {
		return strings.TrimRight(c.Storage.MountPath, "/") + "/" + strings.Trim(dir, "/")
	}
	a := &tfcluster.Args{
		Config: c.TFCluster, Site: workloadSite(c), ScriptsName: tfcluster.ScriptsName,
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
	a.Tasks = a.Config.Tasks(func(r tfcluster.Role) string { return gpuShareCPULimit(r.CPU, c.Pool(r.Pool), r.GPUs) })
	a.Gang = c.tfGang(a.Tasks) // queue.go
	if c.tfOwnTensorBoard() {
		a.OwnTensorBoard = &tfcluster.TensorBoard{
			Name: tfcluster.TensorBoardName, Image: c.TFCluster.TensorBoardImage, Pool: c.Entrypoint.Pool, LogDir: tbLogDir,
		}
	}
	return a
}

// tfOwnTensorBoard: the TensorFlow cluster runs its own TensorBoard, since the entrypoint runs
// none and tfcluster.tensorboard is not off.
func (c *Config) tfOwnTensorBoard() bool {
	return !c.Entrypoint.TensorBoard && (c.TFCluster.TensorBoard == nil || *c.TFCluster.TensorBoard)
}

func (c *Config) validateTFCluster(v *validator) {
	tf := c.TFCluster
	if !tf.Enabled {
		return
	}
	tf.Validate(v) // the cluster's own settings (components/tfcluster/config.go)
	v.args("tfcluster.command", tf.Command)
	v.image("tfcluster.image", tf.Image)
	if c.tfOwnTensorBoard() {
		v.image("tfcluster.tensorboardImage", tf.TensorBoardImage)
	}
	for _, r := range c.TFCluster.Roles() {
		role, name := *r.Role, tfcluster.TaskName(r.Type)
		if role.Count > 0 && role.Image != tf.Image {
			v.image(r.Key+".image", role.Image)
		}
		if role.Count < 1 || role.GPUs < 0 {
			continue // none run, or their negative gpus is reported with the cluster's own settings
		}
		if pool := v.pool(c, r.Key+".pool", role.Pool, role.GPUs > 0); pool != nil {
			if role.GPUs == 0 && pool.GPUsPerNode > 0 {
				v.add(r.Key+".pool", role.Pool, fmt.Sprintf("is a GPU pool (tainted %s); a task with gpus 0 does not tolerate it: name a CPU pool or give %s.gpus", gpuTaint, r.Key))
			} else if role.GPUs > 0 {
				v.gpuPods(pool, r.Key, r.Key+".pool", role.Pool, r.Key+".gpus", role.GPUs, r.Key+".count", role.Count, "tasks")
			}
			v.fits(r.Key, pool, role.CPU, role.Memory)
		}
		v.hostname(r.Key+".count", strconv.Itoa(role.Count), fmt.Sprintf("%s-%d", name, role.Count-1), name, c.Namespace)
	}
}
