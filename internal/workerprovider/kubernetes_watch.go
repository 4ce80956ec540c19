package workerprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// AnnotationAudience marks the hopper a worker Pod belongs to (its root
// URL, the tokens' audience), so that two hoppers sharing a namespace
// leave each other's Pods alone.
const AnnotationAudience = "hopper-ci.io/audience"

// podWatch is a watch of one namespace's worker Pods: a cache the checks
// read, and events that wake the scanner when a Pod ends or goes.
type podWatch struct {
	stop   context.CancelFunc
	lister listersv1.PodNamespaceLister
	synced cache.InformerSynced
}

// watchResync is how often the watch's cache replays every Pod to its
// handlers, so that an orphan the sweep could not delete is tried again.
const watchResync = 5 * time.Minute

// ensureWatch starts the namespace's watch once.
func (k *Kubernetes) ensureWatch(namespace string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client == nil || k.watchers[namespace] != nil {
		return
	}
	if k.watchers == nil {
		k.watchers = map[string]*podWatch{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, watchResync, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = labels.SelectorFromSet(labels.Set{LabelManagedBy: managedBy}).String()
		}))
	pods := factory.Core().V1().Pods()
	inf := pods.Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				k.settle(ctx, p)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*corev1.Pod)
			newPod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 {
				return
			}
			if podStatus(oldPod).Running && !podStatus(newPod).Running {
				k.wake()
			}
			k.settle(ctx, newPod)
		},
		DeleteFunc: func(any) { k.wake() },
	})
	w := &podWatch{stop: cancel, lister: pods.Lister().Pods(namespace), synced: inf.HasSynced}
	k.watchers[namespace] = w
	factory.Start(ctx.Done())
}

func (k *Kubernetes) wake() {
	if k.Wake != nil {
		k.Wake()
	}
}

// settle deletes a worker Pod of this hopper whose worker is out of the
// pools' accounting (stopped, or never recorded): what a crash between
// the cluster's answer and hopper's record, or a call that timed out,
// can leave behind.
func (k *Kubernetes) settle(ctx context.Context, p *corev1.Pod) {
	if k.Accounted == nil || p.DeletionTimestamp != nil || p.Annotations[AnnotationAudience] != k.Audience {
		return
	}
	key := workermanager.Key{WorkerPoolID: p.Annotations[AnnotationPool], WorkerGroup: p.Annotations[AnnotationGroup],
		WorkerID: p.Annotations[AnnotationWorkerID]}
	ok, err := k.Accounted(ctx, key)
	if err != nil || ok {
		return
	}
	uid := p.UID
	err = k.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) && k.Logger != nil {
		k.Logger.Warn("deleting a worker Pod outside the pool's accounting", "pod", p.Namespace+"/"+p.Name, "error", err)
	} else if k.Logger != nil {
		k.Logger.Info("deleted a worker Pod outside the pool's accounting", "pod", p.Namespace+"/"+p.Name, "worker", key.String())
	}
}

// cachedPod reads a Pod from the namespace's watch, once the watch has
// listed the namespace; cached is false before that.
func (k *Kubernetes) cachedPod(namespace, name string) (pod *corev1.Pod, found, cached bool) {
	k.mu.Lock()
	w := k.watchers[namespace]
	k.mu.Unlock()
	if w == nil || !w.synced() {
		return nil, false, false
	}
	p, err := w.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, false, true
	}
	if err != nil {
		return nil, false, false
	}
	return p, true, true
}

// Close stops the watches.
func (k *Kubernetes) Close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	for ns, w := range k.watchers {
		w.stop()
		delete(k.watchers, ns)
	}
}

// Synced says whether the namespace's watch has listed its Pods (its
// cache then serves the checks).
func (k *Kubernetes) Synced(namespace string) bool {
	k.mu.Lock()
	w := k.watchers[namespace]
	k.mu.Unlock()
	return w != nil && w.synced()
}
