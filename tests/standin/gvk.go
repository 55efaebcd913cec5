package standin

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// packageName is the Pulumi package whose resource tokens this provider serves.
const packageName = "kubernetes"

// GVKFromToken maps a resource type token such as "kubernetes:apps/v1:StatefulSet" to its
// Kubernetes group/version/kind. The core group is spelled "core" in tokens and "" in
// Kubernetes, as in the real provider.
func GVKFromToken(token string) (schema.GroupVersionKind, error) {
	parts := strings.Split(token, ":")
	if len(parts) != 3 {
		return schema.GroupVersionKind{}, fmt.Errorf("malformed resource type token %q: want <package>:<group>/<version>:<Kind>", token)
	}
	if parts[0] != packageName {
		return schema.GroupVersionKind{}, fmt.Errorf("unrecognized resource type: %q for this provider", token)
	}
	gv := strings.Split(parts[1], "/")
	if len(gv) != 2 || gv[0] == "" || gv[1] == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion does not have both a group and a version: %q", parts[1])
	}
	if parts[2] == "" {
		return schema.GroupVersionKind{}, fmt.Errorf("resource type token %q has no kind", token)
	}
	group := gv[0]
	if group == "core" {
		group = ""
	}
	return schema.GroupVersionKind{Group: group, Version: gv[1], Kind: parts[2]}, nil
}

// APIVersion renders a GVK's apiVersion field: "v1" for the core group, "group/version" otherwise.
func APIVersion(gvk schema.GroupVersionKind) string {
	return gvk.GroupVersion().String()
}

// gvkFromObject reads apiVersion and kind from an object, tolerating the "core/v1" spelling.
func gvkFromObject(obj *unstructured.Unstructured) schema.GroupVersionKind {
	apiVersion, _ := obj.Object["apiVersion"].(string)
	kind, _ := obj.Object["kind"].(string)
	gv := strings.SplitN(apiVersion, "/", 2)
	if len(gv) == 1 {
		return schema.GroupVersionKind{Version: gv[0], Kind: kind}
	}
	group := gv[0]
	if group == "core" {
		group = ""
	}
	return schema.GroupVersionKind{Group: group, Version: gv[1], Kind: kind}
}

// isListKind reports whether the kind is a List type, which the real provider refuses to
// create directly.
func isListKind(kind string) bool {
	return strings.HasSuffix(kind, "List")
}

// isPatchKind reports whether the kind is one of the provider's <Kind>Patch resources.
func isPatchKind(kind string) bool {
	return strings.HasSuffix(kind, "Patch")
}

// clusterScopedKinds lists the built-in cluster-scoped kinds. It is consulted only when
// the cluster cannot be asked (preview with unknown provider config); otherwise discovery
// decides, as in the real provider.
var clusterScopedKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:                                                    true,
	{Group: "", Kind: "Node"}:                                                         true,
	{Group: "", Kind: "PersistentVolume"}:                                             true,
	{Group: "", Kind: "ComponentStatus"}:                                              true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
}

// fqName renders a resource ID as the real provider does: "namespace/name", or "name".
func fqName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// parseFqName splits a resource ID made by fqName.
func parseFqName(id string) (namespace, name string) {
	split := strings.Split(id, "/")
	if len(split) == 1 {
		return "", split[0]
	}
	return split[0], split[1]
}

// canonicalNamespace maps the empty namespace to "default", as the API server does.
func canonicalNamespace(ns string) string {
	if ns == "" {
		return "default"
	}
	return ns
}
