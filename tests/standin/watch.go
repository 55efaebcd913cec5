package standin

import (
	"context"
	"errors"
	"net/http"
	"sort"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// Watch timing.
const (
	// watchTimeout asks the API server to end each watch after this long; the set then watches
	// again from the last resourceVersion it saw, as client-go's reflectors do.
	watchTimeout = 5 * time.Minute
	// watchRetryMin and watchRetryMax bound the wait before listing again after a failed list or
	// watch (doubling from min to max while the failures go on).
	watchRetryMin = 100 * time.Millisecond
	watchRetryMax = 5 * time.Second
)

// watchedSet keeps an up-to-date copy of a set of objects: one resource in one namespace (or
// cluster-wide), narrowed by a label and/or field selector. It lists them, then watches them from
// the list's resourceVersion, applying every event to its copy and signalling changed. When the
// watch ends (the server's timeout, a dropped connection), it watches again from the last
// resourceVersion it saw; when that version has expired (410 Gone), or the watch fails, it lists
// again first. It is what an informer does for one await, without a shared cache.
type watchedSet struct {
	ri       dynamic.ResourceInterface
	selector metav1.ListOptions // LabelSelector and FieldSelector only
	changed  chan<- struct{}    // signalled (without blocking) after every change

	mu    sync.Mutex
	items map[string]*unstructured.Unstructured // by namespace/name
	rv    string                                // the last resourceVersion seen
}

func newWatchedSet(ri dynamic.ResourceInterface, selector metav1.ListOptions, changed chan<- struct{}) *watchedSet {
	return &watchedSet{
		ri:       ri,
		selector: metav1.ListOptions{LabelSelector: selector.LabelSelector, FieldSelector: selector.FieldSelector},
		changed:  changed,
		items:    map[string]*unstructured.Unstructured{},
	}
}

func itemKey(obj *unstructured.Unstructured) string { return obj.GetNamespace() + "/" + obj.GetName() }

func (s *watchedSet) signal() {
	select {
	case s.changed <- struct{}{}:
	default: // a signal is already pending: the next evaluation sees this change too
	}
}

// list replaces the copy with a fresh list (without signalling: the caller does when it is news).
func (s *watchedSet) list(ctx context.Context) error {
	l, err := s.ri.List(ctx, s.selector)
	if err != nil {
		return err
	}
	items := make(map[string]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		items[itemKey(&l.Items[i])] = &l.Items[i]
	}
	s.mu.Lock()
	s.items, s.rv = items, l.GetResourceVersion()
	s.mu.Unlock()
	return nil
}

// seed starts the copy from one object already read (e.g. the response of the apply that made
// it), so that the watch starts from its resourceVersion and no list is needed.
func (s *watchedSet) seed(obj *unstructured.Unstructured) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = map[string]*unstructured.Unstructured{itemKey(obj): obj}
	s.rv = obj.GetResourceVersion()
}

// objects returns the objects in the copy, sorted by namespace and name (the API server's list
// order). They are shared: callers must not change them.
func (s *watchedSet) objects() []*unstructured.Unstructured {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*unstructured.Unstructured, 0, len(s.items))
	for _, obj := range s.items {
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool { return itemKey(out[i]) < itemKey(out[j]) })
	return out
}

// unstructuredList returns the copy in the shape of a list response.
func (s *watchedSet) unstructuredList() *unstructured.UnstructuredList {
	objs := s.objects()
	l := &unstructured.UnstructuredList{Items: make([]unstructured.Unstructured, len(objs))}
	for i, obj := range objs {
		l.Items[i] = *obj
	}
	return l
}

// run keeps the copy current until ctx ends. The copy must have been listed or seeded.
func (s *watchedSet) run(ctx context.Context) {
	relist := false
	retry := watchRetryMin
	backOff := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(retry):
		}
		retry = min(2*retry, watchRetryMax)
		return true
	}
	for ctx.Err() == nil {
		if relist {
			if err := s.list(ctx); err != nil {
				if !backOff() {
					return
				}
				continue
			}
			relist = false
			s.signal() // what changed while no watch ran
		}
		s.mu.Lock()
		rv := s.rv
		s.mu.Unlock()
		timeout := int64(watchTimeout / time.Second)
		w, err := s.ri.Watch(ctx, metav1.ListOptions{
			LabelSelector:       s.selector.LabelSelector,
			FieldSelector:       s.selector.FieldSelector,
			ResourceVersion:     rv,
			AllowWatchBookmarks: true,
			TimeoutSeconds:      &timeout,
		})
		if err != nil {
			// Expired (410) or any other failure: list again, after a pause unless it expired.
			relist = true
			if !isExpired(err) && !backOff() {
				return
			}
			continue
		}
		expired, events := s.consume(ctx, w)
		if expired {
			relist = true
		}
		if events > 0 {
			retry = watchRetryMin
		} else if !expired && !backOff() {
			// A watch that ends at once without an event, again and again, must not spin.
			return
		}
	}
}

// consume applies a watch's events to the copy until the watch ends. It reports whether the copy
// must be listed again (the resourceVersion expired, or the server sent an error), and how many
// events it applied.
func (s *watchedSet) consume(ctx context.Context, w watch.Interface) (relist bool, events int) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, events
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false, events
			}
			if ev.Type == watch.Error {
				return true, events
			}
			obj, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			events++
			s.mu.Lock()
			if rv := obj.GetResourceVersion(); rv != "" {
				s.rv = rv
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				s.items[itemKey(obj)] = obj
			case watch.Deleted:
				delete(s.items, itemKey(obj))
			}
			s.mu.Unlock()
			if ev.Type != watch.Bookmark {
				s.signal()
			}
		}
	}
}

// isExpired: the resourceVersion asked for is older than the API server keeps (410 Gone).
func isExpired(err error) bool {
	if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
		return true
	}
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code == http.StatusGone
}

// watches is the set of watchedSets of one await; all signal the same channel. A set's watch
// starts only when the await has to wait (start): an object that is ready at the first look costs
// no watch.
type watches struct {
	ctx     context.Context
	changed chan struct{}
	wg      sync.WaitGroup
	lists   map[string]*watchedSet // by resource, namespace and selectors
	pending []*watchedSet          // listed or seeded, not watched yet
}

func newWatches(ctx context.Context) *watches {
	return &watches{ctx: ctx, changed: make(chan struct{}, 1), lists: map[string]*watchedSet{}}
}

// start starts the watches not started yet, each from the resourceVersion its set was listed or
// seeded at, so that no change since is missed.
func (ws *watches) start() {
	for _, s := range ws.pending {
		ws.wg.Add(1)
		go func() {
			defer ws.wg.Done()
			s.run(ws.ctx)
		}()
	}
	ws.pending = nil
}

// stop ends every watch and waits until they are over.
func (ws *watches) stop(cancel context.CancelFunc) {
	cancel()
	ws.wg.Wait()
}

// object returns a set holding obj alone, to be watched by its name from obj's resourceVersion.
func (ws *watches) object(ri dynamic.ResourceInterface, obj *unstructured.Unstructured) *watchedSet {
	s := newWatchedSet(ri, metav1.ListOptions{FieldSelector: "metadata.name=" + obj.GetName()}, ws.changed)
	s.seed(obj)
	ws.pending = append(ws.pending, s)
	return s
}

// list returns the objects of a watched list, listing them the first time (its watch then starts
// with the others').
func (ws *watches) list(ctx context.Context, key string, ri dynamic.ResourceInterface,
	opts metav1.ListOptions,
) (*unstructured.UnstructuredList, error) {
	key += "?" + opts.LabelSelector + "&" + opts.FieldSelector
	if s, ok := ws.lists[key]; ok {
		return s.unstructuredList(), nil
	}
	s := newWatchedSet(ri, opts, ws.changed)
	if err := s.list(ctx); err != nil {
		return nil, err
	}
	ws.lists[key] = s
	ws.pending = append(ws.pending, s)
	return s.unstructuredList(), nil
}
