package meta

import (
	"fmt"

	admissionv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/admissionregistration/v1"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	rbacv1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/rbac/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// What a training workload's pods share beyond their shape: the run they belong to, the
// environment the stack gives them, the code cloned into them, and the right to release their
// own GPUs when their run has succeeded.

// RunLabel labels a run's pods (the launcher's, an elastic or TF run's) with the run's id.
const RunLabel = "kolotoc.dev/run"

// Run policies: what a workload does with its pods once its run has succeeded.
const (
	OnSuccessKeep    = "keep"    // the pods stay (and hold their GPUs) until the next run or a human
	OnSuccessRelease = "release" // the run's StatefulSets are scaled to zero: every GPU is freed
)

// EnvSetting is one environment variable of a workload as its config section says it
// (kolotoc:<workload>.env[i]), shaped as in a Kubernetes container: a value, or a reference to a
// key of an existing Secret. EnvArray renders it.
type EnvSetting struct {
	Name      string     `json:"name"`
	Value     string     `json:"value"`
	ValueFrom *EnvSource `json:"valueFrom"`
}

// EnvSource is where a secret variable's value comes from (valueFrom).
type EnvSource struct {
	SecretKeyRef *SecretKeyRef `json:"secretKeyRef"`
}

// SecretKeyRef names a key of a Secret in the stack's namespace (valueFrom.secretKeyRef).
type SecretKeyRef struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// EnvArray renders env as container environment variables, in order: a plain value, or a
// key of a Secret that already exists in the namespace (secret values are only ever referenced).
func EnvArray(env []EnvSetting) corev1.EnvVarArray {
	out := corev1.EnvVarArray{}
	for _, e := range env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			out = append(out, corev1.EnvVarArgs{Name: pulumi.String(e.Name), ValueFrom: &corev1.EnvVarSourceArgs{
				SecretKeyRef: &corev1.SecretKeySelectorArgs{Name: pulumi.String(ref.Name), Key: pulumi.String(ref.Key)},
			}})
			continue
		}
		out = append(out, corev1.EnvVarArgs{Name: pulumi.String(e.Name), Value: pulumi.String(e.Value)})
	}
	return out
}

// Code is a git repository cloned into every pod of a workload before its containers start.
type Code struct {
	Repository string // clone URL (https://, ssh-less git://, file://)
	Ref        string // branch, tag or commit checked out (detached)
	Path       string // where the containers find the checkout
	Image      string // image of the clone (needs git)
	// CredentialsSecret names an existing Secret of the namespace with keys username and
	// password (a token), given to git for https repositories; "" for a public repository.
	CredentialsSecret string
}

// Names of the clone's init container and volume in every pod.
const (
	CodeContainer = "code"
	codeVolume    = "code"
	// CodeUser is the user the clone runs as (nobody): it needs no privilege, and the checkout
	// is readable by every container.
	CodeUser = 65534
)

// codeScript clones the repository and checks the ref out, detached: a branch, a tag (both
// found among the clone's refs, remote branches as origin/<ref>) or a commit. It prints the
// commit, which is what ran. The checkout's directory (the volume's root) belongs to root, the
// clone to nobody: git is told the directory is safe (command-line configuration is protected
// configuration, which git reads safe.directory from). The credentials (code.credentialsSecret)
// are given to the repository's scheme and host alone (credential.<url>.helper), never to a
// host a redirect or a submodule names. A restarted clone starts from an empty directory again.
const codeScript = `set -eu
dir=$KOLOTOC_CODE_DIR
if [ -n "${GIT_USERNAME:-}" ]; then
  host=${KOLOTOC_CODE_REPOSITORY#*://}
  set -- -c "credential.${KOLOTOC_CODE_REPOSITORY%%://*}://${host%%/*}.helper="'!f() { echo "username=$GIT_USERNAME"; echo "password=$GIT_PASSWORD"; }; f'
fi
rm -rf "$dir"/* "$dir"/.[!.]* "$dir"/..?*
git -c safe.directory="$dir" "$@" clone --quiet --no-checkout "$KOLOTOC_CODE_REPOSITORY" "$dir"
cd "$dir"
git -c safe.directory="$dir" -c advice.detachedHead=false checkout --quiet --detach "$KOLOTOC_CODE_REF" 2>/dev/null ||
  git -c safe.directory="$dir" -c advice.detachedHead=false checkout --quiet --detach "origin/$KOLOTOC_CODE_REF"
echo "code: $KOLOTOC_CODE_REPOSITORY $KOLOTOC_CODE_REF at $(git -c safe.directory="$dir" rev-parse HEAD) in $dir"
`

// Enabled reports whether there is code to clone.
func (c *Code) Enabled() bool { return c != nil && c.Repository != "" }

// InitContainers are the pod's init containers: the clone, or none.
func (c *Code) InitContainers() corev1.ContainerArray {
	if !c.Enabled() {
		return nil
	}
	env := corev1.EnvVarArray{
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_CODE_REPOSITORY"), Value: pulumi.String(c.Repository)},
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_CODE_REF"), Value: pulumi.String(c.Ref)},
		corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_CODE_DIR"), Value: pulumi.String(c.Path)},
		corev1.EnvVarArgs{Name: pulumi.String("HOME"), Value: pulumi.String("/tmp")},
	}
	if c.CredentialsSecret != "" {
		for _, k := range []struct{ env, key string }{{"GIT_USERNAME", "username"}, {"GIT_PASSWORD", "password"}} {
			env = append(env, corev1.EnvVarArgs{Name: pulumi.String(k.env), ValueFrom: &corev1.EnvVarSourceArgs{
				SecretKeyRef: &corev1.SecretKeySelectorArgs{Name: pulumi.String(c.CredentialsSecret), Key: pulumi.String(k.key)},
			}})
		}
	}
	return corev1.ContainerArray{corev1.ContainerArgs{
		Name:       pulumi.String(CodeContainer),
		Image:      pulumi.String(c.Image),
		Command:    pulumi.StringArray{pulumi.String("/bin/sh"), pulumi.String("-c"), pulumi.String(codeScript)},
		WorkingDir: pulumi.String(c.Path), // the image's own may be closed to nobody (/root)
		Env:        env,
		Resources: &corev1.ResourceRequirementsArgs{
			Requests: pulumi.StringMap{"cpu": pulumi.String("100m"), "memory": pulumi.String("128Mi")},
			Limits:   pulumi.StringMap{"cpu": pulumi.String("1"), "memory": pulumi.String("512Mi")},
		},
		SecurityContext: LockedDownAs(CodeUser),
		VolumeMounts:    corev1.VolumeMountArray{corev1.VolumeMountArgs{Name: pulumi.String(codeVolume), MountPath: pulumi.String(c.Path)}},
	}}
}

// Volumes is the checkout's volume (node-local, as long-lived as the pod), or none.
func (c *Code) Volumes() corev1.VolumeArray {
	if !c.Enabled() {
		return nil
	}
	return corev1.VolumeArray{corev1.VolumeArgs{Name: pulumi.String(codeVolume), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{}}}
}

// Mounts mount the checkout where the workload's containers find it, or none.
func (c *Code) Mounts() corev1.VolumeMountArray {
	if !c.Enabled() {
		return nil
	}
	return corev1.VolumeMountArray{corev1.VolumeMountArgs{Name: pulumi.String(codeVolume), MountPath: pulumi.String(c.Path)}}
}

// Env tells the containers where the checkout is (KOLOTOC_CODE_DIR), or nothing.
func (c *Code) Env() corev1.EnvVarArray {
	if !c.Enabled() {
		return nil
	}
	return corev1.EnvVarArray{corev1.EnvVarArgs{Name: pulumi.String("KOLOTOC_CODE_DIR"), Value: pulumi.String(c.Path)}}
}

// ReleaseScript scales StatefulSets of the pod's namespace to zero through the API server with
// the pod's service-account token (python3's standard library only: every training image has
// it). Arguments: the StatefulSets' names. It retries for about a minute, and exits 1 if one
// could not be scaled.
const ReleaseScript = `"""Kolotoc: the run succeeded; scale its StatefulSets to zero, freeing their GPUs."""
import json
import os
import ssl
import sys
import time
import urllib.request

SA = "/var/run/secrets/kubernetes.io/serviceaccount"


def main(names):
    ns = open(SA + "/namespace").read().strip()
    token = open(SA + "/token").read().strip()
    host = os.environ["KUBERNETES_SERVICE_HOST"]
    if ":" in host:
        host = "[" + host + "]"
    port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    tls = ssl.create_default_context(cafile=SA + "/ca.crt")
    body = json.dumps({"spec": {"replicas": 0}}).encode()
    status = 0
    for name in names:
        url = (f"https://{host}:{port}/apis/apps/v1/namespaces/{ns}/statefulsets/{name}/scale"
               "?fieldManager=kolotoc-release")
        for attempt in range(20):
            req = urllib.request.Request(url, data=body, method="PATCH", headers={
                "Authorization": "Bearer " + token, "Content-Type": "application/merge-patch+json"})
            try:
                urllib.request.urlopen(req, context=tls, timeout=10).read()
                print(f"release: statefulset {name} scaled to 0", flush=True)
                break
            except Exception as e:  # noqa: BLE001 - every failure is retried, then reported
                print(f"release: statefulset {name}: {e}", file=sys.stderr, flush=True)
                time.sleep(3)
        else:
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
`

// Releaser is the service account a run's pods release their StatefulSets with: it may scale
// those StatefulSets (by name) to zero, nothing else. RBAC cannot say "to zero" (a role that may
// patch a scale may set any number, a GPU bill); an admission policy in the API server does.
type Releaser struct {
	ServiceAccount string
	// Deps are the account, its role and binding, and the admission policy and its binding: pods
	// wait for them, so no token exists before the rule that bounds it.
	Deps []pulumi.Resource
}

// ReleaseExpression is the policy's rule: the Scale asks for no replicas.
const ReleaseExpression = "!has(object.spec) || !has(object.spec.replicas) || object.spec.replicas == 0"

// ReleaseOnlyToZero is the message the API server gives a release account that asks for any
// number of replicas but zero.
const ReleaseOnlyToZero = "a release account may only scale its StatefulSets to 0 replicas"

// NewReleaser registers the service account name, a Role that may patch the scale of the named
// StatefulSets only, and its binding.
func NewReleaser(ctx *pulumi.Context, name string, namespace pulumi.StringInput, l Labels, component string,
	statefulSets []string, opts ...pulumi.ResourceOption) (*Releaser, error) {
	sa, err := corev1.NewServiceAccount(ctx, name, &corev1.ServiceAccountArgs{
		Metadata: l.ObjectMeta(name, namespace, component),
		// Only the pods that release mount its token (they say so themselves).
		AutomountServiceAccountToken: pulumi.Bool(false),
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("ServiceAccount %q: %w", name, err)
	}
	role, err := rbacv1.NewRole(ctx, name, RenderReleaseRole(name, namespace, l, component, statefulSets), opts...)
	if err != nil {
		return nil, fmt.Errorf("Role %q: %w", name, err)
	}
	binding, err := rbacv1.NewRoleBinding(ctx, name, &rbacv1.RoleBindingArgs{
		Metadata: l.ObjectMeta(name, namespace, component),
		RoleRef: &rbacv1.RoleRefArgs{
			ApiGroup: pulumi.String("rbac.authorization.k8s.io"), Kind: pulumi.String("Role"), Name: pulumi.String(name),
		},
		Subjects: rbacv1.SubjectArray{rbacv1.SubjectArgs{
			Kind: pulumi.String("ServiceAccount"), Name: pulumi.String(name), Namespace: namespace,
		}},
	}, append(opts, pulumi.DependsOn([]pulumi.Resource{sa, role}))...)
	if err != nil {
		return nil, fmt.Errorf("RoleBinding %q: %w", name, err)
	}
	policy, err := admissionv1.NewValidatingAdmissionPolicy(ctx, name+"-zero-only", RenderReleasePolicy(name, namespace, l, component), opts...)
	if err != nil {
		return nil, fmt.Errorf("ValidatingAdmissionPolicy %q: %w", name+"-zero-only", err)
	}
	policyBinding, err := admissionv1.NewValidatingAdmissionPolicyBinding(ctx, name+"-zero-only",
		RenderReleasePolicyBinding(name, namespace, l, component), append(opts, pulumi.DependsOn([]pulumi.Resource{policy}))...)
	if err != nil {
		return nil, fmt.Errorf("ValidatingAdmissionPolicyBinding %q: %w", name+"-zero-only", err)
	}
	return &Releaser{ServiceAccount: name, Deps: []pulumi.Resource{sa, role, binding, policy, policyBinding}}, nil
}

// releasePolicyName is the cluster-scoped name of a release account's admission policy and its
// binding: kolotoc-<namespace>-<account>, one per stack and account.
func releasePolicyName(name string, namespace pulumi.StringInput) pulumi.StringOutput {
	return pulumi.Sprintf("kolotoc-%s-%s", namespace, name)
}

// RenderReleasePolicy is the ValidatingAdmissionPolicy that bounds the release account: an update
// of a StatefulSet's scale by that account (and no other) must ask for 0 replicas. Kubernetes,
// "Validating Admission Policy": matchConditions select the requests the policy judges
// (request.userInfo.username is the service account's), and for the scale subresource the
// object is an autoscaling/v1 Scale (spec.replicas).
func RenderReleasePolicy(name string, namespace pulumi.StringInput, l Labels, component string) *admissionv1.ValidatingAdmissionPolicyArgs {
	return &admissionv1.ValidatingAdmissionPolicyArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: releasePolicyName(name, namespace), Labels: pulumi.ToStringMap(l.For(component))},
		Spec: &admissionv1.ValidatingAdmissionPolicySpecArgs{
			FailurePolicy: pulumi.String("Fail"),
			MatchConstraints: &admissionv1.MatchResourcesArgs{
				ResourceRules: admissionv1.NamedRuleWithOperationsArray{admissionv1.NamedRuleWithOperationsArgs{
					ApiGroups: pulumi.StringArray{pulumi.String("apps")}, ApiVersions: pulumi.StringArray{pulumi.String("*")},
					Operations: pulumi.StringArray{pulumi.String("UPDATE")}, Resources: pulumi.StringArray{pulumi.String("statefulsets/scale")},
				}},
			},
			MatchConditions: admissionv1.MatchConditionArray{admissionv1.MatchConditionArgs{
				Name:       pulumi.String("release-account"),
				Expression: pulumi.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", namespace, name),
			}},
			Validations: admissionv1.ValidationArray{admissionv1.ValidationArgs{
				// A Scale's replicas are omitted when 0 (omitempty): a missing field is zero,
				// and reading it would be an error, which fails closed and refuses the release
				// itself (seen on the local cluster's API server).
				Expression: pulumi.String(ReleaseExpression),
				Message:    pulumi.String(ReleaseOnlyToZero),
			}},
		},
	}
}

// RenderReleasePolicyBinding applies the policy in the stack's namespace, denying what it refuses.
func RenderReleasePolicyBinding(name string, namespace pulumi.StringInput, l Labels, component string) *admissionv1.ValidatingAdmissionPolicyBindingArgs {
	return &admissionv1.ValidatingAdmissionPolicyBindingArgs{
		Metadata: &metav1.ObjectMetaArgs{Name: releasePolicyName(name, namespace), Labels: pulumi.ToStringMap(l.For(component))},
		Spec: &admissionv1.ValidatingAdmissionPolicyBindingSpecArgs{
			PolicyName:        releasePolicyName(name, namespace),
			ValidationActions: pulumi.StringArray{pulumi.String("Deny")},
			MatchResources: &admissionv1.MatchResourcesArgs{
				NamespaceSelector: &metav1.LabelSelectorArgs{
					MatchLabels: pulumi.StringMap{"kubernetes.io/metadata.name": namespace},
				},
			},
		},
	}
}

// RenderReleaseRole may patch the scale subresource of the named StatefulSets, and nothing else.
func RenderReleaseRole(name string, namespace pulumi.StringInput, l Labels, component string, statefulSets []string) *rbacv1.RoleArgs {
	return &rbacv1.RoleArgs{
		Metadata: l.ObjectMeta(name, namespace, component),
		Rules: rbacv1.PolicyRuleArray{rbacv1.PolicyRuleArgs{
			ApiGroups:     pulumi.StringArray{pulumi.String("apps")},
			Resources:     pulumi.StringArray{pulumi.String("statefulsets/scale")},
			ResourceNames: pulumi.ToStringArray(statefulSets),
			Verbs:         pulumi.StringArray{pulumi.String("patch")},
		}},
	}
}

// releaseTokenVolume holds the release account's token for the one container that releases.
const releaseTokenVolume = "release-token"

// ReleaseTokenPath is where that container finds it: the path Kubernetes mounts a pod's token at,
// which ReleaseScript reads.
const ReleaseTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount"

// ReleaseTokenVolume is the release account's token as a projected volume, the same three files
// the kubelet would mount into every container with automountServiceAccountToken (the bound token,
// the cluster's CA from kube-root-ca.crt, the namespace): a pod that releases keeps automount off
// and mounts this into the container that runs ReleaseScript only, so its init containers (the
// code clone among them) and sidecars never hold the token. (kubernetes.io "Configure Service
// Accounts for Pods": "Manually mounting a service account token via a projected volume".)
func ReleaseTokenVolume() corev1.VolumeArgs {
	return corev1.VolumeArgs{
		Name: pulumi.String(releaseTokenVolume),
		Projected: &corev1.ProjectedVolumeSourceArgs{
			DefaultMode: pulumi.Int(0o444),
			Sources: corev1.VolumeProjectionArray{
				corev1.VolumeProjectionArgs{ServiceAccountToken: &corev1.ServiceAccountTokenProjectionArgs{
					Path: pulumi.String("token"), ExpirationSeconds: pulumi.Int(3607),
				}},
				corev1.VolumeProjectionArgs{ConfigMap: &corev1.ConfigMapProjectionArgs{
					Name:  pulumi.String("kube-root-ca.crt"),
					Items: corev1.KeyToPathArray{corev1.KeyToPathArgs{Key: pulumi.String("ca.crt"), Path: pulumi.String("ca.crt")}},
				}},
				corev1.VolumeProjectionArgs{DownwardAPI: &corev1.DownwardAPIProjectionArgs{
					Items: corev1.DownwardAPIVolumeFileArray{corev1.DownwardAPIVolumeFileArgs{
						Path:     pulumi.String("namespace"),
						FieldRef: &corev1.ObjectFieldSelectorArgs{ApiVersion: pulumi.String("v1"), FieldPath: pulumi.String("metadata.namespace")},
					}},
				}},
			},
		},
	}
}

// ReleaseTokenMount mounts ReleaseTokenVolume, read-only, at ReleaseTokenPath.
func ReleaseTokenMount() corev1.VolumeMountArgs {
	return corev1.VolumeMountArgs{Name: pulumi.String(releaseTokenVolume), MountPath: pulumi.String(ReleaseTokenPath), ReadOnly: pulumi.Bool(true)}
}
