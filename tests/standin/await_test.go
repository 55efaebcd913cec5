package standin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// fakeAPI is an API server for the awaits, driven by the test: it serves GET and LIST from the
// objects the test puts in it, and hands each WATCH to the test, which sends its events.
type fakeAPI struct {
	mu      sync.Mutex
	objects map[schema.GroupVersionResource][]*unstructured.Unstructured
	listRV  string
	calls   []string            // "get <resource>", "list <resource> <selectors>"
	watches chan *fakeWatchCall // every watch started
}

type fakeWatchCall struct {
	gvr  schema.GroupVersionResource
	opts metav1.ListOptions
	w    *watch.RaceFreeFakeWatcher
}

func newFakeAPI() *fakeAPI {
	return &fakeAPI{
		objects: map[schema.GroupVersionResource][]*unstructured.Unstructured{},
		listRV:  "100",
		watches: make(chan *fakeWatchCall, 16),
	}
}

func (f *fakeAPI) put(gvr schema.GroupVersionResource, objs ...*unstructured.Unstructured) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objects[gvr] = objs
}

func (f *fakeAPI) record(call string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
}

func (f *fakeAPI) called(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// nextWatch waits for the next watch the await starts.
func (f *fakeAPI) nextWatch(t *testing.T) *fakeWatchCall {
	t.Helper()
	select {
	case w := <-f.watches:
		return w
	case <-time.After(3 * time.Second):
		t.Fatal("no watch started within 3 s")
		return nil
	}
}

func (f *fakeAPI) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{api: f, gvr: gvr}
}

type fakeResource struct {
	dynamic.NamespaceableResourceInterface // the methods the awaits do not use panic
	api                                    *fakeAPI
	gvr                                    schema.GroupVersionResource
	namespace                              string
}

func (r *fakeResource) Namespace(ns string) dynamic.ResourceInterface {
	return &fakeResource{api: r.api, gvr: r.gvr, namespace: ns}
}

func (r *fakeResource) Get(_ context.Context, name string, _ metav1.GetOptions, _ ...string) (*unstructured.Unstructured, error) {
	r.api.record("get " + r.gvr.Resource)
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	for _, obj := range r.api.objects[r.gvr] {
		if obj.GetName() == name {
			return obj.DeepCopy(), nil
		}
	}
	return nil, apierrors.NewNotFound(r.gvr.GroupResource(), name)
}

func (r *fakeResource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.api.record(fmt.Sprintf("list %s %s %s", r.gvr.Resource, opts.LabelSelector, opts.FieldSelector))
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	l := &unstructured.UnstructuredList{}
	l.SetResourceVersion(r.api.listRV)
	for _, obj := range r.api.objects[r.gvr] {
		if name, ok := strings.CutPrefix(opts.FieldSelector, "metadata.name="); ok && obj.GetName() != name {
			continue
		}
		l.Items = append(l.Items, *obj.DeepCopy())
	}
	return l, nil
}

func (r *fakeResource) Watch(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	call := &fakeWatchCall{gvr: r.gvr, opts: opts, w: watch.NewRaceFreeFake()}
	r.api.watches <- call
	return call.w, nil
}

// fixedMapper is a RESTMapper of a few built-in kinds.
type fixedMapper struct{ *meta.DefaultRESTMapper }

func (fixedMapper) Reset() {}

func fakeCluster(api *fakeAPI) *cluster {
	m := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range []schema.GroupVersionKind{
		{Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Group: "apps", Version: "v1", Kind: "Deployment"},
		{Version: "v1", Kind: "Service"},
		{Version: "v1", Kind: "ConfigMap"},
	} {
		m.Add(gvk, meta.RESTScopeNamespace)
	}
	return &cluster{dynamic: api, mapper: fixedMapper{m}}
}

var (
	gvrStatefulSets = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	gvrConfigMaps   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func towersStatefulSet(rv string, ready int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "StatefulSet",
		"metadata": map[string]any{"name": "towers", "namespace": "ns", "uid": "u1", "generation": int64(1), "resourceVersion": rv},
		"spec":     map[string]any{"replicas": int64(2)},
		"status": map[string]any{
			"observedGeneration": int64(1), "replicas": int64(2), "readyReplicas": ready,
			"currentReplicas": int64(2), "updatedReplicas": int64(2), "currentRevision": "r1", "updateRevision": "r1",
		},
	}}
}

type awaitResult struct {
	obj *unstructured.Unstructured
	err error
	at  time.Time
}

func startAwaitReady(c *cluster, obj *unstructured.Unstructured, timeout, settle time.Duration) <-chan awaitResult {
	done := make(chan awaitResult, 1)
	go func() {
		got, err := awaitReady(context.Background(), c, &statusLogger{}, obj, timeout, settle)
		done <- awaitResult{got, err, time.Now()}
	}()
	return done
}

func waitResult(t *testing.T, done <-chan awaitResult, within time.Duration) awaitResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(within):
		t.Fatalf("the await had not returned %v later", within)
		return awaitResult{}
	}
}

// TestAwaitReadyReactsToTheWatch: readiness is judged again as soon as the watch reports a
// change, and the watch starts from the resourceVersion the object was applied at (so no change
// after the apply is missed), without reading the object again.
func TestAwaitReadyReactsToTheWatch(t *testing.T) {
	api := newFakeAPI()
	done := startAwaitReady(fakeCluster(api), towersStatefulSet("10", 0), time.Minute, 0)
	call := api.nextWatch(t)
	if call.gvr != gvrStatefulSets || call.opts.ResourceVersion != "10" || call.opts.FieldSelector != "metadata.name=towers" {
		t.Fatalf("watch %v %+v, want statefulsets from resourceVersion 10, field selector metadata.name=towers", call.gvr, call.opts)
	}
	call.w.Modify(towersStatefulSet("11", 1))
	select {
	case r := <-done:
		t.Fatalf("ready with 1 of 2 replicas ready: %v", r.err)
	case <-time.After(50 * time.Millisecond):
	}
	sent := time.Now()
	call.w.Modify(towersStatefulSet("12", 2))
	r := waitResult(t, done, 3*time.Second)
	if r.err != nil || r.obj.GetResourceVersion() != "12" {
		t.Fatalf("got %v, %v; want the object at resourceVersion 12", r.obj, r.err)
	}
	if lag := r.at.Sub(sent); lag > 100*time.Millisecond {
		t.Errorf("ready %v after the event", lag)
	}
	if n := api.called("get statefulsets"); n != 0 {
		t.Errorf("the StatefulSet was read %d times; the watch says all", n)
	}
}

// TestAwaitReadyStartsNoWatchWhenReadyAtOnce: an object ready at the first look (most Secrets,
// ConfigMaps' kin, a bound claim) costs neither a read nor a watch.
func TestAwaitReadyStartsNoWatchWhenReadyAtOnce(t *testing.T) {
	api := newFakeAPI()
	r := waitResult(t, startAwaitReady(fakeCluster(api), towersStatefulSet("10", 2), time.Minute, 0), 3*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(api.watches) != 0 || len(api.calls) != 0 {
		t.Errorf("%d watches and calls %v for an object ready at once", len(api.watches), api.calls)
	}
}

// TestAwaitReadyWatchesAgainWhenTheWatchEnds: a watch the server ends is started again from the
// last resourceVersion seen; one whose resourceVersion expired (410) makes the set list again
// and watch from the list's resourceVersion.
func TestAwaitReadyWatchesAgainWhenTheWatchEnds(t *testing.T) {
	api := newFakeAPI()
	done := startAwaitReady(fakeCluster(api), towersStatefulSet("10", 0), time.Minute, 0)
	first := api.nextWatch(t)
	first.w.Modify(towersStatefulSet("11", 1))
	first.w.Stop() // the server's timeout
	second := api.nextWatch(t)
	if second.opts.ResourceVersion != "11" {
		t.Fatalf("watched again from %q, want 11 (the last seen)", second.opts.ResourceVersion)
	}
	// Meanwhile the object became ready, and the version is too old to watch from.
	api.put(gvrStatefulSets, towersStatefulSet("150", 2))
	second.w.Error(&metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 11"})
	r := waitResult(t, done, 3*time.Second)
	if r.err != nil || r.obj.GetResourceVersion() != "150" {
		t.Fatalf("got %v, %v; want the listed object at resourceVersion 150", r.obj, r.err)
	}
	if n := api.called("list statefulsets  metadata.name=towers"); n != 1 {
		t.Errorf("listed %d times after the 410, want 1", n)
	}
}

// TestAwaitReadyWatchesWhatReadinessReads: a Service's readiness depends on its EndpointSlices;
// they are listed once and watched, and a new endpoint ends the wait at once.
func TestAwaitReadyWatchesWhatReadinessReads(t *testing.T) {
	api := newFakeAPI()
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "resourceVersion": "5"},
		"spec":     map[string]any{"clusterIP": "10.0.0.1", "type": "ClusterIP"},
	}}
	done := startAwaitReady(fakeCluster(api), svc, time.Minute, 0)
	calls := map[string]*fakeWatchCall{}
	for len(calls) < 2 {
		c := api.nextWatch(t)
		calls[c.gvr.Resource] = c
	}
	slices := calls["endpointslices"]
	if slices == nil || slices.opts.LabelSelector != "kubernetes.io/service-name=web" || slices.opts.ResourceVersion != "100" {
		t.Fatalf("watches %v; want endpointslices of web from the list's resourceVersion 100", calls)
	}
	slices.w.Add(&unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":  map[string]any{"name": "web-abc", "namespace": "ns", "resourceVersion": "101", "labels": map[string]any{"kubernetes.io/service-name": "web"}},
		"endpoints": []any{map[string]any{"addresses": []any{"10.1.0.1"}}},
	}})
	if r := waitResult(t, done, 3*time.Second); r.err != nil {
		t.Fatal(r.err)
	}
	if n := api.called("list endpointslices"); n != 1 {
		t.Errorf("EndpointSlices listed %d times, want once (then watched)", n)
	}
}

// TestAwaitReadyWakesWhenEndpointsHaveSettled: with no event at all, a Service whose endpoints
// must settle is ready once the settling time has passed.
func TestAwaitReadyWakesWhenEndpointsHaveSettled(t *testing.T) {
	api := newFakeAPI()
	api.put(schema.GroupVersionResource{Group: "discovery.k8s.io", Version: "v1", Resource: "endpointslices"}, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
		"metadata":  map[string]any{"name": "web-abc", "namespace": "ns", "resourceVersion": "4", "labels": map[string]any{"kubernetes.io/service-name": "web"}},
		"endpoints": []any{map[string]any{"addresses": []any{"10.1.0.1"}}},
	}})
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "web", "namespace": "ns", "resourceVersion": "5"},
		"spec":     map[string]any{"clusterIP": "10.0.0.1", "type": "ClusterIP"},
	}}
	start := time.Now()
	r := waitResult(t, startAwaitReady(fakeCluster(api), svc, time.Minute, 300*time.Millisecond), 3*time.Second)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if took := r.at.Sub(start); took < 300*time.Millisecond || took > time.Second {
		t.Errorf("ready after %v, want just after the 300 ms settling time", took)
	}
}

// TestAwaitReadyTimesOut: the timeout still bounds a wait that no event ends.
func TestAwaitReadyTimesOut(t *testing.T) {
	api := newFakeAPI()
	r := waitResult(t, startAwaitReady(fakeCluster(api), towersStatefulSet("10", 0), 200*time.Millisecond, 0), 3*time.Second)
	var ae *awaitError
	if !errors.As(r.err, &ae) || !strings.Contains(ae.Error(), "timed out waiting to be Ready") {
		t.Fatalf("got %v, want a timeout", r.err)
	}
}

// TestAwaitReadyEndsWhenTheObjectIsDeleted: a deletion seen by the watch fails the wait at once.
func TestAwaitReadyEndsWhenTheObjectIsDeleted(t *testing.T) {
	api := newFakeAPI()
	done := startAwaitReady(fakeCluster(api), towersStatefulSet("10", 0), time.Minute, 0)
	api.nextWatch(t).w.Delete(towersStatefulSet("11", 0))
	r := waitResult(t, done, 3*time.Second)
	if r.err == nil || !strings.Contains(fmt.Sprint(r.err.(*awaitError).reasons), "was deleted while waiting") {
		t.Fatalf("got %v, want deleted while waiting", r.err)
	}
}

func phoenixConfigMap(uid, rv string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "phoenix", "namespace": "ns", "uid": uid, "resourceVersion": rv},
	}}
}

func startAwaitDeleted(c *cluster, obj *unstructured.Unstructured, timeout time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() { done <- awaitDeleted(context.Background(), c, &statusLogger{}, obj, timeout) }()
	return done
}

// TestAwaitDeletedByWatch: a delete wait reads the object once, watches its name from that
// read's resourceVersion, and ends on the deletion event, or when another object (another UID)
// takes the name; with neither, it times out.
func TestAwaitDeletedByWatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		event func(w *watch.RaceFreeFakeWatcher)
		ends  bool
	}{
		{"deleted", func(w *watch.RaceFreeFakeWatcher) { w.Delete(phoenixConfigMap("old", "31")) }, true},
		{"name taken again", func(w *watch.RaceFreeFakeWatcher) {
			w.Delete(phoenixConfigMap("old", "31"))
			w.Add(phoenixConfigMap("new", "32"))
		}, true},
		{"remade before the deletion was seen", func(w *watch.RaceFreeFakeWatcher) { w.Add(phoenixConfigMap("new", "32")) }, true},
		{"still there", func(w *watch.RaceFreeFakeWatcher) { w.Modify(phoenixConfigMap("old", "31")) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI()
			api.put(gvrConfigMaps, phoenixConfigMap("old", "30"))
			done := startAwaitDeleted(fakeCluster(api), phoenixConfigMap("old", "7"), 500*time.Millisecond)
			call := api.nextWatch(t)
			if call.opts.ResourceVersion != "30" || call.opts.FieldSelector != "metadata.name=phoenix" {
				t.Fatalf("watch %+v, want from the read's resourceVersion 30 on metadata.name=phoenix", call.opts)
			}
			tc.event(call.w)
			select {
			case err := <-done:
				if tc.ends && err != nil {
					t.Fatal(err)
				}
				if !tc.ends && (err == nil || !strings.Contains(err.Error(), "Timed out waiting for deletion")) {
					t.Fatalf("got %v, want a timeout", err)
				}
			case <-time.After(3 * time.Second):
				t.Fatal("still waiting 3 s later")
			}
		})
	}
}

// TestAwaitDeletedWhenAlreadyGone: nothing to watch when the first read finds no object, or
// another one.
func TestAwaitDeletedWhenAlreadyGone(t *testing.T) {
	api := newFakeAPI()
	if err := <-startAwaitDeleted(fakeCluster(api), phoenixConfigMap("old", "7"), time.Minute); err != nil {
		t.Fatal(err)
	}
	api.put(gvrConfigMaps, phoenixConfigMap("new", "30"))
	if err := <-startAwaitDeleted(fakeCluster(api), phoenixConfigMap("old", "7"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if len(api.watches) != 0 {
		t.Errorf("%d watches started", len(api.watches))
	}
}
