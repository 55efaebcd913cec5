package tests

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	corev1 "k8s.io/api/core/v1"
)

// Existing stores (issue 11): an EFS file system, an Azure Files share or an NFS export that the
// stack mounts and never creates or deletes, on its cloud and on an existing cluster.

const (
	existingFS         = "fs-0123456789abcdef0"
	existingAP         = "fsap-0fedcba9876543210"
	existingAccountKey = "existing-account-key-that-must-stay-secret"
	tEKSAddonName      = "aws-efs-csi-driver"
)

// onExistingCluster turns a cloud stack into one on an existing cluster.
func onExistingCluster(t *testing.T, ov map[string]string) map[string]string {
	ov["cloud"] = "existing"
	ov["cluster"] = fmt.Sprintf(`{"kubeconfig":%q}`, fakeKubeconfig(t))
	return ov
}

// checkKeptVolume: the shared volume keeps the store when released (Retain), whatever protect says,
// and belongs to no StorageClass (nothing provisions on a store the stack does not own).
func checkKeptVolume(t *testing.T, r *recorder) corev1.PersistentVolumeSpec {
	t.Helper()
	pv := decode[corev1.PersistentVolume](t, r.one(t, tPV, "storage")).Spec
	if pv.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
		t.Errorf("reclaim policy %v: releasing the claim could delete a store the stack does not own", pv.PersistentVolumeReclaimPolicy)
	}
	if sc := pv.StorageClassName; sc != "" {
		t.Errorf("volume of class %v, want none", sc)
	}
	if n := len(r.ofType(tStorageClass)); n != 0 {
		t.Errorf("%d StorageClasses on a store the stack does not own", n)
	}
	return pv
}

// TestExistingEFS: with storage.fileSystemId no file system, mount target or security group is
// created; on aws the EFS CSI driver still is. The volume's handle is the file system (with its
// subdirectory and access point), mounted with TLS.
func TestExistingEFS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		ov      map[string]string
		handle  string
		addonOn bool
	}{
		{"aws", map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `","protect":true}`}, existingFS, true},
		{"aws, access point", map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `","accessPointId":"` + existingAP + `"}`},
			existingFS + "::" + existingAP, true},
		{"existing cluster, subdirectory", onExistingCluster(t, map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `","path":"/team-a"}`}),
			existingFS + ":/team-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cloudRec(t, "aws", tc.ov)
			for _, token := range []string{tEFS, tMountTarget, tSecurityGroup} {
				for _, res := range r.ofType(token) {
					if strings.HasPrefix(res.Name, "shared-store") {
						t.Errorf("%s %s created for an existing file system", token, res.Name)
					}
				}
			}
			addon := false
			for _, a := range r.ofType(tEKSAddon) {
				addon = addon || get(inputs(a), "addonName") == tEKSAddonName
			}
			if addon != tc.addonOn {
				t.Errorf("EFS CSI add-on installed: %v, want %v", addon, tc.addonOn)
			}
			pv := checkKeptVolume(t, r)
			if csi := pv.CSI; csi == nil || csi.Driver != "efs.csi.aws.com" || csi.VolumeHandle != tc.handle || pv.NFS != nil {
				t.Errorf("volume %+v, want the EFS CSI driver with handle %s", pv.PersistentVolumeSource, tc.handle)
			}
			if got := fmt.Sprint(pv.MountOptions); got != "[tls]" {
				t.Errorf("mount options %s, want [tls]", got)
			}
		})
	}
}

// TestExistingAzureShare: with storage.share no storage account, share, lock or key invoke; the
// volume names the share. SMB is mounted with kolotoc:storageAccountKey, which exists only as a
// secret; NFS needs no key and gets no Secret.
func TestExistingAzureShare(t *testing.T) {
	const smb = `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data","protocol":"smb"}`
	const nfs = `{"type":"azurefiles","share":"checkpoints","account":"mldata","resourceGroup":"ml-data","protocol":"nfs"}`
	withKey := func(ov map[string]string) map[string]string {
		ov["storageAccountKey"] = existingAccountKey
		return ov
	}
	for _, tc := range []struct {
		name string
		ov   map[string]string
		nfs  bool
	}{
		{"azure, smb", withKey(map[string]string{"storage": smb}), false},
		{"azure, nfs", map[string]string{"storage": nfs}, true},
		{"existing cluster, smb", withKey(onExistingCluster(t, map[string]string{"storage": smb})), false},
		{"existing cluster, nfs", onExistingCluster(t, map[string]string{"storage": nfs}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := cloudRaw(t, "azure", tc.ov)
			raw.Secrets["kolotoc:storageAccountKey"] = true
			r := deploy(t, raw)
			for _, token := range []string{tStorageAcct, tFileShare, tLock} {
				if n := len(r.ofType(token)); n != 0 {
					t.Errorf("%d %s created for an existing share", n, token)
				}
			}
			if r.called(listKeys) {
				t.Errorf("%s invoked: the key of an existing share is the config's", listKeys)
			}
			csi := checkKeptVolume(t, r).CSI
			if csi == nil || csi.Driver != "file.csi.azure.com" {
				t.Fatalf("volume %+v, want the Azure Files CSI driver", csi)
			}
			if tc.nfs {
				want := map[string]string{"resourceGroup": "ml-data", "storageAccount": "mldata", "shareName": "checkpoints", "protocol": "nfs"}
				if d := cmp.Diff(want, csi.VolumeAttributes); d != "" {
					t.Errorf("volume attributes (-want +got):\n%s", d)
				}
				if csi.VolumeHandle != "mldata_checkpoints" || csi.NodeStageSecretRef != nil {
					t.Errorf("NFS volume %+v, want handle mldata_checkpoints and no secret", csi)
				}
				for _, s := range r.ofType(tSecret) {
					if s.Name == "storage-credentials" {
						t.Error("a credentials Secret for an NFS share")
					}
				}
				return
			}
			if csi.VolumeHandle != "ml-data#mldata#checkpoints" || csi.VolumeAttributes["shareName"] != "checkpoints" ||
				csi.NodeStageSecretRef == nil || csi.NodeStageSecretRef.Name != "shared-credentials" {
				t.Errorf("SMB volume %+v, want handle ml-data#mldata#checkpoints and the key Secret", csi)
			}
			creds := r.one(t, tSecret, "storage-credentials")
			if v := creds.Inputs["stringData"]; !isSecret(v) || !strings.Contains(secretText(v), existingAccountKey) ||
				!strings.Contains(secretText(v), `"azurestorageaccountname":"mldata"`) {
				t.Errorf("the key Secret: secret=%v", isSecret(v))
			}
			for _, res := range r.sorted() {
				if leak := findPlain(resource.NewProperty(res.Inputs), []string{existingAccountKey}); leak != "" {
					t.Errorf("%s %s: the account key in plain text", res.Type, res.Name)
				}
			}
		})
	}
}

// TestExternalNFSOnExistingCluster: an existing cluster mounts an NFS export with the configured
// server, path and mount options, and keeps it when released.
func TestExternalNFSOnExistingCluster(t *testing.T) {
	r := cloudRec(t, "aws", onExistingCluster(t, map[string]string{
		"storage": `{"type":"nfs","server":"10.20.0.2","path":"/vol1","mountOptions":["nfsvers=3","hard"]}`,
	}))
	pv := checkKeptVolume(t, r)
	if pv.NFS == nil || pv.NFS.Server != "10.20.0.2" || pv.NFS.Path != "/vol1" {
		t.Errorf("NFS source %+v, want 10.20.0.2:/vol1", pv.NFS)
	}
	if got := fmt.Sprint(pv.MountOptions); got != "[nfsvers=3 hard]" {
		t.Errorf("mount options %s, want [nfsvers=3 hard]", got)
	}
	for _, res := range r.sorted() {
		if strings.HasPrefix(res.Type, "aws:") {
			t.Errorf("%s %s created on an existing cluster", res.Type, res.Name)
		}
	}
}

// TestExistingStoreSimulated: a simulated copy of a stack on an existing store stands the store
// in with the in-cluster NFS server, as for a created one.
func TestExistingStoreSimulated(t *testing.T) {
	r := cloudRec(t, "aws", map[string]string{"cloud": "simulated", "cluster": fmt.Sprintf(`{"kubeconfig":%q}`, fakeKubeconfig(t)),
		"storage": `{"type":"efs","fileSystemId":"` + existingFS + `"}`})
	pv := decode[corev1.PersistentVolume](t, r.one(t, tPV, "storage")).Spec
	if pv.NFS == nil || pv.NFS.Server != fakeClusterIP || pv.CSI != nil {
		t.Errorf("simulated volume %+v, want the in-cluster NFS server", pv.PersistentVolumeSource)
	}
}

// TestOwnerJobSkipsAccessPoints: with kolotoc:runAsUser the shared-owner Job gives the store's
// root to the user, except through an EFS access point, which runs every file operation as its own
// POSIX user (root's chown through it is refused, and the pods' user does not matter to it).
func TestOwnerJobSkipsAccessPoints(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ov    map[string]string
		owner bool
	}{
		{"efs", map[string]string{"runAsUser": "1000", "storage": `{"type":"efs","fileSystemId":"` + existingFS + `"}`}, true},
		{"efs, access point", map[string]string{"runAsUser": "1000", "storage": `{"type":"efs","fileSystemId":"` + existingFS + `","accessPointId":"` + existingAP + `"}`}, false},
		{"efs, images' users", map[string]string{"storage": `{"type":"efs","fileSystemId":"` + existingFS + `"}`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cloudRec(t, "aws", tc.ov)
			var jobs []string
			for _, j := range r.ofType(tJob) {
				if nameOf(t, j) == "shared-owner" {
					jobs = append(jobs, j.Name)
				}
			}
			if (len(jobs) == 1) != tc.owner || len(jobs) > 1 {
				t.Errorf("shared-owner Jobs %v, want one: %v", jobs, tc.owner)
			}
		})
	}
}
