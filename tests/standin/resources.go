package standin

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"google.golang.org/protobuf/types/known/emptypb"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/yaml"
)

// Create retries: the API server may not yet know a namespace or CRD created just before.
const (
	applyRetries      = 5
	applyRetryBackoff = time.Second // doubled after each try
)

func tokenOf(urn resource.URN) string { return string(urn.Type()) }

// Check validates and normalises inputs: apiVersion/kind from the token when absent,
// normalisation through the scheme, autonaming, the default namespace for namespaced
// kinds, and secretness carried over from the program's values.
func (p *Provider) Check(ctx context.Context, req *pulumirpc.CheckRequest) (*pulumirpc.CheckResponse, error) {
	urn := resource.URN(req.GetUrn())
	_, unreachable, _ := p.state()
	if _, skip := p.unreachableOptions(); unreachable && skip {
		p.log(ctx, diag.Warning, urn, "Cluster is unreachable but skipUpdateUnreachable flag is set to true, skipping...")
		return &pulumirpc.CheckResponse{Inputs: req.GetOlds()}, nil
	}
	gvk, err := GVKFromToken(tokenOf(urn))
	if err != nil {
		return nil, err
	}
	if isListKind(gvk.Kind) {
		return nil, errors.New("list resources exist for compatibility with YAML manifests and Helm charts, " +
			"and cannot be created directly. Use the underlying resource type instead")
	}
	if isPatchKind(gvk.Kind) {
		return nil, fmt.Errorf("%s: Patch resources are not implemented by the test bed's stand-in Kubernetes provider", tokenOf(urn))
	}
	olds, err := unmarshal(req.GetOlds(), "Check.olds", true)
	if err != nil {
		return nil, err
	}
	news, err := unmarshal(req.GetNews(), "Check.news", true)
	if err != nil {
		return nil, fmt.Errorf("check failed because malformed resource inputs: %w", err)
	}
	checked, err := p.checkInputs(ctx, urn, gvk, olds, news, req.GetRandomSeed(), req.GetAutonaming())
	if err != nil {
		return nil, err
	}
	inputs, err := p.marshal(checked, "Check.inputs")
	if err != nil {
		return nil, err
	}
	return &pulumirpc.CheckResponse{Inputs: inputs}, nil
}

func (p *Provider) checkInputs(ctx context.Context, urn resource.URN, gvk schema.GroupVersionKind,
	olds, news resource.PropertyMap, seed []byte, autonaming *pulumirpc.CheckRequest_AutonamingOptions,
) (resource.PropertyMap, error) {
	newInputs := propMapToUnstructured(news)
	oldInputs := propMapToUnstructured(olds)
	if _, ok := newInputs.Object["apiVersion"]; !ok {
		newInputs.Object["apiVersion"] = APIVersion(gvk)
	}
	if _, ok := newInputs.Object["kind"]; !ok {
		newInputs.Object["kind"] = gvk.Kind
	}
	newInputs = normalizeInputs(newInputs)
	if _, ok := newInputs.GetAnnotations()[annotationAutonamed]; ok && len(oldInputs.Object) == 0 {
		p.log(ctx, diag.Warning, urn, fmt.Sprintf("ignoring user-specified value for internal annotation %q", annotationAutonamed))
	}
	if len(oldInputs.Object) > 0 {
		adoptOldAutoname(newInputs, oldInputs, news)
	} else if err := assignAutoname(seed, autonaming, newInputs, news, urn); err != nil {
		return nil, err
	}
	if isGenerateName(newInputs, news) {
		return nil, errors.New("the `.metadata.generateName` field is not supported in Server-Side Apply mode")
	}
	p.mu.RLock()
	defaultNamespace := p.defaultNamespace
	p.mu.RUnlock()
	if defaultNamespace != "" && newInputs.GetNamespace() == "" && !namespaceComputed(newInputs) {
		namespaced, err := p.isNamespaced(gvkFromObject(newInputs))
		if err != nil {
			return nil, err
		}
		if namespaced {
			newInputs.SetNamespace(defaultNamespace)
		}
	}
	checked := resource.NewPropertyMapFromMap(newInputs.Object)
	annotateSecrets(checked, news)
	return checked, nil
}

func namespaceComputed(obj *unstructured.Unstructured) bool {
	md, ok := obj.Object["metadata"].(map[string]any)
	if !ok {
		return obj.Object["metadata"] != nil
	}
	_, computed := md["namespace"].(resource.Computed)
	return computed
}

// Diff compares the new inputs with the last live state pruned to the old inputs' shape.
func (p *Provider) Diff(_ context.Context, req *pulumirpc.DiffRequest) (*pulumirpc.DiffResponse, error) {
	oldState, err := unmarshal(req.GetOlds(), "Diff.olds", true)
	if err != nil {
		return nil, err
	}
	news, err := unmarshal(req.GetNews(), "Diff.news", true)
	if err != nil {
		return nil, fmt.Errorf("diff failed because malformed resource inputs: %w", err)
	}
	p.mu.RLock()
	cmMutable, secretMutable := p.configMapMutable, p.secretMutable
	p.mu.RUnlock()
	res, err := ComputeDiff(oldState, news, req.GetIgnoreChanges(), p.isNamespaced, cmMutable, secretMutable)
	if err != nil {
		return nil, fmt.Errorf("failed to check for changes in resource %q: %w", req.GetUrn(), err)
	}
	return &pulumirpc.DiffResponse{
		Changes:             res.Changes,
		Replaces:            res.Replaces,
		Stables:             []string{},
		DeleteBeforeReplace: res.DeleteBeforeReplace,
		DetailedDiff:        res.DetailedDiff,
		HasDetailedDiff:     true,
	}, nil
}

// ComputeDiff is the real v4 provider's Diff on already-unmarshalled properties: oldState
// is the checkpoint (live object plus __inputs), news the checked new inputs.
func ComputeDiff(oldState, news resource.PropertyMap, ignoreChanges []string,
	namespaced func(schema.GroupVersionKind) (bool, error), configMapMutable, secretMutable bool,
) (DiffResult, error) {
	newInputs := normalizeInputs(propMapToUnstructured(news))
	oldInputs, oldLive := parseCheckpointObject(oldState)
	if oldLive.GetName() == "" {
		return DiffResult{}, errors.New("the old state has no live object name")
	}
	oldInputs = normalizeInputs(oldInputs)
	oldLivePruned := pruneLive(oldLive, oldInputs)

	gvk := gvkFromObject(newInputs)
	isNamespaced, err := namespaced(gvk)
	if err != nil {
		return DiffResult{}, err
	}
	if isNamespaced {
		oldLivePruned.SetNamespace(canonicalNamespace(oldLivePruned.GetNamespace()))
		if !namespaceComputed(newInputs) {
			newInputs.SetNamespace(canonicalNamespace(newInputs.GetNamespace()))
		}
	} else {
		oldLivePruned.SetNamespace("")
		newInputs.SetNamespace("")
	}
	if _, ok := oldLivePruned.Object["apiVersion"]; !ok {
		oldLivePruned.Object["apiVersion"] = APIVersion(gvk)
	}
	if _, ok := oldLivePruned.Object["kind"]; !ok {
		oldLivePruned.Object["kind"] = gvk.Kind
	}
	oldLivePruned.SetResourceVersion("")
	if newInputs.GetName() != "" {
		oldLivePruned.SetName(oldLive.GetName())
	}

	immutable, _, _ := unstructured.NestedBool(newInputs.Object, "immutable")
	forceNew := forceNewFields(gvk, immutable, configMapMutable, secretMutable)
	res, err := classify(detailedDiff(oldLivePruned.Object, newInputs.Object, forceNew), ignoreChanges)
	if err != nil {
		return DiffResult{}, err
	}
	// Delete first when the replacement must reuse the same name in the same namespace.
	res.DeleteBeforeReplace = len(res.Replaces) > 0 &&
		isNamed(newInputs, news) &&
		!annotationTrue(newInputs, annotationAutonamed) &&
		newInputs.GetName() == oldLive.GetName() &&
		newInputs.GetNamespace() == canonicalIfNamespaced(oldLive.GetNamespace(), isNamespaced)
	return res, nil
}

func canonicalIfNamespaced(ns string, namespaced bool) string {
	if namespaced {
		return canonicalNamespace(ns)
	}
	return ns
}

// fieldManagerName is the server-side-apply field manager for a resource: the
// pulumi.com/patchFieldManager annotation, else the one in state, else a new
// pulumi-kubernetes-<8 hex>.
func fieldManagerName(state resource.PropertyMap, inputs *unstructured.Unstructured) string {
	if v := annotationValue(inputs, annotationPatchFieldManager); v != "" {
		return v
	}
	if v, ok := state[fieldManagerKey]; ok && v.IsString() {
		return v.StringValue()
	}
	name, err := resource.NewUniqueName(nil, fieldManagerPrefix, 0, 0, nil)
	if err != nil {
		return fieldManagerPrefix + "standin"
	}
	return name
}

// apply sends obj as a server-side apply patch with strict field validation.
func apply(ctx context.Context, rc dynamic.ResourceInterface, obj *unstructured.Unstructured,
	fieldManager string, force, dryRun bool,
) (*unstructured.Unstructured, error) {
	body, err := yaml.Marshal(obj.Object)
	if err != nil {
		return nil, err
	}
	opts := metav1.PatchOptions{
		FieldManager:    fieldManager,
		Force:           &force,
		FieldValidation: metav1.FieldValidationStrict,
	}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	return rc.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts)
}

// ssaErr adds the real provider's troubleshooting note to apply conflicts.
func ssaErr(err error, manager string) error {
	if !apierrors.IsConflict(err) {
		return err
	}
	return errors.Join(
		errors.New("Server-Side Apply field conflict detected. See https://www.pulumi.com/registry/packages/kubernetes/"+
			"how-to-guides/managing-resources-with-server-side-apply/#handle-field-conflicts-on-existing-resources "+
			"for troubleshooting help."),
		fmt.Errorf("The resource managed by field manager %q had an apply conflict: %w", manager, err))
}

func isImmutableFieldErr(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "field is immutable")
}

func isNamespaceNotFound(err error) bool {
	var se *apierrors.StatusError
	if !errors.As(err, &se) || !apierrors.IsNotFound(err) {
		return false
	}
	d := se.Status().Details
	return d != nil && d.Kind == "namespaces"
}

func randomSuffix(n int) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	b := make([]byte, n)
	for i := range b {
		v, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
		if err != nil {
			b[i] = alphabet[0]
			continue
		}
		b[i] = alphabet[v.Int64()]
	}
	return string(b)
}

// Create applies the object (a server-side dry run during preview) and waits for it to
// become ready.
func (p *Provider) Create(ctx context.Context, req *pulumirpc.CreateRequest) (*pulumirpc.CreateResponse, error) {
	ctx, done := p.opContext(ctx)
	defer done()
	urn := resource.URN(req.GetUrn())
	c, unreachable, reason := p.state()
	if !req.GetPreview() && unreachable {
		return nil, fmt.Errorf("%w: %s", errUnreachable, reason)
	}
	newResInputs, err := unmarshal(req.GetProperties(), "Create.properties", true)
	if err != nil {
		return nil, fmt.Errorf("create failed because malformed resource inputs: %w", err)
	}
	newInputs := propMapToUnstructured(newResInputs)
	gvk := gvkFromObject(newInputs)
	if req.GetPreview() && (hasComputedValue(newInputs) || !p.gvkExists(gvk)) {
		return &pulumirpc.CreateResponse{Properties: req.GetProperties()}, nil
	}
	if !p.gvkExists(gvk) {
		return nil, fmt.Errorf("creation of resource %q with kind %s failed because the Kubernetes API server "+
			"reported that the apiVersion for this resource does not exist. Verify that any required CRDs have been created",
			urn, APIVersion(gvk)+"/"+gvk.Kind)
	}
	initialAPIVersion := newInputs.GetAPIVersion()
	fieldManager := fieldManagerName(nil, newInputs)
	rc, err := c.clientFor(newInputs)
	if err != nil {
		return nil, err
	}

	var applied *unstructured.Unstructured
	force := patchForce(newInputs, nil, req.GetPreview())
	backoff := applyRetryBackoff
	for try := 1; ; try++ {
		applied, err = apply(ctx, rc, newInputs, fieldManager, force, req.GetPreview())
		if err != nil && req.GetPreview() && isImmutableFieldErr(err) {
			// A dry run cannot replace: preview the creation under another name.
			preview := newInputs.DeepCopy()
			preview.SetName(newInputs.GetName() + randomSuffix(5))
			p.log(ctx, diag.Info, urn, fmt.Sprintf("Preview creation failed due to immutable fields; retrying with name %q", preview.GetName()))
			applied, err = apply(ctx, rc, preview, fieldManager, force, true)
		}
		err = ssaErr(err, fieldManager)
		if err == nil {
			break
		}
		if req.GetPreview() && (isNamespaceNotFound(err) || apierrors.IsAlreadyExists(err) || apierrors.IsForbidden(err)) {
			// The namespace will exist by the time of the update: preview from the inputs.
			return &pulumirpc.CreateResponse{Properties: req.GetProperties()}, nil
		}
		if try >= applyRetries || !(apierrors.IsNotFound(err) || meta.IsNoMatchError(err)) {
			return nil, fmt.Errorf("resource %q was not successfully created by the Kubernetes API server: %w", urn, err)
		}
		p.logStatus(ctx, urn, fmt.Sprintf("Retry #%d; creation failed: %v", try, err))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("resource %q was not successfully created: %w", urn, ctx.Err())
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	p.logStatus(ctx, urn, "")

	if req.GetPreview() {
		unstructured.RemoveNestedField(applied.Object, "status")
		state, err := p.marshal(checkpointObject(newInputs, applied, newResInputs, initialAPIVersion, fieldManager), "Create.preview")
		if err != nil {
			return nil, err
		}
		return &pulumirpc.CreateResponse{Properties: state}, nil
	}

	// The state records the object as the apply returned it, or as the await last saw it (as the
	// real provider does); after a failed await, as it is now.
	live := applied
	var awaitErr error
	if !SkipAwait(newInputs) {
		log := &statusLogger{host: p.getHost(), urn: urn}
		timeout := resourceTimeout(req.GetTimeout(), newInputs, 0)
		if ready, err := awaitReady(ctx, c, log, applied, timeout, p.ServiceSettle); err != nil {
			awaitErr = err
			if got, err := rc.Get(ctx, applied.GetName(), metav1.GetOptions{}); err == nil {
				live = got
			}
		} else {
			live = ready
		}
	}
	state, err := p.marshal(checkpointObject(newInputs, live, newResInputs, initialAPIVersion, fieldManager), "Create.state")
	if err != nil {
		return nil, err
	}
	id := fqName(live.GetNamespace(), live.GetName())
	if awaitErr != nil {
		return nil, partialError(id, fmt.Errorf("resource %q was successfully created, but the Kubernetes API server "+
			"reported that it failed to fully initialize or become live: %w", urn, awaitErr), state, nil)
	}
	return &pulumirpc.CreateResponse{Id: id, Properties: state}, nil
}

func (p *Provider) logStatus(ctx context.Context, urn resource.URN, msg string) {
	if h := p.getHost(); h != nil {
		_ = h.LogStatus(ctx, diag.Info, urn, msg)
	}
}

// deleteResponse tells the engine the resource no longer exists.
var deleteResponse = &pulumirpc.ReadResponse{Id: "", Properties: nil}

// Read returns the live object (refresh shows drift) and checks its readiness.
func (p *Provider) Read(ctx context.Context, req *pulumirpc.ReadRequest) (*pulumirpc.ReadResponse, error) {
	ctx, done := p.opContext(ctx)
	defer done()
	urn := resource.URN(req.GetUrn())
	c, unreachable, reason := p.state()
	if unreachable {
		deleteUnreachable, skipUpdateUnreachable := p.unreachableOptions()
		p.log(ctx, diag.Warning, urn, "configured Kubernetes cluster is unreachable: "+reason)
		if deleteUnreachable {
			p.log(ctx, diag.Info, urn, "configured Kubernetes cluster is unreachable and the `deleteUnreachable` "+
				"option is enabled. Deleting the unreachable resource from Pulumi state")
			return deleteResponse, nil
		}
		if skipUpdateUnreachable {
			return &pulumirpc.ReadResponse{Id: req.GetId(), Properties: req.GetProperties(), Inputs: req.GetInputs()}, nil
		}
		return nil, errors.New("failed to read resource state due to unreachable cluster. If the cluster was " +
			"deleted, you can remove this resource from Pulumi state by rerunning the operation with the " +
			"PULUMI_K8S_DELETE_UNREACHABLE environment variable set to \"true\"")
	}
	oldState, err := unmarshal(req.GetProperties(), "Read.olds", true)
	if err != nil {
		return nil, err
	}
	oldInputsPM, err := unmarshal(req.GetInputs(), "Read.inputs", true)
	if err != nil {
		return nil, err
	}
	namespace, name := parseFqName(req.GetId())
	if name == "" {
		return nil, fmt.Errorf("failed to read resource because of a failure to parse resource name from request ID: %s", req.GetId())
	}
	oldInputs := normalizeInputs(propMapToUnstructured(oldInputsPM))
	_, oldLive := parseCheckpointObject(oldState)
	readFromCluster := false
	if gvkFromObject(oldInputs).Empty() || oldInputs.GetKind() == "" {
		if oldLive.GetKind() == "" {
			gvk, err := GVKFromToken(tokenOf(urn))
			if err != nil {
				return nil, err
			}
			oldInputs.SetAPIVersion(APIVersion(gvk))
			oldInputs.SetKind(gvk.Kind)
			readFromCluster = true
		} else {
			oldInputs.SetAPIVersion(oldLive.GetAPIVersion())
			oldInputs.SetKind(oldLive.GetKind())
		}
		if oldInputs.GetName() == "" {
			oldInputs.SetName(name)
		}
		if oldInputs.GetNamespace() == "" {
			oldInputs.SetNamespace(namespace)
		}
	}
	initialVersion := initialAPIVersion(oldState, oldInputs)
	fieldManager := fieldManagerName(oldState, oldInputs)

	gvk := gvkFromObject(oldInputs)
	rc, err := c.resourceClient(gvk, namespace)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return deleteResponse, nil
		}
		return nil, err
	}
	live, err := rc.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return deleteResponse, nil
		}
		return nil, err
	}
	var readErr error
	if !readFromCluster && !SkipAwait(oldInputs) {
		readErr = checkReady(ctx, c, live)
		if readErr != nil && apierrors.IsNotFound(readErr) {
			return deleteResponse, nil
		}
		var ae *awaitError
		if readErr != nil && !errors.As(readErr, &ae) {
			return nil, readErr
		}
	}

	liveInputs := pruneLive(live, oldInputs)
	if readFromCluster {
		for k, v := range live.Object {
			if k != "status" {
				liveInputs.Object[k] = v
			}
		}
		liveInputs = liveInputs.DeepCopy()
		for _, f := range []string{"creationTimestamp", "generation", "managedFields", "resourceVersion", "uid"} {
			unstructured.RemoveNestedField(liveInputs.Object, "metadata", f)
		}
		unstructured.RemoveNestedField(liveInputs.Object, "metadata", "annotations", revisionAnnotation)
		unstructured.RemoveNestedField(liveInputs.Object, "metadata", "annotations", annotationLastApplied)
	}
	id := req.GetId()
	if id == "" {
		id = fqName(live.GetNamespace(), live.GetName())
	}
	state, err := p.marshal(checkpointObject(liveInputs, live, oldInputsPM, initialVersion, fieldManager), "Read.state")
	if err != nil {
		return nil, err
	}
	liveInputsPM := resource.NewPropertyMapFromMap(liveInputs.Object)
	annotateSecrets(liveInputsPM, oldInputsPM)
	inputs, err := p.marshal(liveInputsPM, "Read.inputs")
	if err != nil {
		return nil, err
	}
	if readErr != nil {
		return nil, partialError(id, readErr, state, inputs)
	}
	return &pulumirpc.ReadResponse{Id: id, Properties: state, Inputs: inputs}, nil
}

// Update applies the new inputs with the resource's field manager (a dry run during
// preview) and waits for readiness.
func (p *Provider) Update(ctx context.Context, req *pulumirpc.UpdateRequest) (*pulumirpc.UpdateResponse, error) {
	ctx, done := p.opContext(ctx)
	defer done()
	urn := resource.URN(req.GetUrn())
	c, unreachable, reason := p.state()
	if !req.GetPreview() && unreachable {
		return nil, fmt.Errorf("%w: %s", errUnreachable, reason)
	}
	oldState, err := unmarshal(req.GetOlds(), "Update.olds", true)
	if err != nil {
		return nil, err
	}
	newResInputs, err := unmarshal(req.GetNews(), "Update.news", true)
	if err != nil {
		return nil, fmt.Errorf("update failed because malformed resource inputs: %w", err)
	}
	newInputs := normalizeInputs(propMapToUnstructured(newResInputs))
	gvk := gvkFromObject(newInputs)
	if req.GetPreview() && (hasComputedValue(newInputs) || !p.gvkExists(gvk)) {
		return &pulumirpc.UpdateResponse{Properties: req.GetNews()}, nil
	}
	oldInputs, oldLive := parseCheckpointObject(oldState)
	removeLastApplied(oldLive, oldInputs)
	oldInputs = normalizeInputs(oldInputs)
	initialVersion := initialAPIVersion(oldState, oldInputs)
	fieldManagerOld := fieldManagerName(oldState, oldInputs)
	fieldManager := fieldManagerName(oldState, newInputs)

	rc, err := c.clientFor(newInputs)
	if err != nil {
		if meta.IsNoMatchError(err) {
			return nil, fmt.Errorf("update of resource %q failed because the Kubernetes API server reported that the "+
				"apiVersion for this resource does not exist. Verify that any required CRDs have been created: %w", urn, err)
		}
		return nil, err
	}
	liveOld, err := rc.Get(ctx, oldLive.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("update of resource %q failed: %w", urn, err)
	}
	if !req.GetPreview() {
		if liveOld, err = takeOverClientSideFields(ctx, rc, liveOld, fieldManager); err != nil {
			return nil, fmt.Errorf("update of resource %q failed: %w", urn, err)
		}
	}
	for _, path := range req.GetIgnoreChanges() {
		keepLiveValue(newInputs, liveOld, path)
	}

	fail := func(cause error) (*pulumirpc.UpdateResponse, error) {
		live, getErr := rc.Get(ctx, oldLive.GetName(), metav1.GetOptions{})
		if getErr != nil {
			return nil, errors.Join(fmt.Errorf("update of resource %q failed: %w", urn, cause),
				fmt.Errorf("unable to get cluster state: %w", getErr))
		}
		state, err := p.marshal(checkpointObject(newInputs, live, newResInputs, initialVersion, fieldManager), "Update.state")
		if err != nil {
			return nil, err
		}
		id := fqName(live.GetNamespace(), live.GetName())
		return nil, partialError(id, fmt.Errorf("the Kubernetes API server reported that %q failed to fully initialize "+
			"or become live: %w", id, cause), state, nil)
	}

	force := patchForce(newInputs, liveOld, req.GetPreview())
	applied, err := apply(ctx, rc, newInputs, fieldManager, force, req.GetPreview())
	if err != nil {
		if req.GetPreview() && apierrors.IsForbidden(err) {
			return &pulumirpc.UpdateResponse{Properties: req.GetNews()}, nil
		}
		return fail(ssaErr(err, fieldManager))
	}
	if req.GetPreview() {
		state, err := p.marshal(checkpointObject(newInputs, applied, newResInputs, initialVersion, fieldManager), "Update.preview")
		if err != nil {
			return nil, err
		}
		return &pulumirpc.UpdateResponse{Properties: state}, nil
	}
	// As in Create: the object as the apply returned it, or as the await last saw it.
	live := applied
	if !SkipAwait(newInputs) {
		log := &statusLogger{host: p.getHost(), urn: urn}
		ready, err := awaitReady(ctx, c, log, applied, resourceTimeout(req.GetTimeout(), newInputs, 0), p.ServiceSettle)
		if err != nil {
			return fail(err)
		}
		live = ready
	}
	if fieldManagerOld != fieldManager {
		if err := relinquish(ctx, rc, live, fieldManagerOld); err != nil {
			return nil, err
		}
	}
	state, err := p.marshal(checkpointObject(newInputs, live, newResInputs, initialVersion, fieldManager), "Update.state")
	if err != nil {
		return nil, err
	}
	return &pulumirpc.UpdateResponse{Properties: state}, nil
}

// removeLastApplied makes an old client-side-apply annotation (pre-v4 state) show as a
// removal, so that the update drops it.
func removeLastApplied(oldLive, oldInputs *unstructured.Unstructured) {
	v, inLive, _ := unstructured.NestedString(oldLive.Object, "metadata", "annotations", annotationLastApplied)
	_, inInputs, _ := unstructured.NestedString(oldInputs.Object, "metadata", "annotations", annotationLastApplied)
	if inLive && !inInputs {
		_ = unstructured.SetNestedField(oldInputs.Object, v, "metadata", "annotations", annotationLastApplied)
	}
}

// keepLiveValue implements ignoreChanges for an update: the ignored field keeps its live
// value, if it has one.
func keepLiveValue(inputs, live *unstructured.Unstructured, path string) {
	pp, err := resource.ParsePropertyPath(path)
	if err != nil {
		return
	}
	var fields []string
	for _, e := range pp {
		s, ok := e.(string)
		if !ok {
			return
		}
		fields = append(fields, s)
	}
	if v, found, err := unstructured.NestedFieldCopy(live.Object, fields...); found && err == nil {
		_ = unstructured.SetNestedField(inputs.Object, v, fields...)
	}
}

// takeOverClientSideFields gives manager the fields that kubectl and client-side apply own
// on the main resource (e.g. spec.replicas after `kubectl edit`), as the real provider does
// before an update, so that applying the program's value is not an apply conflict. Fields
// set through a subresource (`kubectl scale`) are not taken over, so updating them back is
// an apply conflict, as with the real provider.
func takeOverClientSideFields(ctx context.Context, rc dynamic.ResourceInterface, live *unstructured.Unstructured,
	manager string,
) (*unstructured.Unstructured, error) {
	entries := live.GetManagedFields()
	if len(entries) == 0 {
		return live, nil
	}
	merged := &fieldpath.Set{}
	var kept []metav1.ManagedFieldsEntry
	ours := -1
	changed := false
	for _, e := range entries {
		taken := false
		for _, m := range csaManagers {
			// By name prefix, and never entries of a subresource (e.g. `kubectl scale`'s
			// "kubectl" Update of /scale), exactly as the real provider's takeover does.
			if strings.HasPrefix(e.Manager, m.name) && e.Operation == m.op && e.Subresource == "" {
				taken = true
			}
		}
		if !taken {
			if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
				ours = len(kept)
			}
			kept = append(kept, e)
			continue
		}
		changed = true
		if e.FieldsV1 != nil {
			s := &fieldpath.Set{}
			if err := s.FromJSON(strings.NewReader(string(e.FieldsV1.Raw))); err != nil {
				return nil, fmt.Errorf("reading managed fields of %q: %w", e.Manager, err)
			}
			merged = merged.Union(s)
		}
	}
	if !changed {
		return live, nil
	}
	if ours >= 0 && kept[ours].FieldsV1 != nil {
		s := &fieldpath.Set{}
		if err := s.FromJSON(strings.NewReader(string(kept[ours].FieldsV1.Raw))); err != nil {
			return nil, err
		}
		merged = merged.Union(s)
	}
	raw, err := merged.ToJSON()
	if err != nil {
		return nil, err
	}
	entry := metav1.ManagedFieldsEntry{
		Manager: manager, Operation: metav1.ManagedFieldsOperationApply, APIVersion: live.GetAPIVersion(),
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: raw},
	}
	if ours >= 0 {
		entry.Time = kept[ours].Time
		kept[ours] = entry
	} else {
		now := metav1.Now()
		entry.Time = &now
		kept = append(kept, entry)
	}
	patch, err := json.Marshal([]map[string]any{
		{"op": "test", "path": "/metadata/resourceVersion", "value": live.GetResourceVersion()},
		{"op": "replace", "path": "/metadata/managedFields", "value": kept},
	})
	if err != nil {
		return nil, err
	}
	return rc.Patch(ctx, live.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
}

// relinquish gives up every field manager owns, by applying an empty object as manager.
func relinquish(ctx context.Context, rc dynamic.ResourceInterface, live *unstructured.Unstructured, manager string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetAPIVersion(live.GetAPIVersion())
	obj.SetKind(live.GetKind())
	obj.SetNamespace(live.GetNamespace())
	obj.SetName(live.GetName())
	body, err := yaml.Marshal(obj.Object)
	if err != nil {
		return err
	}
	_, err = rc.Patch(ctx, live.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: manager})
	return err
}

// Delete deletes the object (Foreground propagation by default) and waits until it is gone.
func (p *Provider) Delete(ctx context.Context, req *pulumirpc.DeleteRequest) (*emptypb.Empty, error) {
	ctx, done := p.opContext(ctx)
	defer done()
	urn := resource.URN(req.GetUrn())
	oldState, err := unmarshal(req.GetProperties(), "Delete.olds", true)
	if err != nil {
		return nil, err
	}
	oldInputs, current := parseCheckpointObject(oldState)
	_, name := parseFqName(req.GetId())
	c, unreachable, reason := p.state()
	if unreachable {
		p.log(ctx, diag.Warning, urn, "configured Kubernetes cluster is unreachable: "+reason)
		if deleteUnreachable, _ := p.unreachableOptions(); deleteUnreachable {
			p.log(ctx, diag.Info, urn, "configured Kubernetes cluster is unreachable and the `deleteUnreachable` "+
				"option is enabled. Deleting the unreachable resource from Pulumi state")
			return &emptypb.Empty{}, nil
		}
		return nil, errors.New("configured Kubernetes cluster is unreachable. If the cluster was deleted, you can " +
			"remove this resource from Pulumi state by rerunning the operation with the " +
			"PULUMI_K8S_DELETE_UNREACHABLE environment variable set to \"true\"")
	}
	gvk := gvkFromObject(current)
	if current.GetKind() == "" {
		if gvk, err = GVKFromToken(tokenOf(urn)); err != nil {
			return nil, err
		}
		current.SetAPIVersion(APIVersion(gvk))
		current.SetKind(gvk.Kind)
	}
	if current.GetName() == "" {
		current.SetName(name)
	}
	rc, err := c.resourceClient(gvk, current.GetNamespace())
	if err != nil {
		if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
			return &emptypb.Empty{}, nil // the kind itself is gone (e.g. its CRD was deleted)
		}
		return nil, err
	}
	policy := deletionPropagation(oldInputs)
	if err := rc.Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
		if apierrors.IsNotFound(err) {
			return &emptypb.Empty{}, nil
		}
		return nil, err
	}
	if SkipAwait(oldInputs) && skipAwaitOnDelete(gvk) {
		return &emptypb.Empty{}, nil
	}
	log := &statusLogger{host: p.getHost(), urn: urn}
	timeout := resourceTimeout(req.GetTimeout(), oldInputs, defaultAwaitTimeout)
	if err := awaitDeleted(ctx, c, log, current, timeout); err != nil {
		var ae *awaitError
		if errors.As(err, &ae) && ae.object != nil {
			state, mErr := p.marshal(checkpointObject(current, ae.object, oldState,
				initialAPIVersion(oldState, current), fieldManagerName(oldState, oldInputs)), "Delete.state")
			if mErr != nil {
				return nil, mErr
			}
			return nil, partialError(fqName(ae.object.GetNamespace(), ae.object.GetName()), err, state, nil)
		}
		return nil, err
	}
	return &emptypb.Empty{}, nil
}
