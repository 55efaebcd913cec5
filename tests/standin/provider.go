package standin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource/plugin"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil/rpcerror"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/structpb"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/rest"
)

// Version is the provider version the stand-in reports: the pulumi-kubernetes SDK version
// the program is built against.
const Version = "4.27.0"

// userAgent identifies the stand-in's requests in API server logs.
const userAgent = "pulumi-kubernetes-standin/" + Version

// Host is the engine connection the provider logs to (satisfied by the SDK's
// provider.HostClient).
type Host interface {
	Log(ctx context.Context, sev diag.Severity, urn resource.URN, msg string) error
	LogStatus(ctx context.Context, sev diag.Severity, urn resource.URN, msg string) error
}

// Provider implements pulumirpc.ResourceProviderServer for kubernetes:* resources.
type Provider struct {
	pulumirpc.UnimplementedResourceProviderServer

	mu   sync.RWMutex
	host Host

	cancelCtx context.Context
	cancel    context.CancelFunc

	cluster           *cluster
	unreachable       bool
	unreachableReason string
	defaultNamespace  string
	enableSecrets     bool

	deleteUnreachable     bool
	skipUpdateUnreachable bool
	configMapMutable      bool
	secretMutable         bool

	// ServiceSettle is how long a Service's endpoints must stay unchanged before it counts
	// as ready (the real provider's 10 s); tests may shorten it.
	ServiceSettle time.Duration
}

var _ pulumirpc.ResourceProviderServer = (*Provider)(nil)

// New returns a provider that logs to host (which may be nil until Attach).
func New(host Host) *Provider {
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{host: host, cancelCtx: ctx, cancel: cancel, ServiceSettle: defaultServiceSettled}
}

// opContext ties an RPC's context to the provider's cancellation.
func (p *Provider) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(p.cancelCtx, cancel)
	return ctx, func() { stop(); cancel() }
}

func (p *Provider) getHost() Host {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.host
}

func (p *Provider) log(ctx context.Context, sev diag.Severity, urn resource.URN, msg string) {
	if h := p.getHost(); h != nil {
		_ = h.Log(ctx, sev, urn, msg)
	}
}

// GetPluginInfo reports the real provider's version.
func (p *Provider) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: Version}, nil
}

// GetSchema returns a minimal schema: Go programs use the compiled SDK and do not need one.
func (p *Provider) GetSchema(_ context.Context, req *pulumirpc.GetSchemaRequest) (*pulumirpc.GetSchemaResponse, error) {
	if v := req.GetVersion(); v != 0 {
		return nil, fmt.Errorf("unsupported schema version %d", v)
	}
	schemaJSON, err := json.Marshal(map[string]any{
		"name":        packageName,
		"version":     Version,
		"description": "Stand-in for the Kubernetes provider, for Kolotoc's test bed only",
		"resources":   map[string]any{},
		"functions":   map[string]any{},
	})
	if err != nil {
		return nil, err
	}
	return &pulumirpc.GetSchemaResponse{Schema: string(schemaJSON)}, nil
}

// GetMapping returns no mapping: the stand-in has no Terraform counterpart.
func (p *Provider) GetMapping(context.Context, *pulumirpc.GetMappingRequest) (*pulumirpc.GetMappingResponse, error) {
	return &pulumirpc.GetMappingResponse{}, nil
}

// Attach receives the engine's address when the plugin was started by hand.
func (p *Provider) Attach(_ context.Context, req *pulumirpc.PluginAttach) (*emptypb.Empty, error) {
	h, err := newHostClient(req.GetAddress())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.host = h
	p.mu.Unlock()
	return &emptypb.Empty{}, nil
}

// Cancel aborts the waits in progress; they fail as cancelled.
func (p *Provider) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	p.cancel()
	return &emptypb.Empty{}, nil
}

// Invoke serves no functions: yaml/helm/kustomize invokes are not implemented here.
func (p *Provider) Invoke(_ context.Context, req *pulumirpc.InvokeRequest) (*pulumirpc.InvokeResponse, error) {
	return nil, fmt.Errorf("invoke %q is not implemented by the test bed's stand-in Kubernetes provider", req.GetTok())
}

func unmarshal(s *structpb.Struct, label string, keepSecrets bool) (resource.PropertyMap, error) {
	return plugin.UnmarshalProperties(s, plugin.MarshalOptions{
		Label: label, KeepUnknowns: true, SkipNulls: true, KeepSecrets: keepSecrets,
	})
}

func (p *Provider) marshal(pm resource.PropertyMap, label string) (*structpb.Struct, error) {
	p.mu.RLock()
	keepSecrets := p.enableSecrets
	p.mu.RUnlock()
	return plugin.MarshalProperties(pm, plugin.MarshalOptions{
		Label: label, KeepUnknowns: true, SkipNulls: true, KeepSecrets: keepSecrets,
	})
}

// unreachableOptions returns the deleteUnreachable and skipUpdateUnreachable settings.
func (p *Provider) unreachableOptions() (deleteUnreachable, skipUpdateUnreachable bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.deleteUnreachable, p.skipUpdateUnreachable
}

// CheckConfig validates the provider configuration.
func (p *Provider) CheckConfig(_ context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	news, err := unmarshal(req.GetNews(), "CheckConfig.news", false)
	if err != nil {
		return nil, fmt.Errorf("CheckConfig failed because of malformed resource inputs: %w", err)
	}
	failures := CheckProviderConfig(resource.URN(req.GetUrn()), news)
	return &pulumirpc.CheckResponse{Inputs: req.GetNews(), Failures: failures}, nil
}

// DiffConfig decides whether a provider configuration change replaces the provider.
func (p *Provider) DiffConfig(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	olds, err := unmarshal(req.GetOlds(), "DiffConfig.olds", false)
	if err != nil {
		return nil, err
	}
	news, err := unmarshal(req.GetNews(), "DiffConfig.news", false)
	if err != nil {
		return nil, fmt.Errorf("DiffConfig failed because of malformed resource inputs: %w", err)
	}
	return DiffProviderConfig(olds, news)
}

type kubeClientSettings struct {
	Burst   *int     `json:"burst"`
	QPS     *float64 `json:"qps"`
	Timeout *int     `json:"timeout"`
}

// Configure connects to the cluster the configuration names. An unknown (preview) or
// unusable configuration does not fail: the cluster is marked unreachable, and only the
// operations that need it fail, as with the real provider.
func (p *Provider) Configure(ctx context.Context, req *pulumirpc.ConfigureRequest) (*pulumirpc.ConfigureResponse, error) {
	vars := req.GetVariables()
	val := func(key string) (string, bool) {
		v, ok := vars[configPrefix+key]
		return v, ok
	}
	flag := func(key, env string, def bool) bool {
		if v, ok := val(key); ok {
			return v == "true"
		}
		if v, ok := os.LookupEnv(env); ok {
			return v == "true"
		}
		return def
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.enableSecrets = req.GetAcceptSecrets()
	p.deleteUnreachable = flag("deleteUnreachable", "PULUMI_K8S_DELETE_UNREACHABLE", false)
	p.skipUpdateUnreachable = flag("skipUpdateUnreachable", "PULUMI_K8S_SKIP_UPDATE_UNREACHABLE", false)
	p.configMapMutable = flag("enableConfigMapMutable", "PULUMI_K8S_ENABLE_CONFIGMAP_MUTABLE", false)
	p.secretMutable = flag("enableSecretMutable", "PULUMI_K8S_ENABLE_SECRET_MUTABLE", false)
	// enableServerSideApply is accepted but has no effect: this stand-in only does
	// server-side apply, the real provider's default. Helm, YAML rendering, deprecation
	// warning and other settings are accepted and ignored.
	if !flag("enableServerSideApply", "PULUMI_K8S_ENABLE_SERVER_SIDE_APPLY", true) && p.host != nil {
		_ = p.host.Log(ctx, diag.Warning, "", "enableServerSideApply=false is not supported by the test bed's "+
			"stand-in Kubernetes provider; it always uses server-side apply")
	}

	p.cluster, p.unreachable, p.unreachableReason = nil, false, ""
	markUnreachable := func(reason string) {
		p.unreachable, p.unreachableReason = true, reason
	}

	namespace, _ := val("namespace")
	kubeconfig, _ := val(keyKubeconfig)
	contextName, _ := val(keyContext)
	clusterName, _ := val(keyCluster)
	if namespace == plugin.UnknownStringValue {
		namespace = ""
	}
	p.defaultNamespace = namespace

	var settings kubeClientSettings
	if raw, ok := val("kubeClientSettings"); ok && raw != "" && raw != plugin.UnknownStringValue {
		if err := json.Unmarshal([]byte(raw), &settings); err != nil {
			return nil, fmt.Errorf("failed to unmarshal kubeClientSettings option: %w", err)
		}
	}

	for _, v := range []string{kubeconfig, contextName, clusterName} {
		if v == plugin.UnknownStringValue {
			markUnreachable("the provider configuration is not known yet (preview)")
		}
	}
	if !p.unreachable {
		cc, err := clientConfigFor(kubeconfig, contextName, clusterName, namespace)
		if err != nil {
			markUnreachable(err.Error())
		} else {
			if ns, _, err := cc.Namespace(); err == nil {
				p.defaultNamespace = ns
			}
			restConfig, err := cc.ClientConfig()
			if err != nil {
				markUnreachable(fmt.Sprintf("unable to load Kubernetes client configuration from kubeconfig file: %v", err))
			} else {
				p.connect(restConfig, settings, markUnreachable)
			}
		}
	}
	if p.unreachable && p.host != nil {
		_ = p.host.Log(ctx, diag.Debug, "", "Kubernetes cluster unreachable: "+p.unreachableReason)
	}
	return &pulumirpc.ConfigureResponse{
		AcceptSecrets:                   true,
		AcceptResources:                 true,
		SupportsPreview:                 true,
		SupportsAutonamingConfiguration: true,
	}, nil
}

func (p *Provider) connect(restConfig *rest.Config, s kubeClientSettings, markUnreachable func(string)) {
	restConfig.QPS, restConfig.Burst = defaultClientQPS, defaultClientBurst
	if s.QPS != nil {
		restConfig.QPS = float32(*s.QPS)
	}
	if s.Burst != nil {
		restConfig.Burst = *s.Burst
	}
	if s.Timeout != nil {
		restConfig.Timeout = time.Duration(*s.Timeout) * time.Second
	}
	restConfig.WarningHandler = rest.NoWarnings{}
	restConfig.UserAgent = userAgent
	c, err := newCluster(restConfig)
	if err != nil {
		markUnreachable(err.Error())
		return
	}
	v, err := c.disco.ServerVersion()
	if err != nil {
		markUnreachable(fmt.Sprintf("unable to load schema information from the API server: %v", err))
		return
	}
	if !atLeast113(v) {
		markUnreachable(fmt.Sprintf("minimum supported cluster version is v1.13. found %s", v.GitVersion))
		return
	}
	p.cluster = c
}

func atLeast113(v *version.Info) bool {
	var major, minor int
	_, _ = fmt.Sscanf(v.Major, "%d", &major)
	_, _ = fmt.Sscanf(strings.TrimSuffix(v.Minor, "+"), "%d", &minor)
	return major > 1 || (major == 1 && minor >= 13)
}

// state snapshots the configuration for one operation.
func (p *Provider) state() (c *cluster, unreachable bool, reason string) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.cluster, p.unreachable, p.unreachableReason
}

// isNamespaced asks discovery, or the built-in table when the cluster cannot be asked;
// an unknown kind is assumed namespaced (a CustomResource whose CRD is not there yet).
func (p *Provider) isNamespaced(gvk schema.GroupVersionKind) (bool, error) {
	c, unreachable, _ := p.state()
	if !unreachable && c != nil {
		ns, err := c.namespaced(gvk)
		if err == nil {
			return ns, nil
		}
		if !meta.IsNoMatchError(err) {
			return false, fmt.Errorf("API server returned error when asked if resource type %s is namespaced: %w", gvk, err)
		}
	}
	return !clusterScopedKinds[gvk.GroupKind()], nil
}

func (p *Provider) gvkExists(gvk schema.GroupVersionKind) bool {
	c, unreachable, _ := p.state()
	return !unreachable && c != nil && c.gvkExists(gvk)
}

// partialError reports an operation that changed the cluster but did not finish (e.g. a
// readiness timeout), carrying the state to checkpoint, as the real provider does.
func partialError(id string, err error, state, inputs *structpb.Struct) error {
	reasons := []string{err.Error()}
	var ae *awaitError
	if errors.As(err, &ae) {
		reasons = append(reasons, ae.reasons...)
	}
	detail := &pulumirpc.ErrorResourceInitFailed{Id: id, Properties: state, Reasons: reasons, Inputs: inputs}
	return rpcerror.WithDetails(rpcerror.New(codes.Unknown, err.Error()), detail)
}
