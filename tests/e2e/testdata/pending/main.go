// Command pending is the program of tests/e2e/pending_test.go: two ConfigMaps created through a
// Kubernetes provider without server-side apply, so that creating an object that exists fails
// ("already exists") as a cloud API does, rather than adopting it. "fixed" has a fixed name, like
// a Filestore instance or a pinned pool; "generated" has one the provider generates, like a pool
// with a generated name.
package main

import (
	"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes"
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

func main() {
	pulumi.Run(func(ctx *pulumi.Context) error {
		kubeconfig, _ := ctx.GetConfig("pending:kubeconfig")
		namespace, _ := ctx.GetConfig("pending:namespace")
		declare, _ := ctx.GetConfig("pending:declare")
		prov, err := kubernetes.NewProvider(ctx, "k8s", &kubernetes.ProviderArgs{
			Kubeconfig:            pulumi.String(kubeconfig),
			EnableServerSideApply: pulumi.Bool(false),
		})
		if err != nil || declare != "true" {
			return err
		}
		ns := pulumi.String(namespace)
		data := pulumi.StringMap{"checkpoint": pulumi.String("step-1")}
		if _, err := corev1.NewConfigMap(ctx, "fixed", &corev1.ConfigMapArgs{
			Metadata: &metav1.ObjectMetaArgs{Name: pulumi.String("fixed"), Namespace: ns}, Data: data,
		}, pulumi.Provider(prov)); err != nil {
			return err
		}
		_, err = corev1.NewConfigMap(ctx, "generated", &corev1.ConfigMapArgs{
			Metadata: &metav1.ObjectMetaArgs{Namespace: ns}, Data: data,
		}, pulumi.Provider(prov))
		return err
	})
}
