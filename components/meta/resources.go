package meta

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Free-form resources: what a pod requests beyond the CPU, memory and GPUs its section's own keys
// set (the Horovod chart's `resources` block): extended resources of device plugins (RDMA HCAs,
// e.g. rdma/hca), huge pages (hugepages-2Mi, hugepages-1Gi) and ephemeral-storage. The rules
// are the API server's, as the Kubernetes docs state them:
//   - extended resources (https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/#extended-resources):
//     a fully-qualified name outside the kubernetes.io domain, a whole number, and "cannot be
//     overcommitted, so request and limit must be equal if both are present";
//   - huge pages (https://kubernetes.io/docs/tasks/manage-hugepages/scheduling-hugepages/): "Huge
//     page requests must equal the limits", and a pod that uses more than one size "must use
//     medium: HugePages-<hugepagesize>" for its volumes: each size gets its own hugetlbfs volume,
//     mounted on /dev/hugepages-<size>.
// When only one side is given, the other is taken equal to it.

// Resources is a section's resources block: requests and limits, resource name to quantity.
type Resources struct {
	Requests QuantityMap `json:"requests"` // resource → quantity requested; default none
	Limits   QuantityMap `json:"limits"`   // resource → quantity limit; default none
}

// QuantityMap maps resource names to quantities, written as strings or numbers. A value of any
// other shape is kept for Check to report under its key; decoding never fails on it.
type QuantityMap struct {
	Values   map[string]string
	problems [][2]string // (name, value) that are not a string or number
}

// UnmarshalJSON takes an object of strings or numbers.
func (q *QuantityMap) UnmarshalJSON(b []byte) error {
	q.Values, q.problems = nil, nil
	if string(bytes.TrimSpace(b)) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		q.problems = append(q.problems, [2]string{"", string(b)})
		return nil
	}
	q.Values = map[string]string{}
	for k, v := range m {
		var s string
		var n json.Number
		switch {
		case json.Unmarshal(v, &s) == nil:
			q.Values[k] = s
		case json.Unmarshal(v, &n) == nil:
			q.Values[k] = n.String()
		default:
			q.problems = append(q.problems, [2]string{k, string(v)})
		}
	}
	return nil
}

// MarshalJSON writes the map.
func (q QuantityMap) MarshalJSON() ([]byte, error) { return json.Marshal(q.Values) }

// Empty says whether the block asks for nothing.
func (r Resources) Empty() bool { return len(r.Requests.Values) == 0 && len(r.Limits.Values) == 0 }

const hugePagesPrefix = "hugepages-"

// isHugePages, isExtended classify a resource name as the API server does.
func isHugePages(name string) bool { return strings.HasPrefix(name, hugePagesPrefix) }

// IsExtended says whether name is an extended resource: qualified with a domain outside
// kubernetes.io (the docs' rule), so counted in whole units and never overcommitted.
func IsExtended(name string) bool {
	domain, _, ok := strings.Cut(name, "/")
	return ok && domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io") && !strings.HasPrefix(name, "requests.")
}

// Check reports every problem of the block under key (key.requests.<name>, key.limits.<name>).
// managed names the resources the section's own keys set (resource → that key), which the block
// may not set again.
func (r Resources) Check(p Problems, key string, managed map[string]string) {
	for side, m := range map[string]QuantityMap{"requests": r.Requests, "limits": r.Limits} {
		for _, pr := range m.problems {
			k := key + "." + side
			if pr[0] != "" {
				k += "." + pr[0]
			}
			p.Add(k, pr[1], "want a quantity (a string such as 2Gi, or a whole number)")
		}
	}
	names := map[string]bool{}
	for k := range r.Requests.Values {
		names[k] = true
	}
	for k := range r.Limits.Values {
		names[k] = true
	}
	for _, name := range slices.Sorted(maps.Keys(names)) {
		req, hasReq := r.Requests.Values[name]
		lim, hasLim := r.Limits.Values[name]
		at := key + ".requests." + name
		v := req
		if !hasReq {
			at, v = key+".limits."+name, lim
		}
		if by, ok := managed[name]; ok {
			p.Add(at, v, "set by "+by+"; allowed here: extended resources (e.g. rdma/hca), hugepages-<size>, ephemeral-storage")
			continue
		}
		switch {
		case isHugePages(name):
			if size, err := resource.ParseQuantity(strings.TrimPrefix(name, hugePagesPrefix)); err != nil || size.Sign() <= 0 {
				p.Add(at, v, "a huge page size must be a quantity, e.g. hugepages-2Mi, hugepages-1Gi")
				continue
			}
		case name == string(corev1ResourceEphemeralStorage):
		case IsExtended(name):
			if errs := validation.IsQualifiedName(name); len(errs) > 0 {
				p.Add(at, v, "not a resource name: "+strings.Join(errs, "; "))
				continue
			}
		default:
			p.Add(at, v, "unknown resource; allowed: extended resources named <domain>/<name> outside kubernetes.io (e.g. rdma/hca), hugepages-<size>, ephemeral-storage")
			continue
		}
		bad := false
		for _, s := range []struct {
			side, v string
			has     bool
		}{{"requests", req, hasReq}, {"limits", lim, hasLim}} {
			if !s.has {
				continue
			}
			q, err := resource.ParseQuantity(s.v)
			switch {
			case err != nil || q.Sign() < 0:
				p.Add(key+"."+s.side+"."+name, OrUnset(s.v), "must be a quantity, e.g. 1, 2Gi")
				bad = true
			case IsExtended(name) && q.MilliValue()%1000 != 0:
				p.Add(key+"."+s.side+"."+name, s.v, "an extended resource is counted in whole units; allowed: 0, 1, 2, …")
				bad = true
			}
		}
		if bad || !hasReq || !hasLim {
			continue
		}
		if name != string(corev1ResourceEphemeralStorage) {
			rq, lq := resource.MustParse(req), resource.MustParse(lim)
			if rq.Cmp(lq) != 0 {
				why := "extended resources cannot be overcommitted"
				if isHugePages(name) {
					why = "huge page requests must equal their limits"
				}
				p.Add(key+".limits."+name, lim, why+"; allowed: "+req+" (the request), or leave one side out")
			}
		} else if rq, lq := resource.MustParse(req), resource.MustParse(lim); rq.Cmp(lq) > 0 {
			p.Add(key+".limits."+name, lim, "below the request ("+req+")")
		}
	}
}

// corev1ResourceEphemeralStorage is the container's local ephemeral storage.
const corev1ResourceEphemeralStorage = "ephemeral-storage"

// Quantities are the block's requests and limits as a pod asks them: an extended resource or huge
// pages given on one side only are set on the other as well (they must be equal).
func (r Resources) Quantities() (requests, limits map[string]string) {
	requests, limits = map[string]string{}, map[string]string{}
	maps.Copy(requests, r.Requests.Values)
	maps.Copy(limits, r.Limits.Values)
	for name, v := range r.Requests.Values {
		if _, ok := limits[name]; !ok && (IsExtended(name) || isHugePages(name)) {
			limits[name] = v
		}
	}
	for name, v := range r.Limits.Values {
		if _, ok := requests[name]; !ok {
			requests[name] = v // the API server's own default for every resource
		}
	}
	return requests, limits
}

// AddTo adds the block's quantities to a container's requests and limits.
func (r Resources) AddTo(requests, limits pulumi.StringMap) {
	req, lim := r.Quantities()
	for k, v := range req {
		requests[k] = pulumi.String(v)
	}
	for k, v := range lim {
		limits[k] = pulumi.String(v)
	}
}

// HugePageSizes are the huge page sizes the block asks for, sorted.
func (r Resources) HugePageSizes() []string {
	req, _ := r.Quantities()
	var out []string
	for name := range req {
		if isHugePages(name) {
			out = append(out, strings.TrimPrefix(name, hugePagesPrefix))
		}
	}
	slices.Sort(out)
	return out
}

// hugePagesVolume names the volume of one huge page size: a DNS label, lower case.
func hugePagesVolume(size string) string { return "hugepages-" + strings.ToLower(size) }

// HugePagesPath is where the hugetlbfs of one size is mounted.
func HugePagesPath(size string) string { return "/dev/hugepages-" + size }

// HugePagesVolumes are one hugetlbfs emptyDir per huge page size (medium HugePages-<size>).
func (r Resources) HugePagesVolumes() corev1.VolumeArray {
	var out corev1.VolumeArray
	for _, size := range r.HugePageSizes() {
		out = append(out, corev1.VolumeArgs{Name: pulumi.String(hugePagesVolume(size)), EmptyDir: &corev1.EmptyDirVolumeSourceArgs{
			Medium: pulumi.String("HugePages-" + size),
		}})
	}
	return out
}

// HugePagesMounts mount HugePagesVolumes on /dev/hugepages-<size>.
func (r Resources) HugePagesMounts() corev1.VolumeMountArray {
	var out corev1.VolumeMountArray
	for _, size := range r.HugePageSizes() {
		out = append(out, Mount(hugePagesVolume(size), HugePagesPath(size)))
	}
	return out
}

// CheckDevices reports the problems of a node pool's devices (key: nodePools[i].devices): what
// its nodes advertise beyond cpu, memory and GPUs, per node: extended resources (whole units) and
// huge pages (pre-allocated quantities). managed names the resources other keys set.
func CheckDevices(p Problems, key string, devices QuantityMap, managed map[string]string) {
	for _, pr := range devices.problems {
		k := key
		if pr[0] != "" {
			k += "." + pr[0]
		}
		p.Add(k, pr[1], "want a quantity per node (a string such as 1Gi, or a whole number)")
	}
	for _, name := range slices.Sorted(maps.Keys(devices.Values)) {
		v, at := devices.Values[name], key+"."+name
		if by, ok := managed[name]; ok {
			p.Add(at, v, "set by "+by+"; allowed here: extended resources (e.g. rdma/hca), hugepages-<size>")
			continue
		}
		switch {
		case isHugePages(name):
			if size, err := resource.ParseQuantity(strings.TrimPrefix(name, hugePagesPrefix)); err != nil || size.Sign() <= 0 {
				p.Add(at, v, "a huge page size must be a quantity, e.g. hugepages-2Mi, hugepages-1Gi")
				continue
			}
		case IsExtended(name) && len(validation.IsQualifiedName(name)) == 0:
		default:
			p.Add(at, v, "allowed: extended resources named <domain>/<name> outside kubernetes.io (e.g. rdma/hca), hugepages-<size>")
			continue
		}
		q, err := resource.ParseQuantity(v)
		switch {
		case err != nil || q.Sign() <= 0:
			p.Add(at, OrUnset(v), "must be a positive quantity per node, e.g. 1, 2Gi")
		case IsExtended(name) && q.MilliValue()%1000 != 0:
			p.Add(at, v, "an extended resource is counted in whole units")
		}
	}
}

// PerNode is how many pods asking request (a quantity) of a resource a node with have of it
// holds; 0 when either does not parse or the request is 0 (then it does not limit).
func PerNode(have, request string) int64 {
	h, errH := resource.ParseQuantity(have)
	r, errR := resource.ParseQuantity(request)
	if errH != nil || errR != nil || r.Sign() <= 0 {
		return 0
	}
	return h.MilliValue() / r.MilliValue()
}
