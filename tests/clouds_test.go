package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"

	"kolotoc/stacks"
)

// Type tokens of the cloud resources the tests look at.
const (
	tGKECluster    = "gcp:container/cluster:Cluster"
	tGKENodePool   = "gcp:container/nodePool:NodePool"
	tGCPAccount    = "gcp:serviceaccount/account:Account"
	tGCPIAMMember  = "gcp:projects/iAMMember:IAMMember"
	tFilestore     = "gcp:filestore/instance:Instance"
	tEKSCluster    = "aws:eks/cluster:Cluster"
	tEKSNodeGroup  = "aws:eks/nodeGroup:NodeGroup"
	tEKSAddon      = "aws:eks/addon:Addon"
	tIAMRole       = "aws:iam/role:Role"
	tIAMAttachment = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
	tSecurityGroup = "aws:ec2/securityGroup:SecurityGroup"
	tSubnet        = "aws:ec2/subnet:Subnet"
	tEFS           = "aws:efs/fileSystem:FileSystem"
	tMountTarget   = "aws:efs/mountTarget:MountTarget"
	tAKSCluster    = "azure-native:containerservice:ManagedCluster"
	tAgentPool     = "azure-native:containerservice:AgentPool"
	tStorageAcct   = "azure-native:storage:StorageAccount"
	tFileShare     = "azure-native:storage:FileShare"
	tResourceGroup = "azure-native:resources:ResourceGroup"
	tRoleAssign    = "azure-native:authorization:RoleAssignment"
	tStorageClass  = "kubernetes:storage.k8s.io/v1:StorageClass"
	// The pools' placement and fabric (fabric_test.go).
	tLaunchTemplate = "aws:ec2/launchTemplate:LaunchTemplate"
	tPlacementGroup = "aws:ec2/placementGroup:PlacementGroup"
	tProximityGroup = "azure-native:compute:ProximityPlacementGroup"
)

// What the mocked clouds report once a resource exists, and what their invokes return. The
// secrets among them must reach the registered inputs only as secrets.
const (
	fakeGKEEndpoint = "203.0.113.10"
	// A private cluster's control plane: its range (VPC peering) and internal address.
	fakeGKEControlPlaneRange = "172.16.0.32/28"
	fakeGKEPrivateEndpoint   = "10.128.0.2"
	fakeGCPProject           = "test-project" // the gcp provider's default project (gcloud's, GOOGLE_PROJECT)
	fakeEKSEndpoint          = "https://0123456789ABCDEF.gr7.us-east-1.eks.amazonaws.com"
	fakeCA                   = "ZmFrZS1jbHVzdGVyLWNh"
	fakeFilestoreIP          = "10.20.0.2"
	fakeNodeSG               = "sg-0nodes0000000000"
	fakeAzureStorageKey      = "azure-storage-key-that-must-stay-secret"
	fakeAKSPrincipal         = "11111111-2222-3333-4444-555555555555"
	fakeKubeletObjectID      = "66666666-7777-8888-9999-000000000000"
	// Who runs `pulumi up` on Azure, as azure-native's getClientConfig reports them.
	fakeAzureTenant       = "aaaaaaaa-0000-0000-0000-000000000001"
	fakeAzureSubscription = "bbbbbbbb-0000-0000-0000-000000000002"
	fakeAzureCaller       = "cccccccc-0000-0000-0000-000000000003"
	fakeAKSFQDN           = "kolotoc-1a2b3c4d.hcp.eastus.azmk8s.io"
	fakeAKSPrivateFQDN    = "kolotoc-1a2b3c4d.privatelink.eastus.azmk8s.io"
	// fakeAKSUserKubeconfig is what listClusterUserCredentials returns for a cluster with local
	// accounts on: a client certificate and a token. Kolotoc must keep its CA and nothing else.
	fakeAKSUserKubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: kolotoc, cluster: {server: "https://` + fakeAKSFQDN + `:443", certificate-authority-data: ` + fakeCA + `}}]
users: [{name: clusterUser, user: {client-certificate-data: Q0VSVA==, client-key-data: S0VZ, token: kubeconfig-token-that-must-stay-secret}}]
contexts: [{name: kolotoc, context: {cluster: kolotoc, user: clusterUser}}]
current-context: kolotoc
`
	// listKeys is the invoke that reads a storage account's keys.
	listKeys = "azure-native:storage:listStorageAccountKeys"
)

// cloudState fills the outputs a cloud computes: endpoints and CAs, service account e-mails,
// addresses, ARNs, and the names azure-native reports back.
func cloudState(token string, state resource.PropertyMap) {
	str := func(k resource.PropertyKey) string {
		if v, ok := state[k]; ok && v.IsString() {
			return v.StringValue()
		}
		return ""
	}
	set := func(k resource.PropertyKey, v any) { state[k] = resource.NewPropertyValue(v) }
	switch token {
	case tGKECluster:
		if str("project") == "" {
			set("project", fakeGCPProject) // the provider's default project
		}
		set("endpoint", fakeGKEEndpoint)
		set("masterAuth", map[string]any{"clusterCaCertificate": fakeCA})
		if v, ok := state["privateClusterConfig"]; ok && v.IsObject() {
			// GKE reports the control plane's range of a private (VPC peering) cluster.
			pcc := v.ObjectValue().Copy()
			pcc["masterIpv4CidrBlock"] = resource.NewProperty(fakeGKEControlPlaneRange)
			pcc["privateEndpoint"] = resource.NewProperty(fakeGKEPrivateEndpoint)
			state["privateClusterConfig"] = resource.NewProperty(pcc)
		}
	case tGCPAccount:
		email := str("accountId") + "@test-project.iam.gserviceaccount.com"
		set("email", email)
		set("member", "serviceAccount:"+email)
		set("project", fakeGCPProject)
	case tFilestore:
		set("networks", []any{map[string]any{"network": "default", "ipAddresses": []any{fakeFilestoreIP}}})
	case tEKSCluster:
		set("arn", fakeAWSARN("eks", "cluster/"+str("name")))
		set("endpoint", fakeEKSEndpoint)
		set("certificateAuthority", map[string]any{"data": fakeCA})
		vpc := map[string]any{"clusterSecurityGroupId": fakeNodeSG}
		set("vpcConfig", vpc)
	case tIAMRole:
		set("arn", "arn:aws:iam::123456789012:role/"+str("name"))
	case tSQSQueue:
		set("arn", fakeAWSARN("sqs", str("name")))
		set("url", "https://sqs.us-east-1.amazonaws.com/123456789012/"+str("name"))
	case tLaunchTemplate:
		set("latestVersion", 1) // EC2 numbers a template's versions from 1
	case tAKSCluster:
		set("name", str("resourceName"))
		set("identity", map[string]any{"type": "SystemAssigned", "principalId": fakeAKSPrincipal})
		set("identityProfile", map[string]any{"kubeletidentity": map[string]any{"objectId": fakeKubeletObjectID}})
		set("fqdn", fakeAKSFQDN)
		set("privateFQDN", fakeAKSPrivateFQDN)
	case tResourceGroup:
		set("name", str("resourceGroupName"))
	case tStorageAcct:
		set("name", str("accountName"))
	case tFileShare:
		set("name", str("shareName"))
	}
}

// cloudCall answers the clouds' invokes.
func cloudCall(args pulumi.MockCallArgs) resource.PropertyMap {
	switch args.Token {
	case "aws:index/getAvailabilityZones:getAvailabilityZones":
		return resource.NewPropertyMapFromMap(map[string]any{"names": []any{"us-east-1a", "us-east-1b", "us-east-1c"}})
	case "azure-native:containerservice:listManagedClusterUserCredentials":
		kc := base64.StdEncoding.EncodeToString([]byte(fakeAKSUserKubeconfig))
		return resource.NewPropertyMapFromMap(map[string]any{"kubeconfigs": []any{map[string]any{"name": "clusterUser", "value": kc}}})
	case "azure-native:authorization:getClientConfig":
		return resource.NewPropertyMapFromMap(map[string]any{
			"clientId": "dddddddd-0000-0000-0000-000000000004", "objectId": fakeAzureCaller,
			"subscriptionId": fakeAzureSubscription, "tenantId": fakeAzureTenant,
		})
	case listKeys:
		return resource.NewPropertyMapFromMap(map[string]any{"keys": []any{
			map[string]any{"keyName": "key1", "permissions": "FULL", "value": fakeAzureStorageKey},
		}})
	}
	return resource.PropertyMap{}
}

// cloudStacks are the committed cloud stacks: prod on GKE, the AWS and Azure examples.
var cloudStacks = []struct {
	name, file, cloud string
}{
	{name: "prod", file: "../Pulumi.prod.yaml", cloud: stacks.CloudGCP},
	{name: "aws", file: "../examples/aws/Pulumi.aws.yaml", cloud: stacks.CloudAWS},
	{name: "azure", file: "../examples/azure/Pulumi.azure.yaml", cloud: stacks.CloudAzure},
}

// cloudRaw reads a cloud stack file with its secrets set, overrides applied (kolotoc: prefix added).
func cloudRaw(t *testing.T, name string, overrides map[string]string) stacks.Raw {
	t.Helper()
	for _, s := range cloudStacks {
		if s.name != name {
			continue
		}
		raw, err := stacks.ReadStackFile(s.file, "kolotoc", s.name, "")
		if err != nil {
			t.Fatal(err)
		}
		return withTestSecrets(raw, overrides)
	}
	t.Fatalf("no cloud stack %s", name)
	return stacks.Raw{}
}

// secretNeedles must never appear outside a secret in anything registered.
var secretNeedles = []string{testPassword, testSeed, "PRIVATE KEY", "kubeconfig-token-that-must-stay-secret", fakeAzureStorageKey}

// TestGoldenClouds snapshots everything each cloud stack registers, the cloud resources
// included. Regenerate on purpose only: UPDATE_GOLDEN=1 go test ./tests -run TestGolden
func TestGoldenClouds(t *testing.T) {
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			got := goldenYAML(t, deploy(t, cloudRaw(t, s.name, nil)))
			compareGolden(t, filepath.Join("testdata", s.name+".golden.yaml"), got)
			for _, secret := range secretNeedles {
				if bytes.Contains(got, []byte(secret)) {
					t.Errorf("golden output contains secret material %q", secret)
				}
			}
		})
	}
}

// TestCloudSecrets: every kubeconfig, the Azure storage key, the passwords and ssh keys reach the
// registered inputs only as secrets; the Kubernetes provider gets the cloud's kubeconfig, whose
// user runs the cloud's exec plugin and holds no credential of its own.
func TestCloudSecrets(t *testing.T) {
	wantInKubeconfig := map[string]string{
		stacks.CloudGCP:   "gke-gcloud-auth-plugin",
		stacks.CloudAWS:   "get-token",
		stacks.CloudAzure: "command: kubelogin",
	}
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			rec := deploy(t, cloudRaw(t, s.name, nil))
			for _, r := range rec.sorted() {
				if leak := findPlain(resource.NewProperty(r.Inputs), secretNeedles); leak != "" {
					t.Errorf("%s %s: %q in plain text", r.Type, r.Name, leak)
				}
			}
			kc := rec.one(t, tProvider, "k8s").Inputs["kubeconfig"]
			if !isSecret(kc) {
				t.Fatal("the cluster's kubeconfig is not a secret")
			}
			text := secretText(kc)
			if !strings.Contains(text, wantInKubeconfig[s.cloud]) {
				t.Errorf("kubeconfig lacks %q:\n%s", wantInKubeconfig[s.cloud], text)
			}
			checkNoCredential(t, text)
		})
	}
}

// TestGKE: what a GKE stack relies on.
func TestGKE(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "prod", nil))

	cl := inputs(rec.one(t, tGKECluster, "cluster"))
	if get(cl, "removeDefaultNodePool") != true || get(cl, "initialNodeCount") != 1.0 {
		t.Errorf("the default pool is not removed: removeDefaultNodePool=%v initialNodeCount=%v",
			get(cl, "removeDefaultNodePool"), get(cl, "initialNodeCount"))
	}
	// NetworkPolicy is enforced: Dataplane V2, not the legacy Calico add-on beside it.
	if get(cl, "datapathProvider") != "ADVANCED_DATAPATH" || get(cl, "networkPolicy") != nil {
		t.Errorf("GKE does not enforce the NetworkPolicies: datapathProvider %v, networkPolicy %v, want ADVANCED_DATAPATH alone",
			get(cl, "datapathProvider"), get(cl, "networkPolicy"))
	}
	if get(cl, "location") != "us-central1" || get(cl, "name") != "kolotoc-prod" {
		t.Errorf("cluster %v in %v, want kolotoc-prod, regional in us-central1", get(cl, "name"), get(cl, "location"))
	}

	gpu := rec.one(t, tGKENodePool, "cluster-gpu")
	np := inputs(gpu)
	nc := get(np, "nodeConfig")
	if get(nc, "machineType") != "a2-highgpu-8g" || get(nc, "spot") != false {
		t.Errorf("GPU pool: machineType %v spot %v, want a2-highgpu-8g on demand", get(nc, "machineType"), get(nc, "spot"))
	}
	acc := get(nc, "guestAccelerators", "[0]")
	if get(acc, "type") != "nvidia-tesla-a100" || get(acc, "count") != 8.0 ||
		get(acc, "gpuDriverInstallationConfig", "gpuDriverVersion") != "DEFAULT" {
		t.Errorf("GPU pool accelerators: %v", get(nc, "guestAccelerators"))
	}
	if !hasTaint(get(nc, "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") {
		t.Errorf("GPU pool lacks taint nvidia.com/gpu=present:NoSchedule: %v", get(nc, "taints"))
	}
	if get(nc, "labels", "kolotoc.dev/pool") != "gpu" {
		t.Errorf("GPU pool nodes lack the pool label the workloads select: %v", get(nc, "labels"))
	}
	if get(np, "nodeCount") != 8.0 || get(np, "autoscaling") != nil || fmt.Sprint(get(np, "nodeLocations")) != "[us-central1-a]" {
		t.Errorf("GPU pool: nodeCount %v autoscaling %v locations %v, want 8 fixed in us-central1-a",
			get(np, "nodeCount"), get(np, "autoscaling"), get(np, "nodeLocations"))
	}
	checkLongTimeout(t, gpu)

	cpu := inputs(rec.one(t, tGKENodePool, "cluster-cpu"))
	if get(cpu, "autoscaling", "minNodeCount") != 2.0 || get(cpu, "autoscaling", "maxNodeCount") != 4.0 || get(cpu, "initialNodeCount") != 2.0 {
		t.Errorf("CPU pool autoscaling %v initial %v, want 2..4 from 2", get(cpu, "autoscaling"), get(cpu, "initialNodeCount"))
	}
	if taints := get(cpu, "nodeConfig", "taints"); taints != nil {
		t.Errorf("CPU pool is tainted: %v", taints)
	}

	// The nodes run as a dedicated account, never the default account.
	sa := inputs(rec.one(t, tGCPAccount, "cluster-nodes"))
	email := get(sa, "accountId").(string) + "@test-project.iam.gserviceaccount.com"
	for _, name := range []string{"cluster-gpu", "cluster-cpu"} {
		if got := get(inputs(rec.one(t, tGKENodePool, name)), "nodeConfig", "serviceAccount"); got != email {
			t.Errorf("pool %s runs as %v, want %s", name, got, email)
		}
	}
	// Its roles: TestGKEWorkloadIdentity.

	fs := rec.one(t, tFilestore, "shared-store")
	if !fs.Protect {
		t.Error("Filestore instance with storage.protect lacks the protect option")
	}
	if f := inputs(fs); get(f, "tier") != "ZONAL" || get(f, "fileShares", "capacityGb") != 2048.0 || get(f, "location") != "us-central1-a" {
		t.Errorf("Filestore: %v", f)
	}
	pv := inputs(rec.one(t, tPV, "storage"))
	if get(pv, "spec", "nfs", "server") != fakeFilestoreIP || get(pv, "spec", "nfs", "path") != "/shared" ||
		fmt.Sprint(get(pv, "spec", "mountOptions")) != "[nfsvers=3 hard]" {
		t.Errorf("the shared volume does not mount the Filestore share over NFSv3: %v", get(pv, "spec"))
	}
	for _, ds := range rec.ofType(tDaemonSet) {
		if ds.Name == "device-plugin" {
			t.Error("GKE runs its own device plugin; Kolotoc's would compete with it")
		}
	}
}

// TestGKEZonalAndSpot: a zonal cluster with a Spot GPU pool, local SSDs and a different driver.
func TestGKEZonalAndSpot(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "prod", map[string]string{
		"cluster": `{"region":"europe-west4","zone":"europe-west4-a"}`,
		"nodePools": `[{"name":"gpu","machineType":"g2-standard-96","nodes":2,"minNodes":1,"maxNodes":3,"spot":true,"localSsds":4,"gpuDriver":"LATEST"},` +
			`{"name":"cpu","machineType":"n2-standard-16"}]`,
		"towers":  `{"count":3,"gpusPerTower":8}`,
		"storage": `{"type":"filestore","tier":"BASIC_HDD"}`,
	}))
	if get(inputs(rec.one(t, tGKECluster, "cluster")), "location") != "europe-west4-a" {
		t.Error("cluster.zone does not make the cluster zonal")
	}
	np := inputs(rec.one(t, tGKENodePool, "cluster-gpu"))
	nc := get(np, "nodeConfig")
	if get(nc, "spot") != true || get(nc, "guestAccelerators", "[0]", "type") != "nvidia-l4" ||
		get(nc, "guestAccelerators", "[0]", "gpuDriverInstallationConfig", "gpuDriverVersion") != "LATEST" {
		t.Errorf("spot L4 pool: %v", nc)
	}
	if get(np, "autoscaling", "minNodeCount") != 1.0 || get(np, "autoscaling", "maxNodeCount") != 3.0 {
		t.Errorf("autoscaling: %v", get(np, "autoscaling"))
	}
	if get(nc, "ephemeralStorageLocalSsdConfig", "localSsdCount") != 4.0 {
		t.Errorf("local SSDs do not back the emptyDir scratch: %v", nc)
	}
	fs := rec.one(t, tFilestore, "shared-store")
	if fs.Protect || get(inputs(fs), "fileShares", "capacityGb") != 1024.0 || get(inputs(fs), "location") != "europe-west4-a" {
		t.Errorf("unprotected BASIC_HDD Filestore of the minimum size in the cluster's zone: protect=%v %v", fs.Protect, inputs(fs))
	}
}

// TestEKS: what an EKS stack relies on.
func TestEKS(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", nil))

	gpu := rec.one(t, tEKSNodeGroup, "cluster-gpu")
	ng := inputs(gpu)
	if get(ng, "amiType") != "AL2023_x86_64_NVIDIA" || fmt.Sprint(get(ng, "instanceTypes")) != "[p4d.24xlarge]" || get(ng, "capacityType") != "ON_DEMAND" {
		t.Errorf("GPU node group: ami %v types %v capacity %v", get(ng, "amiType"), get(ng, "instanceTypes"), get(ng, "capacityType"))
	}
	if sc := get(ng, "scalingConfig"); get(sc, "minSize") != 2.0 || get(sc, "desiredSize") != 2.0 || get(sc, "maxSize") != 4.0 {
		t.Errorf("GPU node group scaling %v, want 2/2/4", sc)
	}
	if !hasTaint(get(ng, "taints"), "nvidia.com/gpu", "present", "NO_SCHEDULE") || get(ng, "labels", "kolotoc.dev/pool") != "gpu" {
		t.Errorf("GPU node group taints %v labels %v", get(ng, "taints"), get(ng, "labels"))
	}
	checkLongTimeout(t, gpu)
	cpu := inputs(rec.one(t, tEKSNodeGroup, "cluster-cpu"))
	if get(cpu, "amiType") != "AL2023_x86_64_STANDARD" || get(cpu, "capacityType") != "SPOT" || get(cpu, "taints") != nil {
		t.Errorf("CPU node group: ami %v capacity %v taints %v", get(cpu, "amiType"), get(cpu, "capacityType"), get(cpu, "taints"))
	}

	// NetworkPolicy is enforced: the VPC CNI is a managed add-on with its network policy agent
	// on, in place before any node (and so any pod) exists.
	var cni registered
	for _, a := range rec.ofType(tEKSAddon) {
		if get(inputs(a), "addonName") == "vpc-cni" {
			cni = a
		}
	}
	var cniConfig map[string]any
	if cni.Name == "" {
		t.Fatal("the VPC CNI add-on is not installed: EKS would not enforce the NetworkPolicies")
	}
	if err := json.Unmarshal([]byte(fmt.Sprint(get(inputs(cni), "configurationValues"))), &cniConfig); err != nil ||
		cniConfig["enableNetworkPolicy"] != "true" || get(inputs(cni), "resolveConflictsOnCreate") != "OVERWRITE" {
		t.Errorf("VPC CNI add-on: configuration %v (%v), conflicts %v; want enableNetworkPolicy \"true\", OVERWRITE",
			get(inputs(cni), "configurationValues"), err, get(inputs(cni), "resolveConflictsOnCreate"))
	}
	for _, g := range rec.ofType(tEKSNodeGroup) {
		if !slices.Contains(g.DependsOn, cni.Name) {
			t.Errorf("node group %s does not wait for the VPC CNI add-on (depends on %v)", g.Name, g.DependsOn)
		}
	}

	// IAM: each role has exactly the managed policies EKS documents.
	policies := map[string][]string{}
	for _, a := range rec.ofType(tIAMAttachment) {
		role := a.Name[:strings.LastIndex(a.Name, "-")]
		policies[role] = append(policies[role], get(inputs(a), "policyArn").(string))
	}
	want := map[string]int{"cluster-cluster": 1, "cluster-nodes": 3, "shared-store-csi": 1}
	for role, n := range want {
		if len(policies[role]) != n {
			t.Errorf("role %s has policies %v, want %d", role, policies[role], n)
		}
	}

	// EFS is reachable over NFS from the node security group and from nothing else.
	sg := inputs(rec.one(t, tSecurityGroup, "shared-store"))
	ingress, _ := get(sg, "ingress").([]any)
	if len(ingress) != 1 {
		t.Fatalf("EFS security group ingress %v, want exactly the NFS rule", ingress)
	}
	rule := ingress[0]
	if get(rule, "protocol") != "tcp" || get(rule, "fromPort") != 2049.0 || get(rule, "toPort") != 2049.0 ||
		fmt.Sprint(get(rule, "securityGroups")) != "["+fakeNodeSG+"]" || get(rule, "cidrBlocks") != nil || get(rule, "ipv6CidrBlocks") != nil {
		t.Errorf("EFS ingress is not NFS from the node security group only: %v", rule)
	}
	if get(sg, "egress") != nil {
		t.Errorf("EFS security group has egress rules: %v", get(sg, "egress"))
	}
	mts := rec.ofType(tMountTarget)
	private := 0
	for _, s := range rec.ofType(tSubnet) {
		if strings.Contains(s.Name, "-private-") {
			private++
		}
	}
	if len(mts) != 2 || private != 2 {
		t.Errorf("%d mount targets for %d private subnets, want one in each of 2", len(mts), private)
	}
	for _, mt := range mts {
		if fmt.Sprint(get(inputs(mt), "securityGroups")) != "[shared-store-id]" {
			t.Errorf("mount target %s outside the EFS security group: %v", mt.Name, get(inputs(mt), "securityGroups"))
		}
	}
	efs := rec.one(t, tEFS, "shared-store")
	if !efs.Protect || get(inputs(efs), "encrypted") != true || get(inputs(efs), "throughputMode") != "elastic" {
		t.Errorf("EFS: protect %v %v", efs.Protect, inputs(efs))
	}

	// The EFS CSI driver is installed as an add-on, its controller holding the driver's role.
	var csi registered
	for _, a := range rec.ofType(tEKSAddon) {
		if get(inputs(a), "addonName") == "aws-efs-csi-driver" {
			csi = a
		}
	}
	if csi.Name == "" {
		t.Fatal("the EFS CSI driver add-on is not installed")
	}
	assoc := get(inputs(csi), "podIdentityAssociations", "[0]")
	if get(assoc, "serviceAccount") != "efs-csi-controller-sa" || get(assoc, "roleArn") != "arn:aws:iam::123456789012:role/kolotoc-aws-efs-csi" {
		t.Errorf("EFS CSI driver identity: %v", assoc)
	}
	class := inputs(rec.one(t, tStorageClass, "storage"))
	pv := inputs(rec.one(t, tPV, "storage"))
	if get(class, "provisioner") != "efs.csi.aws.com" || get(pv, "spec", "csi", "driver") != "efs.csi.aws.com" ||
		get(pv, "spec", "csi", "volumeHandle") != "shared-store-id" || get(pv, "spec", "nfs") != nil {
		t.Errorf("the shared volume is not served by the EFS CSI driver: class %v volume %v", class, get(pv, "spec"))
	}
	pvc := inputs(rec.one(t, tPVC, "storage"))
	if get(pvc, "spec", "storageClassName") != get(class, "metadata", "name") || fmt.Sprint(get(pvc, "spec", "accessModes")) != "[ReadWriteMany]" {
		t.Errorf("claim %v is not a RWX claim of the EFS class", get(pvc, "spec"))
	}
}

// TestEKSExistingSubnets: with vpcId and subnetIds nothing of the network is created and EFS has
// a mount target in each given subnet.
func TestEKSExistingSubnets(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "aws", map[string]string{
		"cluster": `{"region":"eu-west-1","vpcId":"vpc-0abc","subnetIds":["subnet-a","subnet-b","subnet-c"]}`,
	}))
	if n := len(rec.ofType(tSubnet)); n != 0 {
		t.Errorf("%d subnets created with existing subnets given", n)
	}
	var got []string
	for _, mt := range rec.ofType(tMountTarget) {
		got = append(got, get(inputs(mt), "subnetId").(string))
	}
	if fmt.Sprint(got) != "[subnet-a subnet-b subnet-c]" {
		t.Errorf("mount targets in %v", got)
	}
	if get(inputs(rec.one(t, tSecurityGroup, "shared-store")), "vpcId") != "vpc-0abc" {
		t.Error("EFS security group not in the given VPC")
	}
}

// TestAKS: what an AKS stack relies on.
func TestAKS(t *testing.T) {
	rec := deploy(t, cloudRaw(t, "azure", map[string]string{
		// A Spot pool beside the example's: no Kolotoc workload runs there (AKS taints Spot nodes).
		"nodePools": `[{"name":"gpu","machineType":"Standard_ND96asr_v4","nodes":2,"maxNodes":4},` +
			`{"name":"cpu","machineType":"Standard_D16s_v5","nodes":1,"maxNodes":3},` +
			`{"name":"spot","machineType":"Standard_NC64as_T4_v3","nodes":1,"maxNodes":2,"spot":true,"zones":["1","2"],"placement":"spread"}]`,
	}))
	mc := inputs(rec.one(t, tAKSCluster, "cluster"))
	sys := get(mc, "agentPoolProfiles", "[0]")
	if get(sys, "mode") != "System" || get(sys, "vmSize") != "Standard_D4s_v5" {
		t.Errorf("system pool: %v", sys)
	}
	// NetworkPolicy is enforced: Azure CNI powered by Cilium, not kubenet (which enforces none).
	if np := get(mc, "networkProfile"); get(np, "networkPlugin") != "azure" || get(np, "networkPluginMode") != "overlay" ||
		get(np, "networkDataplane") != "cilium" || get(np, "networkPolicy") != "cilium" {
		t.Errorf("AKS does not enforce the NetworkPolicies: networkProfile %v, want Azure CNI overlay with Cilium", np)
	}

	gpu := rec.one(t, tAgentPool, "cluster-gpu")
	ap := inputs(gpu)
	if get(ap, "vmSize") != "Standard_ND96asr_v4" || get(ap, "enableAutoScaling") != true || get(ap, "minCount") != 2.0 || get(ap, "maxCount") != 4.0 {
		t.Errorf("GPU pool: %v", ap)
	}
	if !containsString(get(ap, "nodeTaints"), "nvidia.com/gpu=present:NoSchedule") || get(ap, "nodeLabels", "kolotoc.dev/pool") != "gpu" {
		t.Errorf("GPU pool taints %v labels %v", get(ap, "nodeTaints"), get(ap, "nodeLabels"))
	}
	if get(ap, "scaleSetPriority") != nil {
		t.Errorf("GPU pool priority %v, want the default (Regular)", get(ap, "scaleSetPriority"))
	}
	checkLongTimeout(t, gpu)
	spot := inputs(rec.one(t, tAgentPool, "cluster-spot"))
	if get(spot, "scaleSetPriority") != "Spot" || get(spot, "scaleSetEvictionPolicy") != "Delete" ||
		!containsString(get(spot, "nodeTaints"), "kubernetes.azure.com/scalesetpriority=spot:NoSchedule") ||
		fmt.Sprint(get(spot, "availabilityZones")) != "[1 2]" {
		t.Errorf("Spot pool: %v", spot)
	}

	acct, share := rec.one(t, tStorageAcct, "shared-store"), rec.one(t, tFileShare, "shared-store")
	if !acct.Protect || !share.Protect {
		t.Errorf("protected storage: account %v share %v", acct.Protect, share.Protect)
	}
	if get(inputs(acct), "kind") != "FileStorage" || get(inputs(share), "shareQuota") != 1024.0 {
		t.Errorf("Premium share of 1Ti: %v %v", inputs(acct), inputs(share))
	}
	// The example's share is NFS on the example's subnet (TestAKSFilesNFS); SMB in TestAKSFilesSMB.
	pv := inputs(rec.one(t, tPV, "storage"))
	if get(pv, "spec", "csi", "driver") != "file.csi.azure.com" ||
		get(pv, "spec", "csi", "volumeHandle") != fmt.Sprintf("%s_shared", get(inputs(acct), "accountName")) {
		t.Errorf("the shared volume is not the Azure Files share: %v", get(pv, "spec", "csi"))
	}
}

// exampleSubnet is the subnet the azure example brings (a placeholder to replace).
const exampleSubnet = "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/network/providers/" +
	"Microsoft.Network/virtualNetworks/training/subnets/aks"

// TestAKSSubnet: with cluster.subnetId every pool, the system pool included, joins that subnet,
// and the cluster's identity may join its scale sets to it (Network Contributor on that subnet
// alone) before any user pool is created; without it AKS makes its own network and nothing is
// granted.
func TestAKSSubnet(t *testing.T) {
	rec := cloudRec(t, "azure", nil)
	mc := inputs(rec.one(t, tAKSCluster, "cluster"))
	if got := get(mc, "agentPoolProfiles", "[0]", "vnetSubnetID"); got != exampleSubnet {
		t.Errorf("system pool vnetSubnetID %v, want %s", got, exampleSubnet)
	}
	pools := rec.ofType(tAgentPool)
	if len(pools) != 2 {
		t.Fatalf("%d agent pools, want 2", len(pools))
	}
	for _, p := range pools {
		if got := get(inputs(p), "vnetSubnetID"); got != exampleSubnet {
			t.Errorf("pool %s vnetSubnetID %v, want %s", p.Name, got, exampleSubnet)
		}
		if !slices.Contains(p.DependsOn, "cluster-subnet") {
			t.Errorf("pool %s does not wait for the subnet grant: depends on %v", p.Name, p.DependsOn)
		}
	}
	grant := inputs(rec.one(t, tRoleAssign, "cluster-subnet"))
	want := map[string]any{
		"scope": exampleSubnet, "principalId": fakeAKSPrincipal, "principalType": "ServicePrincipal",
		"roleDefinitionId": "/subscriptions/00000000-0000-0000-0000-000000000000/providers/Microsoft.Authorization/roleDefinitions/4d97b98b-1d4f-4787-a291-c67834d212e7",
	}
	for k, v := range want {
		if get(grant, k) != v {
			t.Errorf("subnet grant %s = %v, want %v", k, get(grant, k), v)
		}
	}
	if np := get(mc, "networkProfile"); get(np, "serviceCidr") != "10.0.0.0/16" || get(np, "dnsServiceIP") != "10.0.0.10" || get(np, "podCidr") != "10.244.0.0/16" {
		t.Errorf("without serviceCidr and podCidr the ranges are AKS's defaults: %v", np)
	}

	ranges := cloudRec(t, "azure", withCluster(t, "azure", map[string]any{"serviceCidr": "10.200.0.0/16", "podCidr": "10.201.0.0/16"}))
	np := get(inputs(ranges.one(t, tAKSCluster, "cluster")), "networkProfile")
	if get(np, "serviceCidr") != "10.200.0.0/16" || get(np, "dnsServiceIP") != "10.200.0.10" || get(np, "podCidr") != "10.201.0.0/16" {
		t.Errorf("network profile %v, want services 10.200.0.0/16 (DNS 10.200.0.10), pods 10.201.0.0/16", np)
	}

	noSubnet := withCluster(t, "azure", map[string]any{"subnetId": nil})
	noSubnet["storage"] = `{"type":"azurefiles","size":"1Ti"}`
	own := cloudRec(t, "azure", noSubnet)
	if got := get(inputs(own.one(t, tAKSCluster, "cluster")), "agentPoolProfiles", "[0]", "vnetSubnetID"); got != nil {
		t.Errorf("system pool in subnet %v without cluster.subnetId", got)
	}
	for _, p := range own.ofType(tAgentPool) {
		if got := get(inputs(p), "vnetSubnetID"); got != nil {
			t.Errorf("pool %s in subnet %v without cluster.subnetId", p.Name, got)
		}
	}
	for _, g := range own.ofType(tRoleAssign) {
		if g.Name != "cluster-admin" { // the runner's, on the cluster (TestAKSRunnerIsClusterAdmin)
			t.Errorf("role assignment %s without a subnet: %v", g.Name, inputs(g))
		}
	}
}

// TestCloudProtect: without storage.protect no file store carries protect; with it every one does.
func TestCloudProtect(t *testing.T) {
	stores := map[string][]string{"prod": {tFilestore}, "aws": {tEFS}, "azure": {tStorageAcct, tFileShare}}
	storage := map[string]string{
		"prod": `{"type":"filestore","protect":%v}`, "aws": `{"type":"efs","protect":%v}`, "azure": `{"type":"azurefiles","protect":%v}`,
	}
	for _, s := range cloudStacks {
		for _, protect := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/%v", s.name, protect), func(t *testing.T) {
				rec := deploy(t, cloudRaw(t, s.name, map[string]string{"storage": fmt.Sprintf(storage[s.name], protect)}))
				for _, token := range append(stores[s.name], tPV, tPVC) {
					for _, r := range rec.ofType(token) {
						if r.Protect != protect {
							t.Errorf("%s %s: protect %v, want %v", token, r.Name, r.Protect, protect)
						}
					}
				}
			})
		}
	}
}

// TestCloudNames: every name a cloud sees derives from the stack (through cluster.name) and fits
// that cloud's limits, for the committed stacks and for the longest stack names allowed.
func TestCloudNames(t *testing.T) {
	type field struct {
		token, input string
		max          int
		pool         bool // a pool's own name rather than one derived from the cluster
	}
	fields := map[string][]field{
		stacks.CloudGCP: {
			// A pool's name is its prefix and the provider's 26-character unique suffix.
			{tGKECluster, "name", 40, false}, {tGKENodePool, "namePrefix", 40 - 26, true}, {tGCPAccount, "accountId", 30, false},
			{tFilestore, "name", 63, false},
		},
		stacks.CloudAWS: {
			{tEKSCluster, "name", 100, false}, {tEKSNodeGroup, "nodeGroupNamePrefix", 63 - 26, true}, {tIAMRole, "name", 64, false},
			{tSecurityGroup, "name", 255, false}, {tEFS, "creationToken", 64, false},
		},
		stacks.CloudAzure: {
			{tResourceGroup, "resourceGroupName", 90, false}, {tAKSCluster, "resourceName", 63, false}, {tAKSCluster, "dnsPrefix", 54, false},
			{tAKSCluster, "nodeResourceGroup", 80, false}, {tAgentPool, "agentPoolName", 12, true}, {tStorageAcct, "accountName", 24, false},
		},
	}
	for _, s := range cloudStacks {
		for _, clusterName := range []string{"", "long"} {
			t.Run(s.name+"/"+clusterName, func(t *testing.T) {
				ov := map[string]string{}
				cluster := "kolotoc-" + s.name
				if clusterName == "long" {
					// The longest cluster.name each cloud accepts.
					cluster = "kolotoc-" + strings.Repeat("x", map[string]int{stacks.CloudGCP: 32, stacks.CloudAWS: 48, stacks.CloudAzure: 46}[s.cloud])
					raw := cloudRaw(t, s.name, nil)
					var c map[string]any
					if err := json.Unmarshal([]byte(raw.Values["kolotoc:cluster"]), &c); err != nil {
						t.Fatal(err)
					}
					c["name"] = cluster
					b, _ := json.Marshal(c)
					ov["cluster"] = string(b)
				}
				rec := deploy(t, cloudRaw(t, s.name, ov))
				n := 0
				for _, f := range fields[s.cloud] {
					for _, r := range rec.ofType(f.token) {
						name, _ := get(inputs(r), f.input).(string)
						n++
						if name == "" || len(name) > f.max {
							t.Errorf("%s %s: %s %q is %d characters; at most %d", f.token, r.Name, f.input, name, len(name), f.max)
						}
						if f.pool {
							continue
						}
						stem := cluster
						if f.input == "accountId" || f.input == "accountName" {
							stem = strings.ReplaceAll(cluster, "-", "")[:8] // shortened, but still the stack's
							name = strings.ReplaceAll(name, "-", "")
						}
						if !strings.HasPrefix(name, stem) {
							t.Errorf("%s %s: %s %q does not derive from cluster.name %q", f.token, r.Name, f.input, name, cluster)
						}
					}
				}
				if n < len(fields[s.cloud]) {
					t.Errorf("only %d names checked", n)
				}
			})
		}
	}
}

// mirroredRaw is a cloud stack with `cloud: simulated` (its pools mirrored node for node), its
// cluster's kubeconfig a throwaway file, and the overrides applied.
func mirroredRaw(t *testing.T, name string, overrides map[string]string) stacks.Raw {
	t.Helper()
	ov := map[string]string{"cloud": "simulated"}
	for k, v := range overrides {
		ov[k] = v
	}
	raw := cloudRaw(t, name, ov)
	var c map[string]any
	if err := json.Unmarshal([]byte(raw.Values["kolotoc:cluster"]), &c); err != nil {
		t.Fatal(err)
	}
	c["kubeconfig"] = fakeKubeconfig(t)
	b, _ := json.Marshal(c)
	raw.Values["kolotoc:cluster"] = string(b)
	return raw
}

// TestExamplesMirrored: each cloud stack runs on the simulated cloud with `cloud: simulated` and
// nothing else changed; its pools become Nodes node for node, sized from the catalogue.
func TestExamplesMirrored(t *testing.T) {
	for _, s := range cloudStacks {
		t.Run(s.name, func(t *testing.T) {
			raw := mirroredRaw(t, s.name, nil)
			cfg, err := stacks.Load(raw)
			if err != nil {
				t.Fatal(err)
			}
			rec := deploy(t, raw)
			nodes := rec.simulatedNodes()
			want := 0
			for _, p := range cfg.NodePools {
				want += p.Nodes
				m, ok := stacks.LookupMachineType(s.cloud, p.MachineType)
				if !ok {
					t.Fatalf("pool %s: %s not in the catalogue", p.Name, p.MachineType)
				}
				for _, n := range nodes {
					md := get(inputs(n), "metadata")
					if get(md, "labels", "kolotoc.dev/pool") != p.Name {
						continue
					}
					var capacity map[string]string
					_ = json.Unmarshal([]byte(get(md, "annotations", "kolotoc.dev/simulated-capacity").(string)), &capacity)
					gpus := ""
					if m.GPUs > 0 {
						gpus = fmt.Sprint(m.GPUs)
					}
					if capacity["cpu"] != fmt.Sprint(m.VCPUs) || capacity["memory"] != m.Memory() || capacity["nvidia.com/gpu"] != gpus {
						t.Errorf("node %s capacity %v, want %s's %d vCPUs, %s, %d GPUs", n.Name, capacity, m.Name, m.VCPUs, m.Memory(), m.GPUs)
					}
				}
			}
			if len(nodes) != want {
				t.Errorf("%d simulated nodes, want %d (node for node)", len(nodes), want)
			}
			if n := len(rec.ofType(tDeployment)); n < 2 {
				t.Errorf("the cloud file store is not stood in by the in-cluster NFS server (%d Deployments)", n)
			}
		})
	}
}

// checkLongTimeout: GPU pools have taken over 30 minutes to create; the providers' defaults
// would fail a healthy `pulumi up`.
func checkLongTimeout(t *testing.T, r registered) {
	t.Helper()
	d, err := time.ParseDuration(r.CreateTimeout)
	if err != nil || d <= 30*time.Minute {
		t.Errorf("%s %s: create timeout %q, want more than 30m", r.Type, r.Name, r.CreateTimeout)
	}
}

func hasTaint(taints any, key, value, effect string) bool {
	list, _ := taints.([]any)
	for _, t := range list {
		if get(t, "key") == key && get(t, "value") == value && get(t, "effect") == effect {
			return true
		}
	}
	return false
}

func containsString(list any, s string) bool {
	l, _ := list.([]any)
	for _, e := range l {
		if e == s {
			return true
		}
	}
	return false
}

// TestEKSBlockStorage: etcd's members claim block volumes of the cluster's default class. EKS
// installs no EBS CSI driver and, since Kubernetes 1.30, marks no class default, so on a cluster
// Kolotoc made the claims stayed Pending for good. With etcd on, the cluster gets the EBS CSI
// add-on (its controller holding the driver's role through Pod Identity) with the add-on's default
// StorageClass on; without anything that claims a block volume, no add-on and no role.
func TestEKSBlockStorage(t *testing.T) {
	ebs := func(rec *recorder) (addon registered, policies []string) {
		for _, a := range rec.ofType(tEKSAddon) {
			if get(inputs(a), "addonName") == "aws-ebs-csi-driver" {
				addon = a
			}
		}
		for _, a := range rec.ofType(tIAMAttachment) {
			if strings.HasPrefix(a.Name, "cluster-ebs-csi") {
				policies = append(policies, get(inputs(a), "policyArn").(string))
			}
		}
		return addon, policies
	}
	if a, p := ebs(deploy(t, cloudRaw(t, "aws", nil))); a.Name != "" || len(p) != 0 {
		t.Errorf("without etcd: EBS CSI add-on %q, role policies %v; want none", a.Name, p)
	}

	rec := deploy(t, cloudRaw(t, "aws", map[string]string{"etcd": `{"enabled":true}`}))
	addon, policies := ebs(rec)
	if addon.Name == "" {
		t.Fatal("etcd on EKS: the EBS CSI driver add-on is not installed; etcd's claims would stay Pending")
	}
	in := inputs(addon)
	var config map[string]any
	if s, _ := get(in, "configurationValues").(string); json.Unmarshal([]byte(s), &config) != nil || get(config, "defaultStorageClass", "enabled") != true {
		t.Errorf("EBS CSI add-on configuration %v: want the add-on's default StorageClass on", get(in, "configurationValues"))
	}
	assoc := get(in, "podIdentityAssociations", "[0]")
	if get(assoc, "serviceAccount") != "ebs-csi-controller-sa" || get(assoc, "roleArn") != "arn:aws:iam::123456789012:role/kolotoc-aws-ebs-csi" {
		t.Errorf("EBS CSI driver identity: %v", assoc)
	}
	if fmt.Sprint(policies) != "[arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy]" {
		t.Errorf("the EBS CSI role's policies: %v", policies)
	}
	// etcd's claims name no class: they take the default the add-on makes.
	members := 0
	for _, r := range rec.ofType(tStatefulSet) {
		if get(inputs(r), "metadata", "name") != "etcd" {
			continue
		}
		members++
		if c := get(inputs(r), "spec", "volumeClaimTemplates", "[0]", "spec", "storageClassName"); c != nil {
			t.Errorf("etcd's claims name class %v, want the cluster's default", c)
		}
	}
	if members != 1 {
		t.Errorf("%d etcd StatefulSets, want 1", members)
	}
}
