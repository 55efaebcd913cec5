package storage

import (
	corev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1"
	metav1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/meta/v1"
	storagev1 "github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/storage/v1"
	"github.com/pulumi/pulumi/sdk/v3/go/pulumi"
)

// CSI drivers of the cloud file stores.
const (
	EFSDriver        = "efs.csi.aws.com"
	AzureFilesDriver = "file.csi.azure.com"
)

// CSI is a shared volume served through a CSI driver rather than plain NFS: an EFS file system or
// an Azure Files share. The volume is still pre-bound to the claim, so no provisioner is needed
// for the shared claim itself.
type CSI struct {
	Driver       string                // EFSDriver | AzureFilesDriver
	VolumeHandle pulumi.StringInput    // the driver's id of the volume: fs-… for EFS, <rg>#<account>#<share> for Azure Files
	Attributes   pulumi.StringMapInput // volumeAttributes (Azure Files: shareName)
	// SecretData, when set, goes into the Secret CredentialsName(claim) in the namespace, which
	// the driver uses to mount (Azure Files: account name and key). It must be a secret output.
	SecretData pulumi.StringMapInput
	// ClassParameters, when set, make a StorageClass named like the volume, so that further
	// claims can be provisioned dynamically from the same file store (EFS access points); the
	// shared volume and claim belong to that class.
	ClassParameters pulumi.StringMapInput
}

// CredentialsName is the Secret holding a CSI volume's mount credentials.
func CredentialsName(claim string) string { return claim + "-credentials" }

// storageClassName is the class of the volume and claim: the CSI class when there is one, else
// none (a pre-bound volume needs no class).
func storageClassName(a *Args) string {
	if a.CSI != nil && a.CSI.ClassParameters != nil {
		return a.VolumeName
	}
	return ""
}

// RenderCSIVolumeSource builds the volume's CSI source.
func RenderCSIVolumeSource(a *Args) *corev1.CSIPersistentVolumeSourceArgs {
	src := &corev1.CSIPersistentVolumeSourceArgs{
		Driver:           pulumi.String(a.CSI.Driver),
		VolumeHandle:     a.CSI.VolumeHandle,
		VolumeAttributes: a.CSI.Attributes,
	}
	if a.CSI.SecretData != nil {
		src.NodeStageSecretRef = &corev1.SecretReferenceArgs{Name: pulumi.String(CredentialsName(a.ClaimName)), Namespace: a.Namespace}
	}
	return src
}

// RenderCredentials builds the Secret holding a CSI volume's mount credentials.
func RenderCredentials(a *Args) *corev1.SecretArgs {
	return &corev1.SecretArgs{
		Metadata:   a.Labels.ObjectMeta(CredentialsName(a.ClaimName), a.Namespace, "storage"),
		Type:       pulumi.String("Opaque"),
		StringData: a.CSI.SecretData,
	}
}

// RenderStorageClass builds the CSI StorageClass. Reclaim follows Protect, as the volume's does.
func RenderStorageClass(a *Args) *storagev1.StorageClassArgs {
	reclaim := "Delete"
	if a.Protect {
		reclaim = "Retain"
	}
	return &storagev1.StorageClassArgs{
		Metadata:          &metav1.ObjectMetaArgs{Name: pulumi.String(a.VolumeName), Labels: pulumi.ToStringMap(a.Labels.For("storage"))},
		Provisioner:       pulumi.String(a.CSI.Driver),
		Parameters:        a.CSI.ClassParameters,
		ReclaimPolicy:     pulumi.String(reclaim),
		VolumeBindingMode: pulumi.String("Immediate"),
	}
}
