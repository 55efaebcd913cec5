package standin

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientapi "k8s.io/client-go/tools/clientcmd/api"
)

// Client-side rate limits, as the real provider raises them from client-go's defaults.
const (
	defaultClientQPS   = 50  // requests per second
	defaultClientBurst = 120 // requests
)

// cluster holds the clients for one configured API server.
type cluster struct {
	config  *rest.Config
	dynamic dynamic.Interface
	disco   discovery.CachedDiscoveryInterface
	mapper  resettableMapper
}

// resettableMapper is a RESTMapper whose discovery cache can be dropped (a
// restmapper.DeferredDiscoveryRESTMapper; a fixed mapper in unit tests).
type resettableMapper interface {
	meta.RESTMapper
	Reset()
}

func newCluster(config *rest.Config) (*cluster, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(config)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, err
	}
	cached := memory.NewMemCacheClient(dc)
	return &cluster{
		config:  config,
		dynamic: dyn,
		disco:   cached,
		mapper:  restmapper.NewDeferredDiscoveryRESTMapper(cached),
	}, nil
}

// mapping resolves a GVK to its REST resource through discovery, refreshing the cache
// once if the kind is not (yet) known, e.g. right after a CRD was created.
func (c *cluster) mapping(gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil && meta.IsNoMatchError(err) {
		c.mapper.Reset()
		m, err = c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	return m, err
}

// gvkExists reports whether the API server serves the GVK.
func (c *cluster) gvkExists(gvk schema.GroupVersionKind) bool {
	_, err := c.mapping(gvk)
	return err == nil
}

// namespaced reports whether the GVK is namespaced, according to discovery.
func (c *cluster) namespaced(gvk schema.GroupVersionKind) (bool, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// resourceClient returns the dynamic client for an object's GVK and namespace; a
// namespaced object without a namespace goes to "default", as the API server would put it.
func (c *cluster) resourceClient(gvk schema.GroupVersionKind, namespace string) (dynamic.ResourceInterface, error) {
	m, err := c.mapping(gvk)
	if err != nil {
		return nil, err
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return c.dynamic.Resource(m.Resource).Namespace(canonicalNamespace(namespace)), nil
	}
	return c.dynamic.Resource(m.Resource), nil
}

func (c *cluster) clientFor(obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	return c.resourceClient(gvkFromObject(obj), obj.GetNamespace())
}

// parseKubeconfig reads a kubeconfig given as a path (with ~ expanded) or as YAML/JSON
// contents, as the real provider's kubeconfig setting accepts.
func parseKubeconfig(pathOrContents string) (*clientapi.Config, error) {
	if pathOrContents == "" {
		return clientapi.NewConfig(), nil
	}
	p := pathOrContents
	if p == "~" || strings.HasPrefix(p, "~/") {
		if u, err := user.Current(); err == nil {
			p = filepath.Join(u.HomeDir, strings.TrimPrefix(p, "~"))
		}
	}
	contents := []byte(pathOrContents)
	if _, err := os.Stat(p); err == nil {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		contents = b
	}
	cfg, err := clientcmd.Load(contents)
	if err != nil {
		return nil, err
	}
	return cfg, nil
}

// activeCluster returns the cluster entry the kubeconfig (with context/cluster overrides)
// points at, and whether there is one.
func activeCluster(cfg *clientapi.Config, contextOverride, clusterOverride string) (*clientapi.Cluster, bool) {
	if cfg == nil || len(cfg.Clusters) == 0 {
		return &clientapi.Cluster{}, false
	}
	current := cfg.CurrentContext
	if contextOverride != "" {
		current = contextOverride
	}
	ctx := cfg.Contexts[current]
	if ctx == nil {
		return &clientapi.Cluster{}, false
	}
	clusterName := ctx.Cluster
	if clusterOverride != "" {
		clusterName = clusterOverride
	}
	c := cfg.Clusters[clusterName]
	if c == nil {
		return &clientapi.Cluster{}, false
	}
	return c, true
}

// clientConfigFor builds the client configuration the real provider would: the given
// kubeconfig, or the ambient one ($KUBECONFIG, ~/.kube/config) when none is given, with
// the context, cluster and namespace overrides applied.
func clientConfigFor(kubeconfig, contextName, clusterName, namespace string) (clientcmd.ClientConfig, error) {
	overrides := &clientcmd.ConfigOverrides{
		Context:        clientapi.Context{Cluster: clusterName, Namespace: namespace},
		CurrentContext: contextName,
	}
	if kubeconfig != "" {
		cfg, err := parseKubeconfig(kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("failed to parse kubeconfig data in `kubernetes:config:kubeconfig`- %w", err)
		}
		return clientcmd.NewDefaultClientConfig(*cfg, overrides), nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides), nil
}

var errUnreachable = errors.New("configured Kubernetes cluster is unreachable")
