package kubetest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// Node plays a kubelet for the Pods of one namespace, as test code: for
// each new Pod it asks the cluster for the service-account token the
// kubelet would project (TokenRequest, for the audience the Pod's
// projected volume names, bound to the Pod), runs the container's command
// as a local process with the Pod's environment and the token in a file,
// and reports the Pod Running, then Succeeded or Failed with the exit
// code. A deleted Pod's process is sent SIGTERM, as the kubelet does.
type Node struct {
	c         *Cluster
	namespace string
	dir       string
	// rewrite turns a container command into the local one (the image's
	// /hopper into the test's binary).
	rewrite func([]string) []string
	// run says whether to run a Pod (false: the test sets its status).
	run func(*corev1.Pod) bool

	mu    sync.Mutex
	procs map[string]*exec.Cmd // by Pod name
	wg    sync.WaitGroup
}

// NodeOptions configure a Node.
type NodeOptions struct {
	// Rewrite maps a container's command to a local command line.
	Rewrite func([]string) []string
	// Run, if set, chooses the Pods the node runs; the others stay Pending
	// for the test to settle.
	Run func(*corev1.Pod) bool
}

// StartNode starts playing the node for a namespace until the test ends.
func (c *Cluster) StartNode(t testing.TB, namespace string, opts NodeOptions) *Node {
	t.Helper()
	n := &Node{c: c, namespace: namespace, dir: t.TempDir(), rewrite: opts.Rewrite, run: opts.Run, procs: map[string]*exec.Cmd{}}
	if n.rewrite == nil {
		n.rewrite = func(cmd []string) []string { return cmd }
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil {
				if n.run == nil || n.run(p) {
					n.start(ctx, t, p)
				}
			}
		},
		UpdateFunc: func(_, obj any) {
			if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
				n.Kill(p.Name, syscall.SIGTERM)
			}
		},
		DeleteFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				n.Kill(p.Name, syscall.SIGTERM)
			} else if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if p, ok := d.Obj.(*corev1.Pod); ok {
					n.Kill(p.Name, syscall.SIGTERM)
				}
			}
		},
	})
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		n.mu.Lock()
		for name := range n.procs {
			if p := n.procs[name].Process; p != nil {
				_ = p.Signal(syscall.SIGKILL)
			}
		}
		n.mu.Unlock()
		n.wg.Wait()
		factory.Shutdown()
	})
	return n
}

// Token asks the cluster for the token the kubelet would project into the
// Pod: its service account's, for the audience of its projected volume,
// bound to the Pod.
func (c *Cluster) Token(ctx context.Context, p *corev1.Pod) (string, error) {
	audience := ""
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ServiceAccountToken != nil {
				audience = s.ServiceAccountToken.Audience
			}
		}
	}
	sa := p.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(p.Namespace).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: &expiry,
		BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

func (n *Node) start(ctx context.Context, t testing.TB, p *corev1.Pod) {
	token, err := n.c.Token(ctx, p)
	if err != nil {
		t.Logf("node: token for Pod %s: %v", p.Name, err)
		return
	}
	dir := filepath.Join(n.dir, p.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Logf("node: %v", err)
		return
	}
	c := p.Spec.Containers[0]
	env := os.Environ()
	for _, e := range c.Env {
		v := e.Value
		for _, m := range c.VolumeMounts {
			if filepath.Dir(v) == m.MountPath {
				v = filepath.Join(dir, filepath.Base(v))
			}
		}
		env = append(env, e.Name+"="+v)
	}
	if err := os.WriteFile(filepath.Join(dir, "token"), []byte(token), 0o600); err != nil {
		t.Logf("node: %v", err)
		return
	}
	args := n.rewrite(append(append([]string{}, c.Command...), c.Args...))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	log, err := os.Create(filepath.Join(dir, "log"))
	if err != nil {
		t.Logf("node: %v", err)
		return
	}
	cmd.Stdout, cmd.Stderr = log, log
	n.mu.Lock()
	if _, dup := n.procs[p.Name]; dup {
		n.mu.Unlock()
		return
	}
	if err := cmd.Start(); err != nil {
		n.mu.Unlock()
		n.setStatus(ctx, p.Name, waiting("RunContainerError", err.Error()), corev1.PodPending)
		return
	}
	n.procs[p.Name] = cmd
	n.mu.Unlock()
	n.setStatus(ctx, p.Name, corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}, corev1.PodRunning)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := cmd.Wait()
		_ = log.Close()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
			if code < 0 {
				code = 137 // killed
			}
		}
		phase := corev1.PodSucceeded
		if code != 0 {
			phase = corev1.PodFailed
		}
		n.setStatus(context.Background(), p.Name, terminated(code, ""), phase)
	}()
}

// Log returns what a Pod's process wrote.
func (n *Node) Log(pod string) string {
	raw, _ := os.ReadFile(filepath.Join(n.dir, pod, "log"))
	return string(raw)
}

// Kill signals a Pod's process (a no-op for a Pod the node does not run).
func (n *Node) Kill(pod string, sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if cmd := n.procs[pod]; cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// OOMKill kills a Pod's process and reports it as the kubelet reports a
// container the kernel killed for memory.
func (n *Node) OOMKill(ctx context.Context, pod string) error {
	n.mu.Lock()
	cmd := n.procs[pod]
	delete(n.procs, pod)
	n.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
	return n.setStatus(ctx, pod, terminated(137, "OOMKilled"), corev1.PodFailed)
}

// SetWaiting reports a Pod's container waiting (ErrImagePull,
// ImagePullBackOff …), as the kubelet does for an image it cannot pull.
func (n *Node) SetWaiting(ctx context.Context, pod, reason, message string) error {
	return n.setStatus(ctx, pod, waiting(reason, message), corev1.PodPending)
}

// Evict reports the Pod failed with reason Evicted, as the kubelet does
// under node pressure, and stops its process.
func (n *Node) Evict(ctx context.Context, pod string) error {
	n.Kill(pod, syscall.SIGKILL)
	p, err := n.c.Client.CoreV1().Pods(n.namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
	_, err = n.c.Client.CoreV1().Pods(n.namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
	return err
}

func waiting(reason, message string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}
}

func terminated(code int, reason string) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(code), Reason: reason, FinishedAt: metav1.Now()}}
}

// setStatus writes a Pod's phase and its one container's state, retrying
// on conflicts; a Pod that is gone is no error.
func (n *Node) setStatus(ctx context.Context, pod string, state corev1.ContainerState, phase corev1.PodPhase) error {
	pods := n.c.Client.CoreV1().Pods(n.namespace)
	for attempt := 0; ; attempt++ {
		p, err := pods.Get(ctx, pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		p.Status.Phase = phase
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: state, Ready: state.Running != nil}}
		_, err = pods.UpdateStatus(ctx, p, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) && attempt < 10 {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}
}
