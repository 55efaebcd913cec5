package standin

import (
	"encoding/base64"
	"reflect"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
)

// underscoreToDash maps the property names Pulumi uses for the x-kubernetes-* schema
// extensions back to their Kubernetes spelling, and dashToUnderscore the other way.
var underscoreToDash = map[string]string{
	"x_kubernetes_embedded_resource":       "x-kubernetes-embedded-resource",
	"x_kubernetes_int_or_string":           "x-kubernetes-int-or-string",
	"x_kubernetes_list_map_keys":           "x-kubernetes-list-map-keys",
	"x_kubernetes_list_type":               "x-kubernetes-list-type",
	"x_kubernetes_map_type":                "x-kubernetes-map-type",
	"x_kubernetes_preserve_unknown_fields": "x-kubernetes-preserve-unknown-fields",
	"x_kubernetes_validations":             "x-kubernetes-validations",
}

var dashToUnderscore = func() map[string]string {
	m := make(map[string]string, len(underscoreToDash))
	for k, v := range underscoreToDash {
		m[v] = k
	}
	return m
}()

func replUnderscoreToDash(k string) (string, bool) {
	v, ok := underscoreToDash[k]
	return v, ok
}

func replDashToUnderscore(k string) (resource.PropertyKey, bool) {
	v, ok := dashToUnderscore[k]
	return resource.PropertyKey(v), ok
}

// stripSecrets unwraps secret values (recursively) when converting to plain Go values.
func stripSecrets(v resource.PropertyValue) (any, bool) {
	if v.IsSecret() {
		return v.SecretValue().Element.MapRepl(replUnderscoreToDash, stripSecrets), true
	}
	return nil, false
}

// propMapToUnstructured turns Pulumi properties into a Kubernetes object: secrets
// unwrapped, unknown values kept as resource.Computed.
func propMapToUnstructured(pm resource.PropertyMap) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: pm.MapRepl(replUnderscoreToDash, stripSecrets)}
}

// hasComputedValue reports whether any value in the object is still unknown.
func hasComputedValue(obj *unstructured.Unstructured) bool {
	if obj == nil {
		return false
	}
	return containsComputed(obj.Object)
}

func containsComputed(v any) bool {
	switch t := v.(type) {
	case resource.Computed:
		return true
	case map[string]any:
		for _, e := range t {
			if containsComputed(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if containsComputed(e) {
				return true
			}
		}
	}
	return false
}

// annotateSecrets copies secretness from ins to outs, recursing where both are objects,
// and marks a Secret's data and stringData secret whatever the inputs said. This is the
// real provider's rule: an input value that was secret stays secret in the outputs.
func annotateSecrets(outs, ins resource.PropertyMap) {
	if outs == nil {
		return
	}
	if kind, ok := outs["kind"]; ok && kind.IsString() && kind.StringValue() == "Secret" {
		if data, ok := outs["data"]; ok {
			outs["data"] = resource.MakeSecret(data)
		}
		if sd, ok := outs["stringData"]; ok {
			outs["stringData"] = resource.MakeSecret(sd)
		}
		return
	}
	for key, in := range ins {
		out, ok := outs[key]
		if !ok {
			continue
		}
		switch {
		case out.IsObject() && in.IsObject():
			annotateSecrets(out.ObjectValue(), in.ObjectValue())
		case !out.IsSecret() && in.ContainsSecrets():
			outs[key] = resource.MakeSecret(out)
		}
	}
}

// checkpointObject builds the state the real provider stores: the live object, with the
// (normalised) inputs under __inputs, the initial apiVersion and the field manager.
func checkpointObject(inputs, live *unstructured.Unstructured, fromInputs resource.PropertyMap,
	initialAPIVersion, fieldManager string,
) resource.PropertyMap {
	object := resource.NewPropertyMapFromMapRepl(live.Object, replDashToUnderscore, nil)
	inputsPM := resource.NewPropertyMapFromMapRepl(inputs.Object, replDashToUnderscore, nil)
	annotateSecrets(object, fromInputs)
	annotateSecrets(inputsPM, fromInputs)

	// The API server turns stringData into base64 data: data inherits stringData's secretness.
	if live.GetAPIVersion() == "v1" && live.GetKind() == "Secret" {
		stringData, hasStringData := fromInputs["stringData"]
		data, hasData := object["data"]
		if hasStringData && hasData {
			if stringData.IsSecret() && !data.IsSecret() {
				object["data"] = resource.MakeSecret(data)
			}
		}
	}

	object[inputsKey] = resource.NewObjectProperty(inputsPM)
	object[initialAPIVersionKey] = resource.NewStringProperty(initialAPIVersion)
	object[fieldManagerKey] = resource.NewStringProperty(fieldManager)
	return object
}

// parseCheckpointObject splits stored state into the old inputs and the last live object,
// secrets unwrapped. It accepts the pre-v4 {inputs, live} shape too.
func parseCheckpointObject(state resource.PropertyMap) (oldInputs, live *unstructured.Unstructured) {
	pm := state.MapRepl(replUnderscoreToDash, stripSecrets)
	inputs, hasInputs := pm["inputs"]
	liveMap, hasLive := pm["live"]
	if !hasInputs || !hasLive {
		liveMap = pm
		inputs, hasInputs = pm[inputsKey]
		if hasInputs {
			delete(pm, inputsKey)
		} else {
			inputs = map[string]any{}
		}
	}
	in, _ := inputs.(map[string]any)
	if in == nil {
		in = map[string]any{}
	}
	lm, _ := liveMap.(map[string]any)
	if lm == nil {
		lm = map[string]any{}
	}
	delete(lm, initialAPIVersionKey)
	delete(lm, fieldManagerKey)
	return &unstructured.Unstructured{Object: in}, &unstructured.Unstructured{Object: lm}
}

// initialAPIVersion returns the apiVersion the resource was first created with.
func initialAPIVersion(state resource.PropertyMap, oldInputs *unstructured.Unstructured) string {
	if v, ok := state[initialAPIVersionKey]; ok && v.IsString() {
		return v.StringValue()
	}
	return oldInputs.GetAPIVersion()
}

// pruneMap copies from source only the keys that target also has, recursively, so that a
// live object can be compared with the inputs that produced it.
func pruneMap(source, target map[string]any) map[string]any {
	if source == nil || target == nil {
		return nil
	}
	result := map[string]any{}
	for key, value := range source {
		targetValue, ok := target[key]
		if !ok {
			continue
		}
		vt, tt := reflect.TypeOf(value), reflect.TypeOf(targetValue)
		if vt == nil || tt == nil || vt != tt {
			result[key] = value
			continue
		}
		switch v := value.(type) {
		case map[string]any:
			result[key] = pruneMap(v, targetValue.(map[string]any))
		case []any:
			result[key] = pruneSlice(v, targetValue.([]any))
		default:
			result[key] = value
		}
	}
	return result
}

func pruneSlice(source, target []any) []any {
	if source == nil || target == nil {
		return nil
	}
	result := make([]any, 0, len(target))
	if len(source) == 0 || len(target) == 0 {
		return result
	}
	if reflect.TypeOf(source[0]) != reflect.TypeOf(target[0]) {
		return runtime.DeepCopyJSONValue(source).([]any)
	}
	for i, targetValue := range target {
		if i >= len(source) {
			break
		}
		value := source[i]
		if value == nil || targetValue == nil {
			result = append(result, value)
			continue
		}
		switch v := value.(type) {
		case map[string]any:
			if tm, ok := targetValue.(map[string]any); ok {
				if nested := pruneMap(v, tm); nested != nil {
					result = append(result, nested)
				}
				continue
			}
			result = append(result, value)
		case []any:
			if ts, ok := targetValue.([]any); ok {
				if nested := pruneSlice(v, ts); nested != nil {
					result = append(result, nested)
				}
				continue
			}
			result = append(result, value)
		default:
			result = append(result, value)
		}
	}
	return result
}

func pruneLive(live, inputs *unstructured.Unstructured) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: pruneMap(live.Object, inputs.Object)}
}

// normalizeInputs puts inputs into the shape the API server will store, so that
// equivalent spellings do not show as diffs: built-in kinds go through the client-go
// scheme and back (e.g. cpu "0.5" becomes "500m"; fields the type does not have are
// dropped, exactly as the real provider drops them), Secret stringData is folded into
// data, and read-only metadata is removed.
func normalizeInputs(obj *unstructured.Unstructured) *unstructured.Unstructured {
	result := obj
	if !hasComputedValue(obj) {
		gvk := gvkFromObject(obj)
		switch {
		case gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Secret":
			result = normalizeSecret(obj.DeepCopy())
		case kscheme.Scheme.Recognizes(gvk):
			typed, err := kscheme.Scheme.New(gvk)
			if err == nil {
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, typed); err == nil {
					if back, err := runtime.DefaultUnstructuredConverter.ToUnstructured(typed); err == nil {
						result = pruneLive(&unstructured.Unstructured{Object: back}, obj)
					}
				}
			}
		}
	}
	if md, ok := result.Object["metadata"].(map[string]any); ok {
		for _, k := range []string{"creationTimestamp", "deletionGracePeriodSeconds", "deletionTimestamp",
			"generation", "managedFields", "resourceVersion", "uid"} {
			delete(md, k)
		}
	}
	return result
}

// normalizeSecret folds stringData into base64 data, as the API server does.
func normalizeSecret(obj *unstructured.Unstructured) *unstructured.Unstructured {
	stringData, found, err := unstructured.NestedStringMap(obj.Object, "stringData")
	if err != nil || !found || len(stringData) == 0 {
		return obj
	}
	data, found, err := unstructured.NestedMap(obj.Object, "data")
	if err != nil || !found {
		data = map[string]any{}
	}
	for k, v := range stringData {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	_ = unstructured.SetNestedMap(obj.Object, data, "data")
	unstructured.RemoveNestedField(obj.Object, "stringData")
	return obj
}
