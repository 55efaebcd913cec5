package tests

import (
	"slices"
	"strings"
	"testing"

	"kolotoc/components/cloud/aks"
	"kolotoc/stacks"
)

// TestAKSEntraID: the cluster signs in with Microsoft Entra ID of the runner's tenant and
// authorizes with Azure RBAC, and its local accounts (the static admin credential) are off.
// Follows AKS, "Use Azure role-based access control for Kubernetes Authorization"
// (https://learn.microsoft.com/en-us/azure/aks/manage-azure-rbac: aadProfile.managed and
// aadProfile.enableAzureRBAC) and "Manage local accounts with AKS-managed Microsoft Entra
// integration" (https://learn.microsoft.com/en-us/azure/aks/manage-local-accounts-managed-azure-ad:
// properties.disableLocalAccounts true).
func TestAKSEntraID(t *testing.T) {
	mc := inputs(cloudRec(t, "azure", nil).one(t, tAKSCluster, "cluster"))
	aad := get(mc, "aadProfile")
	if get(aad, "managed") != true || get(aad, "enableAzureRBAC") != true || get(aad, "tenantID") != fakeAzureTenant {
		t.Errorf("aadProfile %v, want managed Entra ID with Azure RBAC in tenant %s", aad, fakeAzureTenant)
	}
	if get(mc, "disableLocalAccounts") != true {
		t.Errorf("disableLocalAccounts %v, want true: local accounts are a static admin credential", get(mc, "disableLocalAccounts"))
	}
}

// TestAKSRunnerIsClusterAdmin: with local accounts off, whoever runs `pulumi up` (the principal
// getClientConfig reports) reaches the cluster through Azure RBAC only: the built-in "Azure
// Kubernetes Service RBAC Cluster Admin" role (b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b), on the
// cluster's scope alone (AKS, "Use Azure role-based access control for Kubernetes
// Authorization", https://learn.microsoft.com/en-us/azure/aks/manage-azure-rbac, "Create role
// assignments for users to access the cluster"). The Kubernetes provider's kubeconfig waits for
// the grant.
func TestAKSRunnerIsClusterAdmin(t *testing.T) {
	for _, tc := range []struct{ config, want string }{{"", "User"}, {"ServicePrincipal", "ServicePrincipal"}} {
		t.Run(tc.want, func(t *testing.T) {
			var overrides map[string]string
			if tc.config != "" {
				overrides = withCluster(t, "azure", map[string]any{"adminPrincipalType": tc.config})
			}
			rec := cloudRec(t, "azure", overrides)
			grant := rec.one(t, tRoleAssign, "cluster-admin")
			in := inputs(grant)
			wantRole := "/subscriptions/" + fakeAzureSubscription + "/providers/Microsoft.Authorization/roleDefinitions/" + aks.RBACClusterAdminRole
			if get(in, "roleDefinitionId") != wantRole || get(in, "principalId") != fakeAzureCaller ||
				get(in, "principalType") != tc.want || get(in, "scope") != "cluster-id" {
				t.Errorf("runner's grant %v, want %s for %s %s on the cluster", in, wantRole, tc.want, fakeAzureCaller)
			}
			if aks.RBACClusterAdminRole != "b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b" {
				t.Errorf("RBAC Cluster Admin role %s, want Azure's built-in b1ff04bb-8a4e-4dc4-8eb5-8693973ce19b", aks.RBACClusterAdminRole)
			}
			provider := rec.one(t, tProvider, "k8s")
			if !slices.Contains(provider.DependsOn, grant.Name) {
				t.Errorf("the Kubernetes provider does not wait for the runner's grant: depends on %v", provider.DependsOn)
			}
		})
	}
}

// TestAKSKubeconfig: the kubeconfig (the Kubernetes provider's, and the stack output) holds the
// cluster's server and CA and a user that runs kubelogin with the Azure CLI's sign-in, for the
// AKS AAD server application 6dae42f8-4368-4678-94ff-3960e28e3630; no client certificate, key or
// token, though the user credentials AKS returned had them (kubelogin, "Azure CLI" login mode,
// https://azure.github.io/kubelogin/concepts/login-modes/azurecli.html; AKS, "Use kubelogin to
// authenticate users in Azure Kubernetes Service",
// https://learn.microsoft.com/en-us/azure/aks/kubelogin-authentication). A private cluster's
// server is its private FQDN.
func TestAKSKubeconfig(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides map[string]any
		fqdn      string
	}{
		{"public", nil, fakeAKSFQDN},
		{"private", map[string]any{"privateEndpoint": true, "authorizedNetworks": nil}, fakeAKSPrivateFQDN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var overrides map[string]string
			if tc.overrides != nil {
				overrides = withCluster(t, "azure", tc.overrides)
			}
			rec := cloudRec(t, "azure", overrides)
			kc := rec.one(t, tProvider, "k8s").Inputs["kubeconfig"]
			if !isSecret(kc) {
				t.Fatal("the kubeconfig is not a secret (it names the cluster)")
			}
			text := secretText(kc)
			for _, want := range []string{
				"server: https://" + tc.fqdn + ":443",
				"certificate-authority-data: " + fakeCA,
				"command: kubelogin",
				"args: [get-token, --login, azurecli, --server-id, 6dae42f8-4368-4678-94ff-3960e28e3630]",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("kubeconfig lacks %q:\n%s", want, text)
				}
			}
			checkNoCredential(t, text)
		})
	}
}

// credentialFields are the kubeconfig fields that hold a credential rather than name a plugin.
var credentialFields = []string{"client-certificate-data", "client-key-data", "token:", "password:", "kubeconfig-token-that-must-stay-secret"}

func checkNoCredential(t *testing.T, kubeconfig string) {
	t.Helper()
	for _, field := range credentialFields {
		if strings.Contains(kubeconfig, field) {
			t.Errorf("kubeconfig holds a credential (%s):\n%s", field, kubeconfig)
		}
	}
}

// TestAKSAdminPrincipalTypeValidated: cluster.adminPrincipalType names a kind of principal Azure
// knows, and only on azure.
func TestAKSAdminPrincipalTypeValidated(t *testing.T) {
	raw := cloudRaw(t, "azure", withCluster(t, "azure", map[string]any{"adminPrincipalType": "Group"}))
	if _, err := stacks.Load(raw); err == nil || !strings.Contains(err.Error(), "cluster.adminPrincipalType") ||
		!strings.Contains(err.Error(), "User, ServicePrincipal") {
		t.Errorf("adminPrincipalType Group: %v, want refused with the allowed kinds", err)
	}
}
