package aks

import (
	"encoding/base64"
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"

	"kolotoc/components/cloud/kubeaccess"
)

// Kubeconfig is a kubeconfig for the cluster: its API server (an FQDN) and CA, credentials from
// `kubelogin get-token` with the Azure CLI's sign-in (so no token is ever stored in it), as
// `kubelogin convert-kubeconfig -l azurecli` writes it (kubelogin, "Azure CLI" login mode,
// https://azure.github.io/kubelogin/concepts/login-modes/azurecli.html).
func Kubeconfig(cluster, fqdn, caData string) string {
	return kubeaccess.ExecKubeconfig(cluster, "https://"+fqdn+":443", caData,
		"command: "+AuthPlugin,
		"args: [get-token, --login, azurecli, --server-id, "+AADServerID+"]",
		"installHint: Install kubelogin (az aks install-cli) and sign in with az login",
		"provideClusterInfo: false")
}

// caData is the certificate-authority-data of the first cluster of the base64 kubeconfig b64,
// and nothing else of it.
func caData(b64 string) (string, error) {
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("decoding: %w", err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				CA string `json:"certificate-authority-data"`
			} `json:"cluster"`
		} `json:"clusters"`
	}
	if err := yaml.Unmarshal(raw, &kc); err != nil {
		return "", fmt.Errorf("parsing: %w", err)
	}
	if len(kc.Clusters) == 0 || kc.Clusters[0].Cluster.CA == "" {
		return "", errors.New("no certificate-authority-data")
	}
	return kc.Clusters[0].Cluster.CA, nil
}
