package main

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"kolotoc/cmd/throwaway"
	"kolotoc/components/meta"
)

// ns is the program's config namespace (stacks.ConfigNamespace; not imported: the program's
// cloud entries link every cloud SDK, and this command needs none).
const ns = "kolotoc:"

// PoolDecl is what the stack file says of one pool, for the report.
type PoolDecl struct {
	Name     string
	Index    int // position in kolotoc:nodePools
	Nodes    int // nodes (default 1)
	MaxNodes int // maxNodes when set, else 0
	Real     bool
	// FromZero: the pool sits at zero (minNodes: 0); the mirror's is a Karpenter NodePool that
	// the local cluster's Karpenter grows for the pods that need it, as the cloud's autoscaler would.
	FromZero bool
}

// Mirror is the throw-away stack `make fit` deploys in place of a stack: the same pools and
// workloads on the simulated cloud, under its own name, with throw-away secrets.
type Mirror struct {
	Stack   string         // the stack checked: prod, aws, …
	Name    string         // the throw-away stack's name, also its cluster.name (node-name prefix): fit-<stack>
	Config  map[string]any // its config file's `config:` (no secret in it)
	Secrets map[string]string
	Pools   []PoolDecl
	Notes   []string // what the mirror changed besides the cloud
}

// dnsUnsafe: what a stack name may hold that a DNS label may not.
var dnsUnsafe = regexp.MustCompile(`[^a-z0-9-]+`)

// MirrorName is the throw-away stack of a stack: fit-<stack>, a DNS label.
func MirrorName(stack string) string {
	s := strings.Trim(dnsUnsafe.ReplaceAllString(strings.ToLower(stack), "-"), "-")
	if s == "" {
		s = "stack"
	}
	return "fit-" + s
}

// NewMirror turns a stack file into the config of its throw-away mirror. The stack file is only
// read. Every change is there to keep the mirror local and disposable:
//   - kolotoc:cloud becomes simulated: each pool is mirrored node for node (a catalogued machine
//     type gives its figures), a pool at zero (minNodes: 0) as a Karpenter NodePool that the local
//     cluster's Karpenter grows, a cloud file store is stood in by the in-cluster NFS server;
//   - cluster.name and the namespace become the mirror's own (fit-<stack>, kolotoc-fit-<stack>),
//     so it never meets the stack itself or another stack on the local cluster; the kubeconfig is
//     the local cluster's;
//   - nothing is protected (cluster.protect, storage.protect, storage.allowReplace go), so the
//     mirror can be destroyed;
//   - a real pool (the local real node) becomes simulated nodes of its declared size: pods placed
//     there would really run;
//   - secrets (secure values) are left out and throw-away ones generated; a TLS certificate is
//     replaced by a throw-away one, since its key is one of those secrets;
//   - other packages' keys (gcp:project, …) are left out: nothing of theirs runs locally;
//   - kolotoc:fit: true, so that pulumi up does not wait for pods that cannot be placed.
func NewMirror(stack string, stackFile []byte, kubeconfig string) (*Mirror, error) {
	var doc struct {
		Config map[string]any `yaml:"config"`
	}
	if err := yaml.Unmarshal(stackFile, &doc); err != nil {
		return nil, fmt.Errorf("not a stack file: %w", err)
	}
	if len(doc.Config) == 0 {
		return nil, errors.New("the stack file has no config: section")
	}
	m := &Mirror{Stack: stack, Name: MirrorName(stack), Config: map[string]any{}, Secrets: map[string]string{}}
	var dropped []string
	for k, v := range doc.Config {
		if vm, ok := v.(map[string]any); ok && vm["secure"] != nil {
			continue // a secret of the stack: the mirror has its own
		}
		if !strings.HasPrefix(k, ns) {
			dropped = append(dropped, k)
			continue
		}
		m.Config[k] = v
	}
	if len(dropped) > 0 {
		sort.Strings(dropped)
		m.Notes = append(m.Notes, "left out (nothing of theirs runs locally): "+strings.Join(dropped, ", "))
	}

	cloud, _ := m.Config[ns+"cloud"].(string)
	switch cloud {
	case "simulated":
	case "gcp", "aws", "azure":
		m.Notes = append(m.Notes, fmt.Sprintf("cloud %s → simulated: each pool mirrored node for node with its machine type's figures (stacks/catalogue.go); the cloud file store stood in by the in-cluster NFS server", cloud))
	default:
		m.Notes = append(m.Notes, fmt.Sprintf("cloud %s → simulated: each pool mirrored node for node with its declared figures", meta.OrUnset(cloud)))
	}
	m.Config[ns+"cloud"] = "simulated"

	cluster := objectAt(m.Config, ns+"cluster")
	cluster["name"] = m.Name
	cluster["kubeconfig"] = kubeconfig
	delete(cluster, "context")
	delete(cluster, "protect")
	delete(m.Config, ns+"namespace")
	if st, ok := m.Config[ns+"storage"].(map[string]any); ok {
		delete(st, "protect")
		delete(st, "allowReplace")
	}

	// A queued stack is admitted by the local cluster's Kueue, through a ClusterQueue of the
	// mirror's own: a cluster's existing ClusterQueue is not here; queue.quota (what that queue
	// grants the stack) or the mirrored pools give the quota.
	if q, ok := m.Config[ns+"queue"].(map[string]any); ok && q["type"] == "kueue" {
		if cq, _ := q["clusterQueue"].(string); cq != "" {
			m.Notes = append(m.Notes, fmt.Sprintf("queue.clusterQueue %s → a ClusterQueue of the mirror's own, with queue.quota or the pools' sum", cq))
			delete(q, "clusterQueue")
		}
		delete(q, "install") // the local cluster runs Kueue
		delete(q, "image")
		m.Notes = append(m.Notes, "queue: the ring is admitted (or not) by the local cluster's Kueue, as one pod group")
	}

	pools, _ := m.Config[ns+"nodePools"].([]any)
	for i, p := range pools {
		pm, ok := p.(map[string]any)
		if !ok {
			continue // the program names the problem
		}
		d := PoolDecl{Index: i, Nodes: 1}
		d.Name, _ = pm["name"].(string)
		if n, ok := pm["nodes"].(int); ok {
			d.Nodes = n
		}
		if n, ok := pm["maxNodes"].(int); ok {
			d.MaxNodes = n
		}
		minNodes, minSet := pm["minNodes"].(int)
		switch {
		case minSet && minNodes == 0:
			d.FromZero, d.Nodes = true, 0
			if n, ok := pm["nodes"].(int); ok {
				d.Nodes = n
			}
			m.Notes = append(m.Notes, fmt.Sprintf("pool %s (minNodes 0) → a Karpenter NodePool at zero: the local cluster's Karpenter grows it for the pods that need it, up to maxNodes, as the cloud's autoscaler would", d.Name))
		case d.Nodes < d.MaxNodes:
			if !minSet {
				minNodes = d.Nodes
			}
			m.Notes = append(m.Notes, fmt.Sprintf("pool %s (autoscaled %d..%d) → the %d node(s) it starts with, fixed: only pools at zero grow in the mirror (Growth, below, says how far it would grow)", d.Name, minNodes, d.MaxNodes, d.Nodes))
		}
		if real, _ := pm["real"].(bool); real {
			d.Real = true
			pm["real"] = false
			m.Notes = append(m.Notes, fmt.Sprintf("pool %s (real: the local real node) → simulated nodes of its declared size, so that no pod runs for real", d.Name))
		}
		m.Pools = append(m.Pools, d)
	}

	for _, k := range []string{"jupyterPassword", "sshKeySeed", "grafanaPassword"} {
		s, err := throwaway.RandomHex(32)
		if err != nil {
			return nil, err
		}
		m.Secrets[ns+k] = s
	}
	if ep, ok := m.Config[ns+"entrypoint"].(map[string]any); ok && ep["tlsCertificate"] != nil {
		cert, key, err := throwaway.Certificate(m.Name)
		if err != nil {
			return nil, err
		}
		ep["tlsCertificate"] = cert
		m.Secrets[ns+"entrypointTLSKey"] = key
		m.Notes = append(m.Notes, "entrypoint.tlsCertificate → a throw-away one (its key is a secret of the stack)")
	}
	m.Config[ns+"fit"] = true
	return m, nil
}

// ConfigFile is the mirror's Pulumi.<name>.yaml.
func (m *Mirror) ConfigFile() ([]byte, error) {
	return yaml.Marshal(map[string]any{"config": m.Config})
}

// FromZero: the mirror's pools at zero, whose nodes the local cluster's Karpenter makes.
func (m *Mirror) FromZero() map[string]bool {
	out := map[string]bool{}
	for _, d := range m.Pools {
		if d.FromZero {
			out[d.Name] = true
		}
	}
	return out
}

// Decl returns what the stack file says of a pool.
func (m *Mirror) Decl(pool string) (PoolDecl, bool) {
	for _, d := range m.Pools {
		if d.Name == pool {
			return d, true
		}
	}
	return PoolDecl{Index: -1}, false
}

func objectAt(cfg map[string]any, key string) map[string]any {
	if o, ok := cfg[key].(map[string]any); ok {
		return o
	}
	o := map[string]any{}
	cfg[key] = o
	return o
}
