package standin

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/common/diag"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// Await timing. The timeouts and the settle time are the real provider's. Like the real provider,
// the stand-in watches what it waits for (watch.go) and re-evaluates readiness on every change it
// is told of, rather than re-reading the object at intervals.
const (
	defaultAwaitTimeout   = 10 * time.Minute       // workloads, Services, Jobs, deletions
	defaultVolumeTimeout  = 5 * time.Minute        // PersistentVolume(Claim)s
	defaultSecretTimeout  = 5 * time.Second        // service-account-token Secrets
	podReportInterval     = 10 * time.Second       // how often Pod problems are shown while waiting
	defaultServiceSettled = 10 * time.Second       // endpoints must be unchanged this long
	retryAfterError       = 250 * time.Millisecond // a failed evaluation (e.g. a list refused) is tried again after this
)

var (
	gvrPods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	gvrEvents         = schema.GroupVersionResource{Version: "v1", Resource: "events"}
	gvrPVCs           = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}
	gvrReplicaSets    = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	gvrEndpointSlices = schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}
	gvrStorageClasses = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}
)

// awaitError is a readiness or deletion wait that did not succeed. It carries the last
// object seen, so that the provider can checkpoint it, and the reasons shown to the user.
type awaitError struct {
	msg     string
	object  *unstructured.Unstructured
	reasons []string
}

func (e *awaitError) Error() string { return e.msg }

func timeoutErr(obj *unstructured.Unstructured, reasons []string) *awaitError {
	return &awaitError{msg: fmt.Sprintf("'%s' timed out waiting to be Ready", obj.GetName()), object: obj, reasons: reasons}
}

func initErr(obj *unstructured.Unstructured, reasons []string) *awaitError {
	return &awaitError{msg: fmt.Sprintf("Resource '%s' was created but failed to initialize", obj.GetName()), object: obj, reasons: reasons}
}

func cancelErr(obj *unstructured.Unstructured, reasons []string) *awaitError {
	return &awaitError{msg: fmt.Sprintf("Resource operation was cancelled for %q", obj.GetName()), object: obj, reasons: reasons}
}

// statusLogger shows progress for one resource, without repeating itself.
type statusLogger struct {
	host Host
	urn  resource.URN
	last string
}

func (l *statusLogger) status(ctx context.Context, sev diag.Severity, msg string) {
	if l.host == nil || msg == l.last {
		return
	}
	l.last = msg
	_ = l.host.LogStatus(ctx, sev, l.urn, msg)
}

func (l *statusLogger) clear(ctx context.Context) {
	if l.host != nil {
		_ = l.host.LogStatus(ctx, diag.Info, l.urn, "")
	}
}

func toTyped[T any](u *unstructured.Unstructured) (*T, error) {
	var out T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func listTyped[T any](list *unstructured.UnstructuredList) []T {
	out := make([]T, 0, len(list.Items))
	for i := range list.Items {
		if t, err := toTyped[T](&list.Items[i]); err == nil {
			out = append(out, *t)
		}
	}
	return out
}

// evaluation is one look at an object: its readiness, the live object, and the Pods whose
// problems explain a delay.
type evaluation struct {
	readiness Readiness
	live      *unstructured.Unstructured
	podOwner  types.UID // Pods owned by this UID are inspected for problems; "" for none
	selector  *metav1.LabelSelector
}

// awaiter evaluates one kind of object.
type awaiter struct {
	timeout time.Duration
	eval    func(ctx context.Context, w *waiter) (evaluation, error)
}

// waiter holds the state of one readiness wait.
type waiter struct {
	c         *cluster
	gvk       schema.GroupVersionKind
	namespace string
	name      string
	settle    time.Duration

	// During an await, the object and every list an evaluation makes are watched: self is the
	// object's watchedSet, watches the lists'. Without them (checkReady, a single look) get and
	// list read the API server.
	self    *watchedSet
	watches *watches
	// wakeAt, when set by an evaluation, is when the result may change without any event (the
	// end of a Service's settling time).
	wakeAt time.Time

	// Service endpoint settling.
	sliceFingerprint string
	sliceChanged     time.Time
}

// get returns the object: the watched copy during an await, else a GET.
func (w *waiter) get(ctx context.Context) (*unstructured.Unstructured, error) {
	if w.self != nil {
		for _, obj := range w.self.objects() {
			if obj.GetName() == w.name {
				return obj, nil
			}
		}
		m, err := w.c.mapping(w.gvk)
		if err != nil {
			return nil, err
		}
		return nil, apierrors.NewNotFound(m.Resource.GroupResource(), w.name)
	}
	rc, err := w.c.resourceClient(w.gvk, w.namespace)
	if err != nil {
		return nil, err
	}
	return rc.Get(ctx, w.name, metav1.GetOptions{})
}

// list returns the objects of a related kind in the object's namespace that readiness depends
// on: watched during an await (listed once, then kept current by a watch), else listed.
func (w *waiter) list(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	ns := canonicalNamespace(w.namespace)
	return w.listOf(ctx, gvr.String()+"@"+ns, w.c.dynamic.Resource(gvr).Namespace(ns), opts)
}

// listClusterScoped is list for a cluster-scoped kind.
func (w *waiter) listClusterScoped(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return w.listOf(ctx, gvr.String(), w.c.dynamic.Resource(gvr), opts)
}

func (w *waiter) listOf(ctx context.Context, key string, ri dynamic.ResourceInterface, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	if w.watches != nil {
		return w.watches.list(ctx, key, ri, opts)
	}
	return ri.List(ctx, opts)
}

// listNow lists from the API server, for the diagnostics shown while waiting or on failure
// (Pods, events), which readiness does not depend on.
func (w *waiter) listNow(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	return w.c.dynamic.Resource(gvr).Namespace(canonicalNamespace(w.namespace)).List(ctx, opts)
}

func selectorString(sel *metav1.LabelSelector) string {
	if sel == nil {
		return ""
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return ""
	}
	return s.String()
}

// awaiterFor returns the readiness awaiter for a kind, or nil for kinds the real provider
// considers ready as soon as the API server accepted them.
func awaiterFor(gvk schema.GroupVersionKind) *awaiter {
	switch gvk.GroupKind() {
	case schema.GroupKind{Group: "apps", Kind: "Deployment"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalDeployment}
	case schema.GroupKind{Group: "apps", Kind: "StatefulSet"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalStatefulSet}
	case schema.GroupKind{Group: "apps", Kind: "DaemonSet"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalDaemonSet}
	case schema.GroupKind{Group: "batch", Kind: "Job"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalJob}
	case schema.GroupKind{Kind: "Service"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalService}
	case schema.GroupKind{Kind: "Pod"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalPod}
	case schema.GroupKind{Kind: "PersistentVolumeClaim"}:
		return &awaiter{timeout: defaultVolumeTimeout, eval: evalPVC}
	case schema.GroupKind{Kind: "PersistentVolume"}:
		return &awaiter{timeout: defaultVolumeTimeout, eval: evalPV}
	case schema.GroupKind{Kind: "Namespace"}:
		return &awaiter{timeout: defaultAwaitTimeout, eval: evalNamespace}
	case schema.GroupKind{Kind: "Secret"}:
		return &awaiter{timeout: defaultSecretTimeout, eval: evalSecret}
	}
	return nil
}

func evalDeployment(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	dep, err := toTyped[appsv1.Deployment](live)
	if err != nil {
		return evaluation{}, err
	}
	rsList, err := w.list(ctx, gvrReplicaSets, metav1.ListOptions{LabelSelector: selectorString(dep.Spec.Selector)})
	if err != nil {
		return evaluation{}, err
	}
	rss := listTyped[appsv1.ReplicaSet](rsList)
	var pvcs []corev1.PersistentVolumeClaim
	if len(claimNames(dep.Spec.Template.Spec.Volumes)) > 0 {
		l, err := w.list(ctx, gvrPVCs, metav1.ListOptions{})
		if err != nil {
			return evaluation{}, err
		}
		pvcs = listTyped[corev1.PersistentVolumeClaim](l)
	}
	ev := evaluation{readiness: DeploymentReadiness(dep, rss, pvcs), live: live, selector: dep.Spec.Selector}
	if rs := CurrentReplicaSet(dep, rss); rs != nil {
		ev.podOwner = rs.UID
	}
	return ev, nil
}

func evalStatefulSet(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	sts, err := toTyped[appsv1.StatefulSet](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: StatefulSetReadiness(sts), live: live, podOwner: sts.UID, selector: sts.Spec.Selector}, nil
}

func evalDaemonSet(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	ds, err := toTyped[appsv1.DaemonSet](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: DaemonSetReadiness(ds), live: live, podOwner: ds.UID, selector: ds.Spec.Selector}, nil
}

func evalJob(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	job, err := toTyped[batchv1.Job](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: JobReadiness(job), live: live, podOwner: job.UID, selector: job.Spec.Selector}, nil
}

func evalService(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	svc, err := toTyped[corev1.Service](live)
	if err != nil {
		return evaluation{}, err
	}
	var slices []discoveryv1.EndpointSlice
	if ServiceNeedsEndpoints(svc) {
		l, err := w.list(ctx, gvrEndpointSlices, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return evaluation{}, err
		}
		slices = listTyped[discoveryv1.EndpointSlice](l)
	}
	r := ServiceReadiness(svc, slices)
	// The real provider lets endpoints settle: ready only once they have not changed for a while.
	if ServiceNeedsEndpoints(svc) && w.settle > 0 {
		var fp []string
		for _, s := range slices {
			fp = append(fp, s.Name+"@"+s.ResourceVersion)
		}
		sort.Strings(fp)
		joined := strings.Join(fp, ",")
		if joined != w.sliceFingerprint || w.sliceChanged.IsZero() {
			w.sliceFingerprint, w.sliceChanged = joined, time.Now()
		}
		if r.Ready && time.Since(w.sliceChanged) < w.settle {
			r.Ready = false
			r.Status = "[2/3] Waiting for the Service's endpoints to settle"
			w.wakeAt = w.sliceChanged.Add(w.settle) // settled then, unless a slice changes first
		}
	}
	return evaluation{readiness: r, live: live}, nil
}

func evalPod(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	pod, err := toTyped[corev1.Pod](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: PodReadiness(pod), live: live}, nil
}

func evalPVC(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	pvc, err := toTyped[corev1.PersistentVolumeClaim](live)
	if err != nil {
		return evaluation{}, err
	}
	var mode storagev1.VolumeBindingMode
	if sc := pvc.Spec.StorageClassName; sc != nil && *sc != "" {
		l, err := w.listClusterScoped(ctx, gvrStorageClasses, metav1.ListOptions{FieldSelector: "metadata.name=" + *sc})
		if err == nil {
			for _, obj := range l.Items {
				if m, _, _ := unstructured.NestedString(obj.Object, "volumeBindingMode"); obj.GetName() == *sc && m != "" {
					mode = storagev1.VolumeBindingMode(m)
				}
			}
		}
	}
	return evaluation{readiness: PVCReadiness(pvc, mode), live: live}, nil
}

func evalPV(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	pv, err := toTyped[corev1.PersistentVolume](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: PVReadiness(pv), live: live}, nil
}

func evalNamespace(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	ns, err := toTyped[corev1.Namespace](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: NamespaceReadiness(ns), live: live}, nil
}

func evalSecret(ctx context.Context, w *waiter) (evaluation, error) {
	live, err := w.get(ctx)
	if err != nil {
		return evaluation{}, err
	}
	s, err := toTyped[corev1.Secret](live)
	if err != nil {
		return evaluation{}, err
	}
	return evaluation{readiness: SecretReadiness(s), live: live}, nil
}

// podProblems lists what is wrong with the Pods owned by owner.
func (w *waiter) podProblems(ctx context.Context, ev evaluation) []string {
	if ev.podOwner == "" {
		return nil
	}
	l, err := w.listNow(ctx, gvrPods, metav1.ListOptions{LabelSelector: selectorString(ev.selector)})
	if err != nil {
		return nil
	}
	var out []string
	pods := listTyped[corev1.Pod](l)
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	for i := range pods {
		if ownedBy(&pods[i], ev.podOwner) {
			out = append(out, PodProblems(&pods[i])...)
		}
	}
	return out
}

// warningEvents lists the Warning events recorded for an object, e.g. a StatefulSet's
// FailedCreate when its Pods are refused.
func (w *waiter) warningEvents(ctx context.Context, obj *unstructured.Unstructured) []string {
	if obj == nil || obj.GetUID() == "" {
		return nil
	}
	l, err := w.listNow(ctx, gvrEvents, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(obj.GetUID())).String(),
	})
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range listTyped[corev1.Event](l) {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		msg := fmt.Sprintf("[%s event] %s", e.Reason, e.Message)
		if !seen[msg] {
			seen[msg] = true
			out = append(out, msg)
		}
	}
	return out
}

func dedupe(in []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range in {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// awaitReady waits until obj (just applied) is ready, or the timeout passes, or ctx is
// cancelled. It returns the last live object seen.
//
// It watches, as the real provider does through its informers: the object itself from the
// resourceVersion it was applied at, and each list an evaluation reads (a Deployment's
// ReplicaSets and claims, a Service's EndpointSlices, a claim's StorageClass) from the
// resourceVersion of its first list. The watches start once the first look finds the object not
// ready (one that is ready at once costs none). Readiness is evaluated again after every change
// a watch reports; besides that only when a Service's endpoints have had their settling time,
// every podReportInterval (to show what holds the Pods back), and after a failed evaluation.
func awaitReady(ctx context.Context, c *cluster, log *statusLogger, obj *unstructured.Unstructured,
	timeout time.Duration, settle time.Duration,
) (*unstructured.Unstructured, error) {
	gvk := gvkFromObject(obj)
	a := awaiterFor(gvk)
	// pulumi.com/waitFor replaces the built-in wait, for any kind (the real provider's
	// ReadyCondition).
	if custom, err := waitForAwaiter(obj); err != nil {
		return nil, initErr(obj, []string{err.Error()})
	} else if custom != nil {
		a = custom
	}
	if a == nil {
		return obj, nil
	}
	if timeout == 0 {
		timeout = a.timeout
	}
	rc, err := c.resourceClient(gvk, obj.GetNamespace())
	if err != nil {
		return nil, initErr(obj, []string{err.Error()})
	}
	wctx, cancel := context.WithCancel(ctx)
	ws := newWatches(wctx)
	defer ws.stop(cancel)
	w := &waiter{c: c, gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName(), settle: settle, watches: ws}
	w.self = ws.object(rc, obj)
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	podReport := time.NewTicker(podReportInterval)
	defer podReport.Stop()

	last := obj
	var lastEval evaluation
	var lastErr error
	var lastPodReport time.Time
	failure := func(mk func(*unstructured.Unstructured, []string) *awaitError) error {
		reasons := append([]string{}, lastEval.readiness.Errors...)
		if lastErr != nil {
			reasons = append(reasons, lastErr.Error())
		}
		ectx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		reasons = append(reasons, w.podProblems(ectx, lastEval)...)
		reasons = append(reasons, w.warningEvents(ectx, last)...)
		return mk(last, dedupe(reasons))
	}
	for {
		w.wakeAt = time.Time{}
		var retry, wake <-chan time.Time
		ev, err := a.eval(ctx, w)
		switch {
		case err != nil && apierrors.IsNotFound(err):
			lastErr = fmt.Errorf("%s %q was deleted while waiting for it to become ready", gvk.Kind, obj.GetName())
			return nil, initErr(last, []string{lastErr.Error()})
		case err != nil:
			lastErr = err
			retry = time.After(retryAfterError)
			ws.start() // what was read before the error is kept current meanwhile
		default:
			lastErr, lastEval, last = nil, ev, ev.live
			if ev.readiness.Ready {
				log.status(ctx, diag.Info, "✅ "+ev.readiness.Status)
				log.clear(ctx)
				return ev.live, nil
			}
			if ev.readiness.Failed {
				return nil, failure(initErr)
			}
			log.status(ctx, diag.Info, ev.readiness.Status)
			if time.Since(lastPodReport) >= podReportInterval {
				lastPodReport = time.Now()
				for _, p := range w.podProblems(ctx, ev) {
					log.status(ctx, diag.Warning, p)
				}
			}
			if !w.wakeAt.IsZero() {
				wake = time.After(time.Until(w.wakeAt))
			}
			ws.start() // not ready: watch what was read, from where it was read
		}
		select {
		case <-ctx.Done():
			return nil, failure(cancelErr)
		case <-deadline.C:
			return nil, failure(timeoutErr)
		case <-ws.changed:
		case <-podReport.C:
		case <-retry:
		case <-wake:
		}
	}
}

// checkReady evaluates readiness once, for Read (refresh): a live object that is not ready
// is reported as failed to initialize, as the real provider's read awaiters do.
func checkReady(ctx context.Context, c *cluster, obj *unstructured.Unstructured) error {
	gvk := gvkFromObject(obj)
	a := awaiterFor(gvk)
	if a == nil {
		return nil
	}
	w := &waiter{c: c, gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
	ev, err := a.eval(ctx, w)
	if err != nil {
		return err
	}
	if ev.readiness.Ready {
		return nil
	}
	reasons := append(append([]string{}, ev.readiness.Errors...), w.podProblems(ctx, ev)...)
	return initErr(ev.live, dedupe(reasons))
}

// awaitDeleted waits until the object is gone. It reads the object once, then watches its name
// from that read's resourceVersion: it is gone when the watch reports its deletion, or when the
// name is taken by another object (another UID: a controller made its node again at once, and
// the object deleted is gone all the same).
func awaitDeleted(ctx context.Context, c *cluster, log *statusLogger, obj *unstructured.Unstructured,
	timeout time.Duration,
) error {
	gvk := gvkFromObject(obj)
	w := &waiter{c: c, gvk: gvk, namespace: obj.GetNamespace(), name: obj.GetName()}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	wctx, cancel := context.WithCancel(ctx)
	ws := newWatches(wctx)
	defer ws.stop(cancel)
	last := obj
	uid := obj.GetUID()
	for {
		var retry <-chan time.Time
		live, err := w.get(ctx) // the read, until it succeeds; then the watched copy
		if err == nil && w.self == nil {
			rc, rcErr := c.resourceClient(gvk, obj.GetNamespace())
			if rcErr != nil {
				return rcErr
			}
			w.self = ws.object(rc, live)
			ws.start()
		}
		switch {
		case apierrors.IsNotFound(err):
			log.clear(ctx)
			return nil
		case err == nil && uid != "" && live.GetUID() != uid:
			log.clear(ctx)
			return nil
		case err == nil:
			last = live
			log.status(ctx, diag.Info, deletionStatus(gvk, live))
		default:
			retry = time.After(retryAfterError)
		}
		select {
		case <-ctx.Done():
			return cancelErr(last, nil)
		case <-deadline.C:
			return &awaitError{
				msg:     fmt.Sprintf("Timed out waiting for deletion of %s %q", APIVersion(gvk)+"/"+gvk.Kind, obj.GetName()),
				object:  last,
				reasons: []string{deletionStatus(gvk, last)},
			}
		case <-ws.changed:
		case <-retry:
		}
	}
}

func deletionStatus(gvk schema.GroupVersionKind, live *unstructured.Unstructured) string {
	switch gvk.Kind {
	case "Deployment", "StatefulSet", "ReplicationController":
		cur, _, _ := unstructured.NestedInt64(live.Object, "status", "replicas")
		spec, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
		return fmt.Sprintf("%s %q still exists (%d / %d replicas exist)", gvk.Kind, live.GetName(), cur, spec)
	case "Namespace":
		phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
		return fmt.Sprintf("namespace %q still exists (%s)", live.GetName(), phase)
	case "Pod":
		phase, _, _ := unstructured.NestedString(live.Object, "status", "phase")
		return fmt.Sprintf("pod %q still exists (%s)", live.GetName(), phase)
	}
	return fmt.Sprintf("%s %q still exists", gvk.Kind, live.GetName())
}
