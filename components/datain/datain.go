// Package datain is the data-in Job (kolotoc:dataIn): a one-off Job that puts the training data
// into the shared store before any training pod starts, as the torchelastic guide's download pod
// put its dataset on EFS before the workers (the anchor for the shape: Kubeflow Trainer v2's
// dataset initializer, a step that fills the shared volume before the trainer nodes run).
package datain

import (
	"fmt"
	"strings"

	batchv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/batch/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/components/meta"
)

// Key is the section's config key, kolotoc:dataIn.
const Key = "dataIn"

// Config is kolotoc:dataIn as the stack file says it.
type Config struct {
	Enabled bool              `json:"enabled"` // run the Job; default false
	Image   string            `json:"image"`   // image of the Job, pinned; required when enabled
	Command []string          `json:"command"` // what fills $KOLOTOC_DATA_DIR; required when enabled
	Path    string            `json:"path"`    // directory under storage.mountPath the data goes to; default data
	Pool    string            `json:"pool"`    // node pool (a CPU pool); default entrypoint.pool
	CPU     string            `json:"cpu"`     // CPU request and limit as a quantity; default 1
	Memory  string            `json:"memory"`  // memory request and limit as a quantity; default 2Gi
	Env     []meta.EnvSetting `json:"env"`     // environment of the Job, as towers.env
	// Run is the data's id, a label value: a new id is a new Job (the old one deleted first), so
	// the data is fetched again; default none (the Job runs once, and again only when its image,
	// command, path or env change).
	Run string `json:"run"`
}

// Defaults that fill zero values, each with its unit and why.
const (
	// DefaultPath: <storage.mountPath>/data, beside checkpoints/ and logs/.
	DefaultPath = "data"
	// defaultCPU, defaultMemory: a download or a copy (cores, bytes as quantity).
	defaultCPU    = "1"
	defaultMemory = "2Gi"
	// backoffLimit: retries of the Job's pod; a download that fails three times fails `pulumi up`.
	backoffLimit = 2
	// Component is the Job's component label, and its name.
	Component = "data-in"
	// DirEnv is where the command puts the data: <storage.mountPath>/<path>.
	DirEnv = "KOLOTOC_DATA_DIR"
	// DoneMarker is the file the Job writes in DirEnv once its command succeeded.
	DoneMarker = ".kolotoc-data-in-done"
)

// Default fills the zero values; pool defaults to the entrypoint's, which the stack passes.
func (c *Config) Default(pool string) {
	meta.Fill(&c.Path, DefaultPath)
	meta.Fill(&c.Pool, pool)
	meta.Fill(&c.CPU, defaultCPU)
	meta.Fill(&c.Memory, defaultMemory)
}

// Validate reports the section's own problems with their full keys; the image's pin, the pool,
// the quantities and env the stack checks as for every workload.
func (c Config) Validate(p meta.Problems) {
	if !c.Enabled {
		return
	}
	if c.Image == "" {
		p.Add(Key+".image", "(unset)", "required with dataIn.enabled: an image with what the command runs (e.g. the AWS CLI, git, curl)")
	}
	if len(c.Command) == 0 {
		p.Add(Key+".command", "(unset)", "required with dataIn.enabled: what puts the data into $"+DirEnv)
	}
	clean := strings.Trim(c.Path, "/")
	if c.Path == "" || strings.HasPrefix(c.Path, "/") || clean == "" || strings.Contains("/"+clean+"/", "/../") || strings.Contains("/"+clean+"/", "/./") {
		p.Add(Key+".path", meta.OrUnset(c.Path), "a relative directory under storage.mountPath, without '.' or '..' (e.g. data, datasets/imagenet)")
	} else if top := strings.Split(clean, "/")[0]; top == "checkpoints" || top == "logs" || top == "code" {
		p.Add(Key+".path", c.Path, "under "+top+"/, which Kolotoc's workloads write; choose another directory (e.g. data)")
	}
}

// Args are the Job's config plus the site.
type Args struct {
	Config
	meta.Site
	Name string // the Job's name
}

// Dir is the data directory as the pods see it.
func Dir(mountPath, path string) string {
	return strings.TrimRight(mountPath, "/") + "/" + strings.Trim(path, "/")
}

// script runs the command, then marks the directory done: a training pod, or a person, can tell a
// finished copy from one a failed Job left half-way.
const script = `set -eu
mkdir -p "$` + DirEnv + `"
rm -f "$` + DirEnv + `/` + DoneMarker + `"
"$@"
date -u +%Y-%m-%dT%H:%M:%SZ > "$` + DirEnv + `/` + DoneMarker + `"
echo "data-in: done: $` + DirEnv + `"
`

// RenderJob is the Job: the command in the image, as the workloads' user, with the shared claim
// and scratch mounted and $KOLOTOC_DATA_DIR set, on the Job's pool.
func RenderJob(a *Args) *batchv1.JobArgs {
	env := corev1.EnvVarArray{corev1.EnvVarArgs{Name: pulumi.String(DirEnv), Value: pulumi.String(Dir(a.MountPath, a.Path))}}
	if a.Run != "" {
		env = append(env, corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_RUN"), Value: pulumi.String(a.Run)})
	}
	env = append(env, meta.EnvArray(a.Env)...)
	podLabels := a.Labels.PodLabels(Component)
	if a.Run != "" {
		podLabels[meta.RunLabel] = a.Run
	}
	quantities := pulumi.StringMap{"cpu": pulumi.String(a.CPU), "memory": pulumi.String(a.Memory)}
	return &batchv1.JobArgs{
		Metadata: a.Labels.ObjectMeta(a.Name, a.Namespace, Component),
		Spec: &batchv1.JobSpecArgs{
			BackoffLimit: pulumi.Int(backoffLimit),
			Template: &corev1.PodTemplateSpecArgs{
				Metadata: &metav1.ObjectMetaArgs{Labels: pulumi.ToStringMap(podLabels)},
				Spec: &corev1.PodSpecArgs{
					SecurityContext:              meta.WorkloadSecurity(a.RunAsUser),
					RestartPolicy:                pulumi.String("Never"),
					NodeSelector:                 a.Labels.PoolSelector(a.Pool),
					ImagePullSecrets:             a.Labels.ImagePullSecrets(),
					AutomountServiceAccountToken: pulumi.Bool(false),
					Containers: corev1.ContainerArray{corev1.ContainerArgs{
						Name:            pulumi.String(Component),
						Image:           pulumi.String(a.Image),
						Command:         pulumi.ToStringArray(append([]string{"/bin/sh", "-c", script, Component}, a.Command...)),
						Env:             env,
						Resources:       &corev1.ResourceRequirementsArgs{Requests: quantities, Limits: quantities},
						SecurityContext: meta.LockedDown(),
						VolumeMounts:    a.SharedMounts(),
					}},
					Volumes: a.SharedVolumes(),
				},
			},
		},
	}
}

// New registers the Job. The provider awaits a Job until it completes (kolotoc:awaitTimeout), so
// what depends on the returned Job (every training pod: the stack adds it to their PodDeps) starts
// on the data in place. A new pod template (image, command, path, env, run) is a new Job: a Job's
// template cannot change, so the old one is deleted first.
func New(ctx *pulumi.Context, name string, a *Args, opts ...pulumi.ResourceOption) (*batchv1.Job, error) {
	if a == nil {
		return nil, fmt.Errorf("data-in %q: nil args", name)
	}
	opts = append(opts, pulumi.DependsOn(a.PodDeps), pulumi.DeleteBeforeReplace(true))
	return batchv1.NewJob(ctx, name, RenderJob(a), opts...)
}

// Outputs are the Job's outputs: where the data is, and its log.
func Outputs(a *Args, kubectl func(format string, a ...any) pulumi.StringOutput) pulumi.Map {
	return pulumi.Map{
		"dataDir":    pulumi.String(Dir(a.MountPath, a.Path)),
		"dataInLogs": kubectl("-n %s logs job/%s -c %s", a.NamespaceDNS, a.Name, Component),
	}
}
