package workerprovider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hopper-ci/hopper/internal/workermanager"
)

// KubernetesConfig is a kubernetes pool's config (schema
// worker-pool-config-kubernetes): the namespace its Pods run in and the
// template each worker's Pod is made from.
type KubernetesConfig struct {
	Namespace string      `json:"namespace"`
	Pod       PodTemplate `json:"pod"`
	// RootURL is hopper's root URL as the Pods reach it (default: the
	// server's).
	RootURL string `json:"rootUrl"`
}

// PodTemplate is what an operator says of a worker's Pod; hopper adds the
// worker's identity (environment, labels, the projected token).
type PodTemplate struct {
	Image              string              `json:"image"`
	ImagePullPolicy    string              `json:"imagePullPolicy"`
	Command            []string            `json:"command"`
	Env                map[string]string   `json:"env"`
	Resources          PodResources        `json:"resources"`
	NodeSelector       map[string]string   `json:"nodeSelector"`
	Tolerations        []corev1.Toleration `json:"tolerations"`
	ServiceAccountName string              `json:"serviceAccountName"`
	Labels             map[string]string   `json:"labels"`
	HostNetwork        bool                `json:"hostNetwork"`
	// TerminationGracePeriodSeconds is how long a deleted Pod's worker
	// has to finish (default: the cluster's, 30 s).
	TerminationGracePeriodSeconds *int64 `json:"terminationGracePeriodSeconds"`
}

// PodResources are the worker container's requests and limits
// (quantities as Kubernetes writes them: "500m", "1Gi").
type PodResources struct {
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

// ParseKubernetesConfig reads a kubernetes pool's config.
func ParseKubernetesConfig(raw json.RawMessage) (*KubernetesConfig, error) {
	var c KubernetesConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("reading the kubernetes pool config: %w", err)
	}
	if c.Namespace == "" || c.Pod.Image == "" {
		return nil, errors.New("a kubernetes pool needs a namespace and pod.image")
	}
	return &c, nil
}

// Labels and annotations on every worker Pod. The pool's id does not fit
// a label value (a slash, up to 77 characters), so the label carries its
// hash and the annotations the ids themselves.
const (
	LabelManagedBy      = "app.kubernetes.io/managed-by"
	managedBy           = "hopper"
	LabelPool           = "hopper-ci.io/worker-pool-hash"
	AnnotationPool      = "hopper-ci.io/worker-pool"
	AnnotationGroup     = "hopper-ci.io/worker-group"
	AnnotationWorkerID  = "hopper-ci.io/worker-id"
	AnnotationProvider  = "hopper-ci.io/provider"
	identityVolume      = "hopper-identity"
	identityDir         = "/var/run/secrets/hopper"
	identityTokenExpiry = 3600
)

// EnvIdentityTokenFile names the file a Pod's worker reads its projected
// service-account token from, the proof it registers with.
const EnvIdentityTokenFile = "HOPPER_WORKER_IDENTITY_TOKEN_FILE"

// PoolLabel is the value of LabelPool for a pool.
func PoolLabel(poolID string) string {
	sum := sha256.Sum256([]byte(poolID))
	return hex.EncodeToString(sum[:])[:40]
}

// PodName is the name of a worker's Pod: derived from the worker's key,
// so a Pod the provider created before a crash is found again by name
// instead of started twice, and the name in a token's pod claim says
// which worker it may register as.
func PodName(k workermanager.Key) string {
	sum := sha256.Sum256([]byte(k.String()))
	_, workerType := workermanager.SplitPoolID(k.WorkerPoolID)
	var b strings.Builder
	for _, r := range strings.ToLower(workerType) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
		if b.Len() >= 24 {
			break
		}
	}
	prefix := strings.TrimSuffix(b.String(), "-")
	if prefix == "" {
		prefix = "worker"
	}
	return "hopper-" + prefix + "-" + hex.EncodeToString(sum[:])[:16]
}

// kubernetesData is a kubernetes worker's ProviderData.
type kubernetesData struct {
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid,omitempty"`
	// recorded says the Pod was named by the worker's record, not derived
	// from its key (its start has not returned yet).
	recorded bool
}

// Kubernetes runs each worker of a pool as a Pod in the pool's namespace
// of one cluster: the one hopper runs in (its service account), or the one
// a kubeconfig names. The Pod's worker registers with a service-account
// token the kubelet projects into it, bound to the Pod, which hopper has
// the cluster check (TokenReview): no secret is ever put in a Pod.
type Kubernetes struct {
	// Audience is the audience the projected token is issued for and
	// checked against: hopper's root URL.
	Audience string
	// Wake, if set, is called when the watch sees a worker's Pod end or
	// go, so that the scanner settles it at once (internal/maintenance).
	Wake func()
	// Accounted, if set, says whether a worker is in its pool's accounting
	// (requested, running or stopping); a Pod of this hopper whose worker
	// is not is deleted when the watch sees it.
	Accounted func(ctx context.Context, k workermanager.Key) (bool, error)
	Logger    *slog.Logger

	connect func() (kubernetes.Interface, error)

	mu       sync.Mutex
	client   kubernetes.Interface
	watchers map[string]*podWatch // by namespace
}

// NewKubernetes returns the provider for the cluster a kubeconfig file
// names, or, without one, the cluster hopper runs in. The cluster is first
// reached when a pool needs it, so a hopper with no cluster still serves
// every other pool (and says why a kubernetes pool cannot start workers).
func NewKubernetes(kubeconfig, audience string) *Kubernetes {
	return &Kubernetes{Audience: audience, connect: func() (kubernetes.Interface, error) {
		var (
			cfg *rest.Config
			err error
		)
		if kubeconfig != "" {
			cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return nil, fmt.Errorf("reading the kubeconfig %s: %w", kubeconfig, err)
			}
		} else {
			cfg, err = rest.InClusterConfig()
			if err != nil {
				return nil, fmt.Errorf("no cluster: hopper serve was given no --kubeconfig and does not run in a Kubernetes Pod (%w)", err)
			}
		}
		return kubernetes.NewForConfig(cfg)
	}}
}

// NewKubernetesForClient returns the provider for a client already made.
func NewKubernetesForClient(client kubernetes.Interface, audience string) *Kubernetes {
	return &Kubernetes{Audience: audience, client: client}
}

// Client returns the cluster's client, connecting on first use.
func (k *Kubernetes) Client() (kubernetes.Interface, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.client != nil {
		return k.client, nil
	}
	if k.connect == nil {
		return nil, errors.New("no cluster configured for the kubernetes provider")
	}
	c, err := k.connect()
	if err != nil {
		return nil, err
	}
	k.client = c
	return c, nil
}

// podSpec is the Pod of a worker.
func (k *Kubernetes) podSpec(cfg *KubernetesConfig, w *workermanager.Worker, rootURL string) (*corev1.Pod, error) {
	t := cfg.Pod
	cmd := t.Command
	if len(cmd) == 0 {
		cmd = []string{"/hopper", "worker", "--worker-pool", w.WorkerPoolID, "--provider-id", w.ProviderID}
	}
	env := []corev1.EnvVar{
		{Name: EnvRootURL, Value: rootURL},
		{Name: EnvWorkerPool, Value: w.WorkerPoolID},
		{Name: EnvWorkerGroup, Value: w.WorkerGroup},
		{Name: EnvWorkerID, Value: w.WorkerID},
		{Name: EnvIdentityTokenFile, Value: identityDir + "/token"},
	}
	for _, name := range sortedKeys(t.Env) {
		env = append(env, corev1.EnvVar{Name: name, Value: t.Env[name]})
	}
	res, err := t.Resources.requirements()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{}
	for key, v := range t.Labels {
		labels[key] = v
	}
	labels[LabelManagedBy] = managedBy
	labels[LabelPool] = PoolLabel(w.WorkerPoolID)
	// A projected token needs the account named (the ServiceAccount
	// admission plugin would name "default", where it runs).
	sa := t.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	expiry := int64(identityTokenExpiry)
	noAutomount := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: PodName(w.Key()), Namespace: cfg.Namespace, Labels: labels,
			Annotations: map[string]string{AnnotationPool: w.WorkerPoolID, AnnotationGroup: w.WorkerGroup,
				AnnotationWorkerID: w.WorkerID, AnnotationProvider: w.ProviderID, AnnotationAudience: k.Audience},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			ServiceAccountName:            sa,
			AutomountServiceAccountToken:  &noAutomount,
			NodeSelector:                  t.NodeSelector,
			Tolerations:                   t.Tolerations,
			HostNetwork:                   t.HostNetwork,
			TerminationGracePeriodSeconds: t.TerminationGracePeriodSeconds,
			Containers: []corev1.Container{{
				Name: "worker", Image: t.Image, Command: cmd, Env: env, Resources: res,
				ImagePullPolicy: corev1.PullPolicy(t.ImagePullPolicy),
				VolumeMounts:    []corev1.VolumeMount{{Name: identityVolume, MountPath: identityDir, ReadOnly: true}},
			}},
			// The token the worker registers with: issued for hopper's
			// audience and bound to this Pod, so it is worth nothing once
			// the Pod is gone and cannot be used for any other worker.
			Volumes: []corev1.Volume{{Name: identityVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: k.Audience, ExpirationSeconds: &expiry, Path: "token"}}},
			}}}},
		},
	}, nil
}

func (r PodResources) requirements() (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	parse := func(in map[string]string, what string) (corev1.ResourceList, error) {
		if len(in) == 0 {
			return nil, nil
		}
		l := corev1.ResourceList{}
		for name, v := range in {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("pod.resources.%s.%s: %w", what, name, err)
			}
			l[corev1.ResourceName(name)] = q
		}
		return l, nil
	}
	var err error
	if out.Requests, err = parse(r.Requests, "requests"); err != nil {
		return out, err
	}
	out.Limits, err = parse(r.Limits, "limits")
	return out, err
}

// Start implements Provider: the worker's Pod is created in the pool's
// namespace. A Pod of the same name that is already this worker's (made
// before a crash, or by a replica that lost its lease mid-call) is adopted,
// not duplicated.
func (k *Kubernetes) Start(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker, reg Registration) (json.RawMessage, error) {
	cfg, err := ParseKubernetesConfig(pool.Config)
	if err != nil {
		return nil, err
	}
	client, err := k.Client()
	if err != nil {
		return nil, err
	}
	k.ensureWatch(cfg.Namespace)
	rootURL := cfg.RootURL
	if rootURL == "" {
		rootURL = reg.RootURL
	}
	pod, err := k.podSpec(cfg, w, rootURL)
	if err != nil {
		return nil, err
	}
	pods := client.CoreV1().Pods(cfg.Namespace)
	created, err := pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		created, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		if err == nil && !isWorkerPod(created, w) {
			return nil, fmt.Errorf("a Pod named %s/%s exists that is not worker %s's", cfg.Namespace, pod.Name, w.Key())
		}
	}
	if err != nil {
		// A call that failed may still have made the Pod (a timeout after
		// the API server stored it): remove it, so nothing runs outside
		// the pool's accounting. Where the cluster cannot be reached the
		// watch's sweep removes it later.
		if !apierrors.IsAlreadyExists(err) {
			_ = pods.Delete(context.WithoutCancel(ctx), pod.Name, metav1.DeleteOptions{})
		}
		return nil, describeAPIError(err, "creating Pod "+cfg.Namespace+"/"+pod.Name)
	}
	data, _ := json.Marshal(kubernetesData{Namespace: cfg.Namespace, Pod: created.Name, UID: string(created.UID)})
	return data, nil
}

// isWorkerPod says whether a Pod is the one the provider made for w.
func isWorkerPod(p *corev1.Pod, w *workermanager.Worker) bool {
	a := p.Annotations
	return p.Labels[LabelManagedBy] == managedBy && a[AnnotationPool] == w.WorkerPoolID &&
		a[AnnotationGroup] == w.WorkerGroup && a[AnnotationWorkerID] == w.WorkerID
}

// describeAPIError says in a pool error's words what the cluster answered.
func describeAPIError(err error, what string) error {
	switch {
	case apierrors.IsInvalid(err):
		return fmt.Errorf("%s: the cluster refused the Pod template: %w", what, err)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: hopper's service account may not do this (RBAC, or the namespace's admission): %w", what, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%s: not found (does the namespace exist?): %w", what, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: the cluster does not accept hopper's credentials: %w", what, err)
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return fmt.Errorf("%s: the cluster cannot be reached: %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// workerPodRef is where a worker's Pod is: from its ProviderData, or, for
// a worker recorded before its Pod was, from the pool's config and the
// worker's key.
func workerPodRef(pool *workermanager.Pool, w *workermanager.Worker) (kubernetesData, error) {
	var d kubernetesData
	if len(w.ProviderData) > 0 {
		if err := json.Unmarshal(w.ProviderData, &d); err != nil {
			return d, fmt.Errorf("reading worker %s's provider data: %w", w.Key(), err)
		}
	}
	d.recorded = d.Pod != ""
	if d.Pod == "" {
		cfg, err := ParseKubernetesConfig(pool.Config)
		if err != nil {
			return d, err
		}
		d.Namespace, d.Pod = cfg.Namespace, PodName(w.Key())
	}
	return d, nil
}

// Check implements Provider, from the watch's cache once it is in step
// with the cluster (a scan of a thousand running Pods then asks the API
// server nothing), else, and for a Pod the cache lacks, with a GET.
func (k *Kubernetes) Check(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) (Status, error) {
	ref, err := workerPodRef(pool, w)
	if err != nil {
		return Status{}, err
	}
	client, err := k.Client()
	if err != nil {
		return Status{}, err
	}
	k.ensureWatch(ref.Namespace)
	pod, found, cached := k.cachedPod(ref.Namespace, ref.Pod)
	// A Pod the cache lacks may be one just made that the watch has not
	// delivered yet: only the API server may say it is gone.
	if !cached || !found {
		pod, err = client.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Pod, metav1.GetOptions{})
		found = err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return Status{}, describeAPIError(err, "reading Pod "+ref.Namespace+"/"+ref.Pod)
		}
	}
	if !found && ref.UID == "" && !ref.recorded {
		// Nothing recorded and no Pod: the create may be under way (the
		// provisioner records a worker before it creates its Pod).
		return Status{NotStarted: true, Detail: "its Pod " + ref.Namespace + "/" + ref.Pod + " was not made yet"}, nil
	}
	if !found || (ref.UID != "" && string(pod.UID) != ref.UID) {
		return Status{Detail: "its Pod " + ref.Namespace + "/" + ref.Pod + " is gone (deleted or evicted)"}, nil
	}
	return podStatus(pod), nil
}

// podStatus reads a worker Pod's state.
func podStatus(pod *corev1.Pod) Status {
	name := pod.Namespace + "/" + pod.Name
	if pod.DeletionTimestamp != nil {
		return Status{Detail: "its Pod " + name + " is being deleted"}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			detail := fmt.Sprintf("its Pod %s's worker exited with status %d", name, t.ExitCode)
			if t.Reason != "" {
				detail += " (" + t.Reason + ")"
			}
			if t.Reason == "OOMKilled" {
				detail += ": killed, out of memory"
			}
			return Status{Exited: true, ExitCode: int(t.ExitCode), Detail: detail}
		}
		if wt := cs.State.Waiting; wt != nil && podCannotStart(wt.Reason) {
			return Status{Detail: fmt.Sprintf("its Pod %s cannot start: %s: %s", name, wt.Reason, wt.Message)}
		}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		detail := "its Pod " + name + " failed"
		if pod.Status.Reason != "" {
			detail += " (" + pod.Status.Reason + ")"
		}
		if pod.Status.Message != "" {
			detail += ": " + pod.Status.Message
		}
		return Status{Detail: detail}
	case corev1.PodSucceeded:
		return Status{Exited: true, Detail: "its Pod " + name + " ended"}
	}
	return Status{Running: true}
}

// podCannotStart says whether a waiting container's reason is one it
// will not get past by waiting.
func podCannotStart(reason string) bool {
	switch reason {
	case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName",
		"CreateContainerConfigError", "CreateContainerError", "RunContainerError":
		return true
	}
	return false
}

// Stop implements Provider: the Pod is deleted (its worker has the Pod's
// grace period to finish).
func (k *Kubernetes) Stop(ctx context.Context, pool *workermanager.Pool, w *workermanager.Worker) error {
	ref, err := workerPodRef(pool, w)
	if err != nil {
		return err
	}
	client, err := k.Client()
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{}
	if ref.UID != "" {
		uid := types.UID(ref.UID)
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err = client.CoreV1().Pods(ref.Namespace).Delete(ctx, ref.Pod, opts)
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return describeAPIError(err, "deleting Pod "+ref.Namespace+"/"+ref.Pod)
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for key := range m {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}
