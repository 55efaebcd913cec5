package standin

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Annotations the real provider gives meaning to.
const (
	annotationAutonamed           = "pulumi.com/autonamed"
	annotationSkipAwait           = "pulumi.com/skipAwait"
	annotationWaitFor             = "pulumi.com/waitFor" // waitfor.go
	annotationTimeoutSeconds      = "pulumi.com/timeoutSeconds"
	annotationPatchForce          = "pulumi.com/patchForce"
	annotationPatchFieldManager   = "pulumi.com/patchFieldManager"
	annotationDeletionPropagation = "pulumi.com/deletionPropagationPolicy"
	annotationLastApplied         = "kubectl.kubernetes.io/last-applied-configuration"
)

// Keys the real provider adds to its checkpointed outputs.
const (
	inputsKey            = "__inputs"
	initialAPIVersionKey = "__initialApiVersion"
	fieldManagerKey      = "__fieldManager"
)

// fieldManagerPrefix starts every generated server-side-apply field manager name, as in the
// real provider ("pulumi-kubernetes-" plus 8 random hex characters).
const fieldManagerPrefix = "pulumi-kubernetes-"

func annotationValue(obj *unstructured.Unstructured, key string) string {
	return obj.GetAnnotations()[key]
}

func annotationTrue(obj *unstructured.Unstructured, key string) bool {
	return annotationValue(obj, key) == "true"
}

// setAnnotationTrue sets key="true", leaving objects whose metadata or annotations are
// unknown (preview) untouched, as the real provider does.
func setAnnotationTrue(obj *unstructured.Unstructured, key string) {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		if obj.Object["metadata"] != nil {
			return
		}
		md = map[string]any{}
		obj.Object["metadata"] = md
	}
	annotations, ok := md["annotations"].(map[string]any)
	if !ok {
		if md["annotations"] != nil {
			return
		}
		annotations = map[string]any{}
	}
	annotations[key] = "true"
	md["annotations"] = annotations
}

// SkipAwait reports whether the inputs ask to skip readiness waits (pulumi.com/skipAwait: "true").
func SkipAwait(inputs *unstructured.Unstructured) bool {
	return annotationTrue(inputs, annotationSkipAwait)
}

// isNamed reports whether the object has a name, known or still unknown.
func isNamed(obj *unstructured.Unstructured, props resource.PropertyMap) bool {
	if md, ok := props["metadata"]; ok && md.IsObject() {
		if name, ok := md.ObjectValue()["name"]; ok && name.IsComputed() {
			return true
		}
	}
	return obj.GetName() != ""
}

// isGenerateName reports whether the object asks the API server to generate its name.
func isGenerateName(obj *unstructured.Unstructured, props resource.PropertyMap) bool {
	if isNamed(obj, props) {
		return false
	}
	if md, ok := props["metadata"]; ok && md.IsObject() {
		if gn, ok := md.ObjectValue()["generateName"]; ok && gn.IsComputed() {
			return true
		}
	}
	return obj.GetGenerateName() != ""
}

// assignAutoname names an unnamed object "<urn name>-<8 hex>" (seeded by the engine's
// random seed) or by the engine's autonaming proposal, and marks it pulumi.com/autonamed.
func assignAutoname(seed []byte, autonaming *pulumirpc.CheckRequest_AutonamingOptions,
	obj *unstructured.Unstructured, props resource.PropertyMap, urn resource.URN,
) error {
	if isNamed(obj, props) || isGenerateName(obj, props) {
		return nil
	}
	name, err := resource.NewUniqueName(seed, urn.Name()+"-", 0, 0, nil)
	if err != nil {
		return err
	}
	if autonaming != nil {
		switch autonaming.Mode {
		case pulumirpc.CheckRequest_AutonamingOptions_DISABLE:
			return errors.New("autonaming is disabled, resource requires the .metadata.name field to be set")
		case pulumirpc.CheckRequest_AutonamingOptions_ENFORCE, pulumirpc.CheckRequest_AutonamingOptions_PROPOSE:
			if autonaming.ProposedName == "" {
				return errors.New("the engine's autonaming proposal is empty")
			}
			name = autonaming.ProposedName
		}
	}
	obj.SetName(name)
	setAnnotationTrue(obj, annotationAutonamed)
	return nil
}

// adoptOldAutoname keeps the name Pulumi generated on an earlier run when the new inputs
// still carry no name.
func adoptOldAutoname(newObj, oldObj *unstructured.Unstructured, newProps resource.PropertyMap) {
	if !isNamed(newObj, newProps) && annotationTrue(oldObj, annotationAutonamed) && oldObj.GetName() != "" {
		newObj.SetName(oldObj.GetName())
		setAnnotationTrue(newObj, annotationAutonamed)
	}
}

// resourceTimeout is the readiness/deletion bound: the resource's custom timeout, then the
// pulumi.com/timeoutSeconds annotation, then def.
func resourceTimeout(requestSeconds float64, inputs *unstructured.Unstructured, def time.Duration) time.Duration {
	if requestSeconds != 0 {
		return time.Duration(requestSeconds) * time.Second
	}
	if s := annotationValue(inputs, annotationTimeoutSeconds); s != "" {
		if v, err := strconv.Atoi(s); err == nil {
			return time.Duration(v) * time.Second
		}
	}
	return def
}

// deletionPropagation returns the delete propagation policy: Foreground unless the
// pulumi.com/deletionPropagationPolicy annotation says orphan or background.
func deletionPropagation(inputs *unstructured.Unstructured) metav1.DeletionPropagation {
	switch strings.ToLower(annotationValue(inputs, annotationDeletionPropagation)) {
	case "orphan":
		return metav1.DeletePropagationOrphan
	case "background":
		return metav1.DeletePropagationBackground
	default:
		return metav1.DeletePropagationForeground
	}
}

// skipAwaitOnDelete lists the kinds for which the real provider lets pulumi.com/skipAwait
// also skip the wait for deletion (a legacy behaviour it keeps for these kinds only).
func skipAwaitOnDelete(gvk schema.GroupVersionKind) bool {
	switch gvk.GroupKind() {
	case schema.GroupKind{Kind: "Namespace"}, schema.GroupKind{Kind: "Pod"},
		schema.GroupKind{Kind: "ReplicationController"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"},
		schema.GroupKind{Group: "apps", Kind: "Deployment"},
		schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}:
		return true
	}
	return false
}

// csaManagers are the client-side-apply field managers whose fields the real provider takes
// over before a server-side-apply update.
var csaManagers = []struct {
	name string
	op   metav1.ManagedFieldsOperationType
}{
	{"kubectl", metav1.ManagedFieldsOperationApply},
	{"kubectl", metav1.ManagedFieldsOperationUpdate},
	{"before-first-apply", metav1.ManagedFieldsOperationUpdate},
	{"pulumi-kubernetes", metav1.ManagedFieldsOperationUpdate},
	{"pulumi-kubernetes.exe", metav1.ManagedFieldsOperationUpdate},
	{"pulumi-resource-kubernetes", metav1.ManagedFieldsOperationUpdate},
}

// patchForce decides whether a server-side apply overrides conflicts, by the real
// provider's rule: the pulumi.com/patchForce annotation, then PULUMI_K8S_ENABLE_PATCH_FORCE,
// then (previews only) always for a new object or one still managed by client-side apply,
// and always for an object without managed fields.
func patchForce(inputs, live *unstructured.Unstructured, preview bool) bool {
	if annotationTrue(inputs, annotationPatchForce) {
		return true
	}
	if v, ok := os.LookupEnv("PULUMI_K8S_ENABLE_PATCH_FORCE"); ok {
		return v == "true"
	}
	if preview {
		if live == nil {
			return true
		}
		for _, mf := range live.GetManagedFields() {
			if mf.Operation != metav1.ManagedFieldsOperationUpdate {
				continue
			}
			switch mf.Manager {
			case "pulumi-resource-kubernetes", "pulumi-kubernetes", "pulumi-kubernetes.exe":
				return true
			}
		}
	}
	// An object from before server-side apply has no managed fields, yet an implicit
	// "before-first-apply" manager owns all of it: take control, as the real provider does.
	if live != nil && len(live.GetManagedFields()) == 0 {
		return true
	}
	return false
}
