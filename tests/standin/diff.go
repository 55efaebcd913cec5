package standin

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// forceNewFields returns the paths whose change forces replacement, per the real
// provider's table (provider/pkg/provider/diff.go): identity always, and per kind the
// fields the API server will not update in place. ConfigMap and Secret contents replace
// unless the provider made them mutable (enableConfigMapMutable / enableSecretMutable)
// and the object is not marked immutable.
func forceNewFields(gvk schema.GroupVersionKind, immutable, configMapMutable, secretMutable bool) []string {
	props := []string{".metadata.name", ".metadata.namespace"}
	versions, ok := forceNew[gvk.Group]
	if !ok {
		return props
	}
	kinds, ok := versions[gvk.Version]
	if !ok {
		return props
	}
	isCore := gvk.Group == "" || gvk.Group == "core"
	switch {
	case isCore && gvk.Kind == "Secret" && (!secretMutable || immutable):
		props = append(props, ".type", ".stringData", ".data")
	case kinds[gvk.Kind] != nil:
		props = append(props, kinds[gvk.Kind]...)
	case isCore && gvk.Kind == "ConfigMap" && (!configMapMutable || immutable):
		props = append(props, ".binaryData", ".data")
	}
	return props
}

func labelSelectorFields(prefix string) []string {
	return []string{
		prefix + ".matchExpressions", prefix + ".matchExpressions.key", prefix + ".matchExpressions.operator",
		prefix + ".matchExpressions.values", prefix + ".matchLabels",
	}
}

func containerFields(prefixes ...string) []string {
	var out []string
	for _, p := range prefixes {
		for _, f := range []string{"args", "command", "env", "env.value", "image", "imagePullPolicy", "lifecycle",
			"livenessProbe", "ports", "readinessProbe", "resources", "securityContext", "stdin", "stdinOnce",
			"terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices", "volumeMounts", "workingDir"} {
			out = append(out, p+"."+f)
		}
	}
	return out
}

func concat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

var (
	selectorReplace    = concat([]string{".spec.selector"}, labelSelectorFields(".spec.selector"))
	jobReplace         = concat([]string{".spec.completions", ".spec.parallelism", ".spec.selector", ".spec.template"}, labelSelectorFields(".spec.selector"))
	statefulSetReplace = concat([]string{".spec.podManagementPolicy", ".spec.revisionHistoryLimit", ".spec.selector",
		".spec.serviceName", ".spec.volumeClaimTemplates"}, labelSelectorFields(".spec.selector"))
	coreReplace = map[string]map[string][]string{"v1": {
		"PersistentVolume": {".spec.awsElasticBlockStore", ".spec.azureDisk", ".spec.azureFile", ".spec.cephfs",
			".spec.cinder", ".spec.csi", ".spec.fc", ".spec.flexVolume", ".spec.flocker", ".spec.gcePersistentDisk",
			".spec.glusterfs", ".spec.hostPath", ".spec.iscsi", ".spec.local", ".spec.nfs", ".spec.photonPersistentDisk",
			".spec.portworxVolume", ".spec.quobyte", ".spec.rbd", ".spec.scaleIO", ".spec.storageos", ".spec.vsphereVolume"},
		"PersistentVolumeClaim": concat([]string{".spec.accessModes", ".spec.selector", ".spec.storageClassName",
			".spec.volumeName"}, labelSelectorFields(".spec.selector")),
		"Pod": concat([]string{".spec.affinity", ".spec.automountServiceAccountToken", ".spec.dnsConfig",
			".spec.dnsPolicy", ".spec.enableServiceLinks", ".spec.hostAliases", ".spec.hostIPC", ".spec.hostNetwork",
			".spec.hostPID", ".spec.hostname", ".spec.imagePullSecrets", ".spec.nodeName", ".spec.nodeSelector",
			".spec.overhead", ".spec.preemptionPolicy", ".spec.priority", ".spec.priorityClassName",
			".spec.readinessGates", ".spec.restartPolicy", ".spec.runtimeClassName", ".spec.schedulerName",
			".spec.securityContext", ".spec.serviceAccount", ".spec.serviceAccountName", ".spec.shareProcessNamespace",
			".spec.subdomain", ".spec.terminationGracePeriodSeconds", ".spec.volumes"},
			containerFields(".spec.containers[*]", ".spec.initContainers[*]")),
		"ResourceQuota": {".spec.scopes"},
		"Secret":        {".type"},
		"Service":       {".spec.clusterIP"},
	}}
	roleBindingReplace = []string{".roleRef"}

	forceNew = map[string]map[string]map[string][]string{
		"apps": {
			"v1beta1": {"StatefulSet": statefulSetReplace},
			"v1beta2": {"DaemonSet": selectorReplace, "Deployment": selectorReplace, "StatefulSet": statefulSetReplace},
			"v1":      {"DaemonSet": selectorReplace, "Deployment": selectorReplace, "StatefulSet": statefulSetReplace},
		},
		"core":   coreReplace,
		"":       coreReplace,
		"policy": {"v1beta1": {"PodDisruptionBudget": {".spec"}}},
		"rbac.authorization.k8s.io": {
			"v1alpha1": {"ClusterRoleBinding": roleBindingReplace, "RoleBinding": roleBindingReplace},
			"v1beta1":  {"ClusterRoleBinding": roleBindingReplace, "RoleBinding": roleBindingReplace},
			"v1":       {"ClusterRoleBinding": roleBindingReplace, "RoleBinding": roleBindingReplace},
		},
		"storage.k8s.io": {"v1": {"StorageClass": {".parameters", ".provisioner"}}},
		"batch":          {"v1beta1": {"Job": jobReplace}, "v1": {"Job": jobReplace}, "v2alpha1": {"Job": jobReplace}},
	}
)

// missing marks a map key that is absent, as distinct from one present with a nil value.
type missingT struct{}

var missing = missingT{}

func get(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return missing
}

// createMergePatch computes an RFC 7386 JSON merge patch from old to new, comparing
// numbers by value (JSON has one number type) and rendering unknown values as null, as a
// JSON encoding of the inputs would.
func createMergePatch(old, new map[string]any) map[string]any {
	patch := map[string]any{}
	for k, nv := range new {
		ov, ok := old[k]
		if _, isComputed := nv.(resource.Computed); isComputed {
			patch[k] = nil
			continue
		}
		if !ok {
			patch[k] = nv
			continue
		}
		om, oIsMap := ov.(map[string]any)
		nm, nIsMap := nv.(map[string]any)
		if oIsMap && nIsMap {
			if sub := createMergePatch(om, nm); len(sub) > 0 {
				patch[k] = sub
			}
			continue
		}
		if !jsonEqual(ov, nv) {
			patch[k] = nv
		}
	}
	for k := range old {
		if _, ok := new[k]; !ok {
			patch[k] = nil
		}
	}
	return patch
}

// jsonEqual compares two decoded JSON values, treating all number types by value.
func jsonEqual(a, b any) bool {
	if af, ok := toFloat(a); ok {
		bf, ok := toFloat(b)
		return ok && af == bf
	}
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for k, v := range at {
			bv, ok := bt[k]
			if !ok || !jsonEqual(v, bv) {
				return false
			}
		}
		return true
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !jsonEqual(at[i], bt[i]) {
				return false
			}
		}
		return true
	case resource.Computed:
		return false
	}
	return reflect.DeepEqual(a, b)
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}

// detailedDiff turns the merge patch between the pruned old live state and the new inputs
// into Pulumi property diffs, marking as *_REPLACE the ones under a force-new path. It
// follows the real provider's convertPatchToDiff.
func detailedDiff(oldLive, newInputs map[string]any, forceNew []string) map[string]*pulumirpc.PropertyDiff {
	patch := createMergePatch(oldLive, newInputs)
	c := &patchConverter{forceNew: forceNew, diff: map[string]*pulumirpc.PropertyDiff{}}
	if len(patch) > 0 {
		c.addMap(nil, patch, oldLive, newInputs, oldLive, false)
	}
	return c.diff
}

type patchConverter struct {
	forceNew []string
	diff     map[string]*pulumirpc.PropertyDiff
}

func (c *patchConverter) addValue(path []any, v, old, newInput, oldInput any, inArray bool) {
	// Without a new input the only possible diff is a delete of something the user had set.
	if newInput == any(missing) && (v != nil || oldInput == any(missing)) {
		return
	}
	var kind pulumirpc.PropertyDiff_Kind
	inputDiff := false
	switch {
	case v == nil:
		if _, ok := newInput.(resource.Computed); ok {
			if old == any(missing) {
				kind = pulumirpc.PropertyDiff_ADD
			} else {
				kind = pulumirpc.PropertyDiff_UPDATE
			}
		} else {
			kind, inputDiff = pulumirpc.PropertyDiff_DELETE, true
		}
	case old == any(missing):
		kind = pulumirpc.PropertyDiff_ADD
	default:
		switch vt := v.(type) {
		case map[string]any:
			if om, ok := old.(map[string]any); ok {
				nim, _ := newInput.(map[string]any)
				oim, _ := oldInput.(map[string]any)
				c.addMap(path, vt, om, nim, oim, inArray)
				return
			}
			kind = pulumirpc.PropertyDiff_UPDATE
		case []any:
			if oa, ok := old.([]any); ok {
				nia, _ := newInput.([]any)
				oia, _ := oldInput.([]any)
				c.addArray(path, vt, oa, nia, oia)
				return
			}
			kind = pulumirpc.PropertyDiff_UPDATE
		default:
			if jsonEqual(v, old) {
				return
			}
			kind = pulumirpc.PropertyDiff_UPDATE
		}
	}
	if c.forcesReplace(path, v) {
		switch kind {
		case pulumirpc.PropertyDiff_ADD:
			kind = pulumirpc.PropertyDiff_ADD_REPLACE
		case pulumirpc.PropertyDiff_DELETE:
			kind = pulumirpc.PropertyDiff_DELETE_REPLACE
		case pulumirpc.PropertyDiff_UPDATE:
			kind = pulumirpc.PropertyDiff_UPDATE_REPLACE
		}
	}
	c.diff[propertyPathString(path)] = &pulumirpc.PropertyDiff{Kind: kind, InputDiff: inputDiff}
}

func (c *patchConverter) addMap(path []any, m, old, newInput, oldInput map[string]any, inArray bool) {
	for k, v := range m {
		c.addValue(appendPath(path, k), v, get(old, k), get(newInput, k), get(oldInput, k), inArray)
	}
	// Inside arrays the patch holds whole elements, so deletions are not visible in it.
	if inArray {
		for k, v := range old {
			if _, ok := m[k]; ok {
				continue
			}
			c.addValue(appendPath(path, k), nil, v, get(newInput, k), get(oldInput, k), inArray)
		}
	}
}

func (c *patchConverter) addArray(path []any, a, old, newInput, oldInput []any) {
	at := func(arr []any, i int) any {
		if i < len(arr) {
			return arr[i]
		}
		return nil
	}
	i := 0
	for ; i < len(a) && i < len(old); i++ {
		c.addValue(appendPath(path, i), a[i], old[i], at(newInput, i), at(oldInput, i), true)
	}
	for ; i < len(a); i++ {
		c.addValue(appendPath(path, i), a[i], missing, at(newInput, i), at(oldInput, i), true)
	}
	for ; i < len(old); i++ {
		c.addValue(appendPath(path, i), nil, old[i], at(newInput, i), at(oldInput, i), true)
	}
}

func appendPath(path []any, elem any) []any {
	out := make([]any, len(path), len(path)+1)
	copy(out, path)
	return append(out, elem)
}

// forcesReplace reports whether a change at path (with new value v) touches one of the
// force-new fields: the changed value, placed at its path, contains the field.
func (c *patchConverter) forcesReplace(path []any, v any) bool {
	slice := makePatchSlice(path, v)
	for _, f := range c.forceNew {
		if pathFound(slice, parseForceNewPath(f)) {
			return true
		}
	}
	return false
}

func makePatchSlice(path []any, v any) any {
	if len(path) == 0 {
		return v
	}
	switch p := path[0].(type) {
	case string:
		return map[string]any{p: makePatchSlice(path[1:], v)}
	default:
		return []any{makePatchSlice(path[1:], v)}
	}
}

// parseForceNewPath splits ".spec.containers[*].image" into ["spec" "containers" "*" "image"].
func parseForceNewPath(p string) []string {
	var segs []string
	for _, s := range strings.Split(strings.TrimPrefix(p, "."), ".") {
		if strings.HasSuffix(s, "[*]") {
			segs = append(segs, strings.TrimSuffix(s, "[*]"), "*")
			continue
		}
		segs = append(segs, s)
	}
	return segs
}

func pathFound(v any, segs []string) bool {
	if len(segs) == 0 {
		return true
	}
	if segs[0] == "*" {
		arr, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range arr {
			if pathFound(e, segs[1:]) {
				return true
			}
		}
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	next, ok := m[segs[0]]
	if !ok {
		return false
	}
	return pathFound(next, segs[1:])
}

// propertyPathString renders a path the way Pulumi property paths are written:
// spec.template.spec.containers[0].image, metadata.annotations["pulumi.com/skipAwait"].
func propertyPathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch e := p.(type) {
		case string:
			switch {
			case strings.ContainsAny(e, `."[]`):
				fmt.Fprintf(&b, `["%s"]`, strings.ReplaceAll(e, `"`, `\"`))
			case b.Len() > 0:
				b.WriteString(".")
				b.WriteString(e)
			default:
				b.WriteString(e)
			}
		case int:
			fmt.Fprintf(&b, "[%d]", e)
		}
	}
	return b.String()
}

// DiffResult is the outcome of comparing old state with new inputs.
type DiffResult struct {
	Changes             pulumirpc.DiffResponse_DiffChanges
	DetailedDiff        map[string]*pulumirpc.PropertyDiff
	Replaces            []string
	DeleteBeforeReplace bool
}

// classify applies ignoreChanges to a detailed diff and derives the replace list, as the
// real provider's Diff does.
func classify(diff map[string]*pulumirpc.PropertyDiff, ignoreChanges []string) (DiffResult, error) {
	var ignore []resource.PropertyPath
	for _, ic := range ignoreChanges {
		p, err := resource.ParsePropertyPath(ic)
		if err != nil {
			return DiffResult{}, fmt.Errorf("failed to parse ignore path: %w", err)
		}
		ignore = append(ignore, p)
	}
	for k := range diff {
		dp, err := resource.ParsePropertyPath(k)
		if err != nil {
			return DiffResult{}, fmt.Errorf("failed to parse diff path: %w", err)
		}
		for _, ip := range ignore {
			if ip.Contains(dp) {
				delete(diff, k)
				break
			}
		}
	}
	res := DiffResult{Changes: pulumirpc.DiffResponse_DIFF_NONE, DetailedDiff: diff}
	if len(diff) == 0 {
		res.DetailedDiff = nil
		return res, nil
	}
	res.Changes = pulumirpc.DiffResponse_DIFF_SOME
	for k, v := range diff {
		switch v.Kind {
		case pulumirpc.PropertyDiff_ADD_REPLACE, pulumirpc.PropertyDiff_DELETE_REPLACE, pulumirpc.PropertyDiff_UPDATE_REPLACE:
			res.Replaces = append(res.Replaces, k)
		case pulumirpc.PropertyDiff_DELETE:
			if k == "metadata" {
				res.Replaces = append(res.Replaces, k)
			}
		}
	}
	sort.Strings(res.Replaces)
	return res, nil
}
