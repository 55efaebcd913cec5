package tests

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The security review's cloud findings (issue 12): who reaches the control planes, what the GKE
// nodes and pods may do, when GKE upgrades, who mounts the file stores, what refuses deletion.

const tLock = "azure-native:authorization:ManagementLockByScope"

// withCluster is the cloud stack's kolotoc:cluster with fields set (nil deletes one).
func withCluster(t *testing.T, name string, fields map[string]any) map[string]string {
	t.Helper()
	var c map[string]any
	if err := json.Unmarshal([]byte(cloudRaw(t, name, nil).Values["kolotoc:cluster"]), &c); err != nil {
		t.Fatal(err)
	}
	for k, v := range fields {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, _ := json.Marshal(c)
	return map[string]string{"cluster": string(b)}
}

// TestCloudControlPlaneAccess: the API server answers the authorized networks only, or has no
// public endpoint at all; the committed stacks restrict it.
func TestCloudControlPlaneAccess(t *testing.T) {
	const office = "203.0.113.0/24"
	t.Run("gcp/authorized", func(t *testing.T) {
		cl := inputs(cloudRec(t, "prod", nil).one(t, tGKECluster, "cluster"))
		blocks := get(cl, "masterAuthorizedNetworksConfig", "cidrBlocks")
		if l, _ := blocks.([]any); len(l) != 1 || get(l[0], "cidrBlock") != office {
			t.Errorf("GKE authorized networks %v, want exactly %s", blocks, office)
		}
		if p := get(cl, "privateClusterConfig"); p != nil {
			t.Errorf("a private cluster without cluster.privateEndpoint: %v", p)
		}
	})
	t.Run("gcp/private", func(t *testing.T) {
		cl := inputs(cloudRec(t, "prod", withCluster(t, "prod", map[string]any{"privateEndpoint": true})).one(t, tGKECluster, "cluster"))
		p := get(cl, "privateClusterConfig")
		if get(p, "enablePrivateNodes") != true || get(p, "enablePrivateEndpoint") != true {
			t.Errorf("GKE private cluster config %v, want private nodes and private endpoint", p)
		}
		if get(cl, "masterAuthorizedNetworksConfig", "cidrBlocks", "[0]", "cidrBlock") != office {
			t.Errorf("the authorized networks do not restrict the private endpoint: %v", get(cl, "masterAuthorizedNetworksConfig"))
		}
	})
	t.Run("gcp/open", func(t *testing.T) {
		cl := inputs(cloudRec(t, "prod", withCluster(t, "prod", map[string]any{"authorizedNetworks": nil})).one(t, tGKECluster, "cluster"))
		if m := get(cl, "masterAuthorizedNetworksConfig"); m != nil {
			t.Errorf("authorized networks without cluster.authorizedNetworks: %v", m)
		}
	})
	t.Run("aws/authorized", func(t *testing.T) {
		vpc := get(inputs(cloudRec(t, "aws", nil).one(t, tEKSCluster, "cluster")), "vpcConfig")
		if get(vpc, "endpointPrivateAccess") != true || get(vpc, "endpointPublicAccess") != true ||
			fmt.Sprint(get(vpc, "publicAccessCidrs")) != "["+office+"]" {
			t.Errorf("EKS endpoint access %v, want private on, public from %s only", vpc, office)
		}
	})
	t.Run("aws/private", func(t *testing.T) {
		vpc := get(inputs(cloudRec(t, "aws", withCluster(t, "aws", map[string]any{"privateEndpoint": true, "authorizedNetworks": nil})).
			one(t, tEKSCluster, "cluster")), "vpcConfig")
		if get(vpc, "endpointPrivateAccess") != true || get(vpc, "endpointPublicAccess") != false || get(vpc, "publicAccessCidrs") != nil {
			t.Errorf("EKS endpoint access %v, want private only", vpc)
		}
	})
	t.Run("azure/authorized", func(t *testing.T) {
		p := get(inputs(cloudRec(t, "azure", nil).one(t, tAKSCluster, "cluster")), "apiServerAccessProfile")
		if fmt.Sprint(get(p, "authorizedIPRanges")) != "["+office+"]" || get(p, "enablePrivateCluster") != false {
			t.Errorf("AKS API server access %v, want authorized IP ranges [%s], public", p, office)
		}
	})
	t.Run("azure/private", func(t *testing.T) {
		p := get(inputs(cloudRec(t, "azure", withCluster(t, "azure", map[string]any{"privateEndpoint": true, "authorizedNetworks": nil})).
			one(t, tAKSCluster, "cluster")), "apiServerAccessProfile")
		if get(p, "enablePrivateCluster") != true || get(p, "authorizedIPRanges") != nil {
			t.Errorf("AKS API server access %v, want a private cluster", p)
		}
	})
}

// TestGKEWorkloadIdentity: pods get Workload Identity, never the node's credentials; the nodes
// hold GKE's node role and registry read, with GKE's default scopes rather than cloud-platform.
func TestGKEWorkloadIdentity(t *testing.T) {
	r := cloudRec(t, "prod", nil)
	cl := inputs(r.one(t, tGKECluster, "cluster"))
	if got := get(cl, "workloadIdentityConfig", "workloadPool"); got != "test-project.svc.id.goog" {
		t.Errorf("workload pool %v, want test-project.svc.id.goog", got)
	}
	wantScopes := "[https://www.googleapis.com/auth/devstorage.read_only https://www.googleapis.com/auth/logging.write " +
		"https://www.googleapis.com/auth/monitoring https://www.googleapis.com/auth/service.management.readonly " +
		"https://www.googleapis.com/auth/servicecontrol https://www.googleapis.com/auth/trace.append]"
	configs := map[string]any{"the default pool": get(cl, "nodeConfig")}
	for _, np := range r.ofType(tGKENodePool) {
		configs[np.Name] = get(inputs(np), "nodeConfig")
	}
	for name, nc := range configs {
		if get(nc, "workloadMetadataConfig", "mode") != "GKE_METADATA" {
			t.Errorf("%s: workload metadata %v, want GKE_METADATA", name, get(nc, "workloadMetadataConfig"))
		}
		if got := fmt.Sprint(get(nc, "oauthScopes")); got != wantScopes {
			t.Errorf("%s: scopes %s, want GKE's default set %s", name, got, wantScopes)
		}
	}
	sa := inputs(r.one(t, tGCPAccount, "cluster-nodes"))
	member := "serviceAccount:" + get(sa, "accountId").(string) + "@test-project.iam.gserviceaccount.com"
	var roles []string
	for _, m := range r.ofType(tGCPIAMMember) {
		if get(inputs(m), "member") != member {
			t.Errorf("IAM member %s grants %v to %v, not the node account", m.Name, get(inputs(m), "role"), get(inputs(m), "member"))
		}
		roles = append(roles, get(inputs(m), "role").(string))
	}
	slices.Sort(roles)
	if want := "[roles/artifactregistry.reader roles/container.defaultNodeServiceAccount]"; fmt.Sprint(roles) != want {
		t.Errorf("node account roles %v, want %s", roles, want)
	}
}

// TestGKEMaintenanceWindow: GKE upgrades only in the configured weekly window.
func TestGKEMaintenanceWindow(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window map[string]any
		start  string
		end    string
		rule   string
	}{
		{"prod", nil, "2024-01-06T01:00:00Z", "2024-01-06T07:00:00Z", "FREQ=WEEKLY;BYDAY=SA,SU"},
		{"past midnight", map[string]any{"start": "22:30", "duration": "8h", "days": []string{"FR", "SA"}},
			"2024-01-06T22:30:00Z", "2024-01-07T06:30:00Z", "FREQ=WEEKLY;BYDAY=FR,SA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ov map[string]string
			if tc.window != nil {
				ov = withCluster(t, "prod", map[string]any{"maintenanceWindow": tc.window})
			}
			w := get(inputs(cloudRec(t, "prod", ov).one(t, tGKECluster, "cluster")), "maintenancePolicy", "recurringWindow")
			if get(w, "startTime") != tc.start || get(w, "endTime") != tc.end || get(w, "recurrence") != tc.rule {
				t.Errorf("maintenance window %v, want %s to %s, %s", w, tc.start, tc.end, tc.rule)
			}
		})
	}
}

// TestFilestoreClients: the Filestore instance is on the cluster's network and exported, read-write
// without root squash (the workloads write as root), to the cluster's node ranges only.
func TestFilestoreClients(t *testing.T) {
	for _, tc := range []struct {
		name, network string
		ov            map[string]string
		ranges        string
	}{
		{"default network", "default", nil, "[10.128.0.0/9]"},
		{"custom network", "training", map[string]string{
			"storage": `{"type":"filestore","protect":true,"clientRanges":["10.10.0.0/20","10.20.0.0/14"]}`,
		}, "[10.10.0.0/20 10.20.0.0/14]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ov := withCluster(t, "prod", map[string]any{"network": tc.network})
			for k, v := range tc.ov {
				ov[k] = v
			}
			r := cloudRec(t, "prod", ov)
			fs := inputs(r.one(t, tFilestore, "shared-store"))
			if net := get(fs, "networks", "[0]", "network"); net != tc.network || get(inputs(r.one(t, tGKECluster, "cluster")), "network") != tc.network {
				t.Errorf("Filestore on network %v, want the cluster's %s", net, tc.network)
			}
			opts, _ := get(fs, "fileShares", "nfsExportOptions").([]any)
			if len(opts) != 1 || fmt.Sprint(get(opts[0], "ipRanges")) != tc.ranges ||
				get(opts[0], "accessMode") != "READ_WRITE" || get(opts[0], "squashMode") != "NO_ROOT_SQUASH" {
				t.Errorf("NFS export options %v, want exactly %s read-write without root squash", opts, tc.ranges)
			}
		})
	}
}

// TestCloudClusterProtect: cluster.protect puts Pulumi's protect on every cloud's cluster and
// GKE's deletionProtection on a GKE cluster; without it neither.
func TestCloudClusterProtect(t *testing.T) {
	clusters := map[string]string{"prod": tGKECluster, "aws": tEKSCluster, "azure": tAKSCluster}
	for _, s := range cloudStacks {
		for _, protect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%v", s.name, protect), func(t *testing.T) {
				cl := cloudRec(t, s.name, withCluster(t, s.name, map[string]any{"protect": protect})).one(t, clusters[s.name], "cluster")
				if cl.Protect != protect {
					t.Errorf("cluster protect %v, want %v", cl.Protect, protect)
				}
				if s.name == "prod" && get(inputs(cl), "deletionProtection") != protect {
					t.Errorf("GKE deletionProtection %v, want %v", get(inputs(cl), "deletionProtection"), protect)
				}
			})
		}
	}
}

// TestAKSFilesLockdown: the storage account takes TLS 1.2 at least, shares no blob publicly nor
// with other tenants, and a protected one carries a CanNotDelete management lock.
func TestAKSFilesLockdown(t *testing.T) {
	for _, protect := range []bool{true, false} {
		t.Run(fmt.Sprint(protect), func(t *testing.T) {
			r := cloudRec(t, "azure", map[string]string{"storage": fmt.Sprintf(`{"type":"azurefiles","protect":%v}`, protect)})
			acct := inputs(r.one(t, tStorageAcct, "shared-store"))
			for field, want := range map[string]any{
				"minimumTlsVersion": "TLS1_2", "allowBlobPublicAccess": false, "allowCrossTenantReplication": false,
			} {
				if get(acct, field) != want {
					t.Errorf("storage account %s = %v, want %v", field, get(acct, field), want)
				}
			}
			locks := r.ofType(tLock)
			if !protect {
				if len(locks) != 0 {
					t.Errorf("unprotected storage is locked: %v", locks)
				}
				return
			}
			if len(locks) != 1 {
				t.Fatalf("%d management locks on protected storage, want 1", len(locks))
			}
			lock := inputs(locks[0])
			if get(lock, "level") != "CanNotDelete" || get(lock, "scope") != "shared-store-id" {
				t.Errorf("lock %v, want CanNotDelete on the storage account (shared-store-id)", lock)
			}
			if locks[0].Protect {
				t.Error("the lock carries Pulumi's protect: turning storage.protect off could not remove it")
			}
		})
	}
}

// cloudRec deploys a cloud stack with overrides.
func cloudRec(t *testing.T, name string, overrides map[string]string) *recorder {
	t.Helper()
	return deploy(t, cloudRaw(t, name, overrides))
}

// TestAKSFilesNFS: with the cluster's own subnet (the azure example) the share is NFS: the
// account refuses shared keys and every network but that subnet, the share keeps root as root,
// and the volume is mounted with no secret; the account's keys are never even read.
func TestAKSFilesNFS(t *testing.T) {
	// The service-endpoint mode: the example's storage without its private endpoint.
	r := cloudRec(t, "azure", map[string]string{"storage": `{"type":"azurefiles","tier":"Premium","protocol":"nfs","size":"1Ti","protect":true}`})
	acct := inputs(r.one(t, tStorageAcct, "shared-store"))
	for field, want := range map[string]any{
		"allowSharedKeyAccess": false,
		// Azure requires it off for NFS; the traffic stays on the subnet's service endpoint.
		"enableHttpsTrafficOnly": false,
		// Service-endpoint traffic arrives at the public endpoint: Disabled would refuse it too.
		"publicNetworkAccess": "Enabled",
		"kind":                "FileStorage",
	} {
		if get(acct, field) != want {
			t.Errorf("storage account %s = %v, want %v", field, get(acct, field), want)
		}
	}
	rules := get(acct, "networkRuleSet")
	vnet, _ := get(rules, "virtualNetworkRules").([]any)
	if get(rules, "defaultAction") != "Deny" || get(rules, "bypass") != "None" || get(rules, "ipRules") != nil ||
		len(vnet) != 1 || get(vnet[0], "virtualNetworkResourceId") != exampleSubnet || get(vnet[0], "action") != "Allow" {
		t.Errorf("storage firewall %v, want deny all but %s, no IP rules, no bypass", rules, exampleSubnet)
	}
	share := inputs(r.one(t, tFileShare, "shared-store"))
	if get(share, "enabledProtocols") != "NFS" || get(share, "rootSquash") != "NoRootSquash" {
		t.Errorf("share %v, want NFS without root squash", share)
	}

	pv := inputs(r.one(t, tPV, "storage"))
	csi := get(pv, "spec", "csi")
	account := get(acct, "accountName").(string)
	wantAttrs := map[string]any{"resourceGroup": "kolotoc-azure-rg", "storageAccount": account, "shareName": "shared", "protocol": "nfs"}
	if d := cmp.Diff(wantAttrs, get(csi, "volumeAttributes")); d != "" {
		t.Errorf("volume attributes (-want +got):\n%s", d)
	}
	if get(csi, "volumeHandle") != account+"_shared" || get(csi, "nodeStageSecretRef") != nil || get(csi, "nodePublishSecretRef") != nil {
		t.Errorf("NFS volume %v, want handle %s_shared and no secret", csi, account)
	}
	if got := fmt.Sprint(get(pv, "spec", "mountOptions")); got != "[nconnect=4 noresvport actimeo=30]" {
		t.Errorf("mount options %s, want [nconnect=4 noresvport actimeo=30]", got)
	}
	for _, sec := range r.ofType(tSecret) {
		if strings.Contains(secretText(sec.Inputs["stringData"]), "azurestorageaccount") {
			t.Errorf("Secret %s holds storage account credentials", sec.Name)
		}
	}
	if r.called(listKeys) {
		t.Errorf("%s invoked: the NFS share needs no key, and the program must not read one", listKeys)
	}
}

// TestAKSFilesPrivateEndpoint: with storage.privateEndpoint (the azure example) the account's
// public endpoint refuses every network, and the share answers at a private endpoint in the
// cluster's subnet, connected to the account's file service, whose name the privatelink zone,
// linked to the subnet's virtual network, resolves; the shared volume waits for those records.
// With privateDnsZoneId the user's zone is used, and no zone or link is made.
func TestAKSFilesPrivateEndpoint(t *testing.T) {
	const (
		pe, zone, link, group = "azure-native:network:PrivateEndpoint", "azure-native:network:PrivateZone",
			"azure-native:network:VirtualNetworkLink", "azure-native:network:PrivateDnsZoneGroup"
		ownZone = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/dns/providers/Microsoft.Network/privateDnsZones/privatelink.file.core.windows.net"
	)
	vnet := strings.TrimSuffix(exampleSubnet, exampleSubnet[strings.LastIndex(exampleSubnet, "/subnets/"):])
	for _, tc := range []struct {
		name    string
		ov      map[string]string
		ownZone bool
	}{
		{"the example", nil, false},
		{"an existing zone", map[string]string{"storage": `{"type":"azurefiles","tier":"Premium","protocol":"nfs","size":"1Ti","privateEndpoint":true,"privateDnsZoneId":"` + ownZone + `"}`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cloudRec(t, "azure", tc.ov)
			acct := inputs(r.one(t, tStorageAcct, "shared-store"))
			if get(acct, "publicNetworkAccess") != "Disabled" || get(acct, "allowSharedKeyAccess") != false {
				t.Errorf("storage account publicNetworkAccess %v, allowSharedKeyAccess %v: want Disabled, false",
					get(acct, "publicNetworkAccess"), get(acct, "allowSharedKeyAccess"))
			}
			account := get(acct, "accountName").(string)
			ep := inputs(r.one(t, pe, "shared-store"))
			conns, _ := get(ep, "privateLinkServiceConnections").([]any)
			if get(ep, "subnet", "id") != exampleSubnet || len(conns) != 1 || fmt.Sprint(get(conns[0], "groupIds")) != "[file]" ||
				get(conns[0], "privateLinkServiceId") != "shared-store-id" || get(ep, "privateEndpointName") != account+"-files" {
				t.Errorf("private endpoint %v: want one in %s, connected to the account's file service", ep, exampleSubnet)
			}
			zg := r.one(t, group, "shared-store")
			configs, _ := get(inputs(zg), "privateDnsZoneConfigs").([]any)
			wantZone := ownZone
			if !tc.ownZone {
				z := inputs(r.one(t, zone, "shared-store"))
				if get(z, "privateZoneName") != "privatelink.file.core.windows.net" || get(z, "location") != "global" {
					t.Errorf("private zone %v", z)
				}
				l := inputs(r.one(t, link, "shared-store"))
				if get(l, "virtualNetwork", "id") != vnet || get(l, "privateZoneName") != "privatelink.file.core.windows.net" || get(l, "registrationEnabled") != false {
					t.Errorf("zone link %v: want the subnet's virtual network %s", l, vnet)
				}
				wantZone = "shared-store-id" // the zone's ID, as the mock names it
			} else if len(r.ofType(zone))+len(r.ofType(link)) != 0 {
				t.Errorf("a zone or link made beside the given zone %s", ownZone)
			}
			if len(configs) != 1 || get(configs[0], "privateDnsZoneId") != wantZone || get(inputs(zg), "privateEndpointName") != account+"-files" {
				t.Errorf("zone group %v: want the endpoint's records in %s", inputs(zg), wantZone)
			}
			if pv := r.one(t, tPV, "storage"); !slices.ContainsFunc(pv.DependsOnURNs, func(u string) bool { return strings.HasSuffix(u, group+"::shared-store") }) {
				t.Errorf("the shared volume does not wait for the private DNS records: depends on %v", pv.DependsOnURNs)
			}
		})
	}
}

// TestAKSFilesSMB: smb, the only choice without a subnet of one's own, is mounted with the account
// key (a secret, in the Secret the volume names), and the account takes HTTPS only; with a
// subnet, the storage firewall closes it to every other network all the same.
func TestAKSFilesSMB(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ov     map[string]string
		subnet bool
	}{
		{"no subnet", map[string]string{"cluster": `{"region":"eastus","authorizedNetworks":["203.0.113.0/24"]}`, "storage": `{"type":"azurefiles"}`}, false},
		{"subnet", map[string]string{"storage": `{"type":"azurefiles","protocol":"smb"}`}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cloudRec(t, "azure", tc.ov)
			acct := inputs(r.one(t, tStorageAcct, "shared-store"))
			if get(acct, "allowSharedKeyAccess") != true || get(acct, "enableHttpsTrafficOnly") != true {
				t.Errorf("SMB account: shared key %v, HTTPS only %v; want both on", get(acct, "allowSharedKeyAccess"), get(acct, "enableHttpsTrafficOnly"))
			}
			rules := get(acct, "networkRuleSet")
			if tc.subnet && (get(rules, "defaultAction") != "Deny" || get(rules, "virtualNetworkRules", "[0]", "virtualNetworkResourceId") != exampleSubnet) {
				t.Errorf("storage firewall %v, want deny all but %s", rules, exampleSubnet)
			}
			if !tc.subnet && rules != nil {
				t.Errorf("storage firewall %v without a subnet to allow", rules)
			}
			share := inputs(r.one(t, tFileShare, "shared-store"))
			if get(share, "enabledProtocols") != "SMB" || get(share, "rootSquash") != nil {
				t.Errorf("share %v, want SMB", share)
			}
			creds := r.one(t, tSecret, "storage-credentials")
			if v := creds.Inputs["stringData"]; !isSecret(v) || !strings.Contains(secretText(v), fakeAzureStorageKey) {
				t.Errorf("the storage key Secret: secret=%v", isSecret(v))
			}
			csi := get(inputs(r.one(t, tPV, "storage")), "spec", "csi")
			if get(csi, "nodeStageSecretRef", "name") != "shared-credentials" || get(csi, "volumeHandle") != "kolotoc-azure-rg#"+get(acct, "accountName").(string)+"#shared" {
				t.Errorf("SMB volume %v, want the rg#account#share handle and the key Secret", csi)
			}
			if !r.called(listKeys) {
				t.Errorf("%s not invoked: the SMB mount needs the key", listKeys)
			}
		})
	}
}
