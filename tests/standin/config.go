package standin

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	clientapi "k8s.io/client-go/tools/clientcmd/api"
)

const configPrefix = "kubernetes:config:"

// Keys of the provider configuration that matter to DiffConfig.
const (
	keyKubeconfig        = "kubeconfig"
	keyContext           = "context"
	keyCluster           = "cluster"
	keyClusterIdentifier = "clusterIdentifier"
	keyRenderYaml        = "renderYamlToDirectory"
)

// kubeconfigFromProperty parses a kubeconfig given as a string (path or contents) or as an
// object; a missing value is an empty config.
func kubeconfigFromProperty(v resource.PropertyValue) (*clientapi.Config, error) {
	switch {
	case v.IsNull():
		return clientapi.NewConfig(), nil
	case v.IsString():
		cfg, err := parseKubeconfig(v.StringValue())
		if err != nil {
			return nil, fmt.Errorf("failed to parse kubeconfig: %v", err)
		}
		return cfg, nil
	case v.IsObject():
		raw, err := json.Marshal(v.ObjectValue().Mappable())
		if err != nil {
			return nil, fmt.Errorf("failed to unmarshal kubeconfig: %v", err)
		}
		cfg, err := parseKubeconfig(string(raw))
		if err != nil {
			return nil, fmt.Errorf("failed to parse kubeconfig: %v", err)
		}
		return cfg, nil
	}
	return nil, fmt.Errorf("unexpected kubeconfig format, type: %v", v.TypeString())
}

func stringProp(pm resource.PropertyMap, key resource.PropertyKey) string {
	if v, ok := pm[key]; ok && v.IsString() {
		return v.StringValue()
	}
	return ""
}

// DiffProviderConfig compares two provider configurations the way the real provider's
// DiffConfig does. Any change is an update; the provider (and so every resource it
// manages) is replaced when the active cluster of the kubeconfig changes, when the
// kubeconfig, context or cluster is unknown (the cautious choice), or when
// clusterIdentifier changes. An unchanged clusterIdentifier suppresses replacement.
func DiffProviderConfig(olds, news resource.PropertyMap) (*pulumirpc.DiffResponse, error) {
	diff := olds.Diff(news)
	if diff == nil {
		return &pulumirpc.DiffResponse{Changes: pulumirpc.DiffResponse_DIFF_NONE}, nil
	}
	var diffs, replaces []string
	if diff.Updated(keyClusterIdentifier) {
		replaces = append(replaces, keyClusterIdentifier)
	}
	pinned := diff.Same(keyClusterIdentifier) && news.HasValue(keyClusterIdentifier)
	finish := func(resp *pulumirpc.DiffResponse) *pulumirpc.DiffResponse {
		if pinned {
			resp.Replaces = nil
		}
		return resp
	}

	for _, key := range []resource.PropertyKey{keyKubeconfig, keyContext, keyCluster} {
		if news[key].IsComputed() {
			replaces = append(replaces, string(key))
			return finish(&pulumirpc.DiffResponse{
				Changes:  pulumirpc.DiffResponse_DIFF_SOME,
				Diffs:    []string{string(key)},
				Replaces: replaces,
			}), nil
		}
	}

	oldConfig, err := kubeconfigFromProperty(olds[keyKubeconfig])
	if err != nil {
		return nil, err
	}
	newConfig, err := kubeconfigFromProperty(news[keyKubeconfig])
	if err != nil {
		return nil, err
	}
	for _, k := range diff.ChangedKeys() {
		diffs = append(diffs, string(k))
		if k == keyRenderYaml {
			replaces = append(replaces, keyRenderYaml)
		}
	}
	slices.Sort(diffs)

	// A cluster has no identity of its own: the best available signal is the active
	// cluster entry of the kubeconfig.
	oldActive, oldFound := activeCluster(oldConfig, stringProp(olds, keyContext), stringProp(olds, keyCluster))
	newActive, newFound := activeCluster(newConfig, stringProp(news, keyContext), stringProp(news, keyCluster))
	if oldFound && newFound && !reflect.DeepEqual(oldActive, newActive) {
		for _, key := range []string{keyKubeconfig, keyContext, keyCluster} {
			if slices.Contains(diffs, key) {
				replaces = append(replaces, key)
			}
		}
	}
	return finish(&pulumirpc.DiffResponse{
		Changes:  pulumirpc.DiffResponse_DIFF_SOME,
		Diffs:    diffs,
		Replaces: replaces,
	}), nil
}

// truthy reports a config value that is a non-empty string or true.
func truthy(pm resource.PropertyMap, key resource.PropertyKey) bool {
	v, ok := pm[key]
	if !ok || !v.HasValue() {
		return false
	}
	switch {
	case v.IsString():
		return v.StringValue() != ""
	case v.IsBool():
		return v.BoolValue()
	}
	return false
}

// CheckProviderConfig validates provider config as the real CheckConfig does (strict mode
// requires an explicit kubeconfig and context on explicit providers), and rejects
// renderYamlToDirectory, which the stand-in does not implement.
func CheckProviderConfig(urn resource.URN, news resource.PropertyMap) []*pulumirpc.CheckFailure {
	var failures []*pulumirpc.CheckFailure
	strict := false
	if raw := os.Getenv("PULUMI_CONFIG"); raw != "" {
		var cfg map[string]any
		if json.Unmarshal([]byte(raw), &cfg) == nil {
			if v, ok := cfg["strictMode"].(string); ok {
				strict = v == "true"
			}
		}
	}
	if v := news["strictMode"]; v.HasValue() && v.IsString() {
		strict = v.StringValue() == "true"
	}
	isProvider := urn.Type() == "pulumi:providers:kubernetes"
	if strict && isProvider {
		// Default providers are named "default" or "default_<version>".
		if urn.Name() == "default" || strings.HasPrefix(urn.Name(), "default_") {
			failures = append(failures, &pulumirpc.CheckFailure{Reason: "strict mode prohibits default provider"})
		}
		if v := news[keyKubeconfig]; !v.HasValue() || (v.IsString() && v.StringValue() == "") {
			failures = append(failures, &pulumirpc.CheckFailure{Property: keyKubeconfig, Reason: `strict mode requires Provider "kubeconfig" argument`})
		}
		if v := news[keyContext]; !v.HasValue() || (v.IsString() && v.StringValue() == "") {
			failures = append(failures, &pulumirpc.CheckFailure{Property: keyContext, Reason: `strict mode requires Provider "context" argument`})
		}
	}
	if truthy(news, keyRenderYaml) {
		failures = append(failures, &pulumirpc.CheckFailure{
			Property: keyRenderYaml,
			Reason:   "renderYamlToDirectory is not implemented by the test bed's stand-in Kubernetes provider",
		})
	}
	return failures
}
