// Command simpool plays the simulated cloud's node pools on the local cluster: for every
// SimulatedNodePool (crd.yaml, kind and names in components/cluster/simapi) it makes the pool's
// Nodes, keeps them at the pool's shape and size, and reports the pool Ready once all of them
// exist and kwok (which plays their kubelets) reports them Ready. The nodes are owned by their
// pool, so deleting the pool deletes them (the garbage collector, foreground under Pulumi).
//
// Why: a stack on the simulated cloud used to register one Pulumi resource per Node, so a
// 4096-rank stack carried 513 Node resources whose state the file backend rewrote after every
// step (bench/scale). A cloud's node pool is one resource whose nodes the cloud makes; a pool
// object with this controller is the same shape on the simulated cloud.
//
// It is test-bed infrastructure, like kwok: testbed/cluster/cluster.sh starts it with the cluster,
// inside the cluster's network namespace, and installs nothing else. It installs its
// CustomResourceDefinition itself when it starts (server-side apply, idempotent).
//
//	simpool -kubeconfig FILE [-qps 200] [-burst 400] [-workers 16]
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os/signal"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kolotoc/components/cluster/simapi"
)

//go:embed crd.yaml
var crdYAML []byte

var (
	gvrPools = schema.GroupVersionResource{Group: simapi.Group, Version: simapi.Version, Resource: simapi.Resource}
	gvrCRDs  = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the local cluster (required)")
	qps := flag.Float64("qps", 200, "API requests per second (the controller-manager's own limit on this test bed)")
	burst := flag.Int("burst", 400, "API request burst")
	workers := flag.Int("workers", 16, "node requests in flight at once")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	if *kubeconfig == "" {
		log.Fatal("simpool: -kubeconfig is required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("simpool: %v", err)
	}
	cfg.QPS, cfg.Burst, cfg.UserAgent = float32(*qps), *burst, simapi.FieldManager
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := &controller{
		kube:    kubernetes.NewForConfigOrDie(cfg),
		dyn:     dynamic.NewForConfigOrDie(cfg),
		workers: *workers,
		kick:    make(chan struct{}, 1),
	}
	if err := c.run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Fatalf("simpool: %v", err)
	}
}

type controller struct {
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	workers int
	pools   cache.GenericLister
	nodes   corelisters.NodeLister
	kick    chan struct{} // something changed: reconcile (capacity 1: bursts coalesce)
}

func (c *controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *controller) run(ctx context.Context) error {
	if err := installCRD(ctx, c.dyn); err != nil {
		return err
	}
	poolInformers := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, 0)
	nodeInformers := informers.NewSharedInformerFactory(c.kube, 0)
	poolInf := poolInformers.ForResource(gvrPools)
	nodeInf := nodeInformers.Core().V1().Nodes()
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.wake() },
		UpdateFunc: func(any, any) { c.wake() },
		DeleteFunc: func(any) { c.wake() },
	}
	if _, err := poolInf.Informer().AddEventHandler(onChange); err != nil {
		return err
	}
	if _, err := nodeInf.Informer().AddEventHandler(onChange); err != nil {
		return err
	}
	c.pools, c.nodes = poolInf.Lister(), nodeInf.Lister()
	poolInformers.Start(ctx.Done())
	nodeInformers.Start(ctx.Done())
	for gvr, ok := range poolInformers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %s did not sync", gvr.Resource)
		}
	}
	for typ, ok := range nodeInformers.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	log.Printf("simpool: watching %s", simapi.CRDName)
	resync := time.NewTicker(30 * time.Second)
	defer resync.Stop()
	c.wake()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-resync.C:
		case <-c.kick:
		}
		if err := c.reconcileAll(ctx); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Printf("simpool: %v (retrying in 1 s)", err)
			time.Sleep(time.Second)
			c.wake()
		}
		// Let a burst of events (hundreds of nodes turning Ready) become one reconcile.
		time.Sleep(50 * time.Millisecond)
	}
}

// installCRD applies crd.yaml and waits until the API server serves the kind.
func installCRD(ctx context.Context, dyn dynamic.Interface) error {
	body, err := yaml.YAMLToJSON(crdYAML)
	if err != nil {
		return fmt.Errorf("crd.yaml: %w", err)
	}
	force := true
	if _, err := dyn.Resource(gvrCRDs).Patch(ctx, simapi.CRDName, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: simapi.FieldManager, Force: &force}); err != nil {
		return fmt.Errorf("installing %s: %w", simapi.CRDName, err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		crd, err := dyn.Resource(gvrCRDs).Get(ctx, simapi.CRDName, metav1.GetOptions{})
		if err == nil && established(crd) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not Established after a minute (last error: %v)", simapi.CRDName, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func (c *controller) reconcileAll(ctx context.Context) error {
	objs, err := c.pools.List(labels.Everything())
	if err != nil {
		return err
	}
	nodes, err := c.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	byName := make(map[string]*corev1.Node, len(nodes))
	for _, n := range nodes {
		byName[n.Name] = n
	}
	var errs []error
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		p := &Pool{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", u.GetName(), err))
			continue
		}
		if p.DeletionTimestamp != nil {
			continue // the garbage collector deletes its nodes; making them again would fight it
		}
		if err := c.reconcile(ctx, p, byName); err != nil {
			errs = append(errs, fmt.Errorf("pool %s: %w", p.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (c *controller) reconcile(ctx context.Context, p *Pool, byName map[string]*corev1.Node) error {
	pl := makePlan(p, byName)
	if len(pl.apply) > 0 || len(pl.delete) > 0 {
		log.Printf("simpool: pool %s (generation %d): applying %d node(s), deleting %d", p.Name, p.Generation, len(pl.apply), len(pl.delete))
	}
	var mu sync.Mutex
	var errs []error
	fail := func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	jobs := make(chan func(), c.workers)
	var wg sync.WaitGroup
	for range c.workers {
		wg.Go(func() {
			for j := range jobs {
				j()
			}
		})
	}
	force := true
	for _, i := range pl.apply {
		n := desiredNode(p, i)
		jobs <- func() {
			body, err := applyBody(n)
			if err != nil {
				fail(err)
				return
			}
			if _, err := c.kube.CoreV1().Nodes().Patch(ctx, n.Name, types.ApplyPatchType, body,
				metav1.PatchOptions{FieldManager: simapi.FieldManager, Force: &force}); err != nil {
				fail(fmt.Errorf("node %s: %w", n.Name, err))
			}
		}
	}
	for _, name := range pl.delete {
		jobs <- func() {
			if err := c.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				fail(fmt.Errorf("node %s: %w", name, err))
			}
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}

	// The condition's transition time moves only when its status does.
	st := pl.status
	st.Conditions = append([]metav1.Condition(nil), p.Status.Conditions...)
	apimeta.SetStatusCondition(&st.Conditions, pl.status.Conditions[0])
	if sameStatus(st, p.Status) {
		return nil
	}
	body, err := json.Marshal(map[string]any{"status": st})
	if err != nil {
		return err
	}
	if _, err := c.dyn.Resource(gvrPools).Patch(ctx, p.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("status: %w", err)
	}
	if cond := pl.status.Conditions[0]; cond.Status == metav1.ConditionTrue {
		log.Printf("simpool: pool %s (generation %d): %s", p.Name, p.Generation, cond.Message)
	}
	return nil
}

// applyBody is the node's apply request: what the controller owns, without the status (the
// kubelet's, here kwok's) or the empty fields a typed object would carry.
func applyBody(n *corev1.Node) ([]byte, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	if err != nil {
		return nil, err
	}
	delete(u, "status")
	unstructured.RemoveNestedField(u, "metadata", "creationTimestamp")
	return json.Marshal(u)
}
