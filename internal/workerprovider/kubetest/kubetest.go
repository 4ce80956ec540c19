// Package kubetest starts a real Kubernetes control plane for tests: etcd
// and kube-apiserver (controller-runtime's envtest on binaries built by
// .ci/kubernetes.sh), with RBAC, service-account tokens and TokenReview
// as in any cluster. No scheduler and no kubelet run: a Node plays the
// node's part, as test code, for the Pods it is told to run (their status,
// the token the kubelet would project, the container's command as a local
// process).
package kubetest

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Version is the Kubernetes release the binaries are built from.
const Version = "1.37.2"

// BinDir is where the binaries are: HOPPER_TEST_KUBERNETES, else
// .ci/kubernetes.sh's cache directory.
func BinDir() string {
	if d := os.Getenv("HOPPER_TEST_KUBERNETES"); d != "" {
		return d
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		cache = x
	}
	return filepath.Join(cache, "hopper-test", "kubernetes-v"+Version)
}

// Missing says why the control plane cannot start here ("" when it can).
func Missing() string {
	dir := BinDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Sprintf("no %s in %s: the Kubernetes provider's tests need a real control plane; build it with .ci/kubernetes.sh control-plane (about 10 minutes) or set HOPPER_TEST_KUBERNETES", name, dir)
		}
	}
	return ""
}

// Cluster is a running control plane.
type Cluster struct {
	env *envtest.Environment
	// Config and Client are the cluster administrator's.
	Config *rest.Config
	Client kubernetes.Interface
	dir    string
	// node is the real node (StartWithNode), if any.
	node *node
}

// Start starts a control plane, stopped when the test ends; the test
// skips when the binaries are missing.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if m := Missing(); m != "" {
		t.Skip(m)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: BinDir(),
		ControlPlaneStartTimeout: 3 * time.Minute, ControlPlaneStopTimeout: 15 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting the control plane: %v", err)
	}
	c := &Cluster{env: env, Config: cfg, dir: t.TempDir()}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Logf("stopping the control plane: %v", err)
		}
	})
	c.Client, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Kubeconfig writes a kubeconfig of a user of the cluster in the given
// groups (system:masters is the administrator; without groups the user may
// do only what RBAC grants it) and returns its path.
func (c *Cluster) Kubeconfig(t testing.TB, user string, groups ...string) string {
	t.Helper()
	u, err := c.env.AddUser(envtest.User{Name: user, Groups: groups}, nil)
	if err != nil {
		t.Fatalf("adding user %s: %v", user, err)
	}
	raw, err := u.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(c.dir, user+".kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Namespace creates a namespace with its default service account (the
// controller-manager, which would make it, does not run here).
func (c *Cluster) Namespace(t testing.TB, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	c.ServiceAccount(t, name, "default")
}

// ServiceAccount creates a service account.
func (c *Cluster) ServiceAccount(t testing.TB, namespace, name string) {
	t.Helper()
	_, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(context.Background(),
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	// With a node, the controller-manager makes each namespace's default
	// account itself.
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating service account %s/%s: %v", namespace, name, err)
	}
}

// Apply creates the objects of a YAML document of several (separated by
// "---"), as `kubectl create -f` would: namespaces, service accounts and
// RBAC.
func (c *Cluster) Apply(t testing.TB, doc string) {
	t.Helper()
	ctx := context.Background()
	for _, part := range strings.Split(doc, "\n---\n") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(part), nil, nil)
		if err != nil {
			t.Fatalf("decoding %q: %v", part, err)
		}
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = c.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = c.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.Client.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.Client.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("kubetest.Apply does not create %T", obj)
		}
		if err != nil {
			t.Fatalf("creating %T: %v", obj, err)
		}
	}
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as a
// service account (a token the cluster issues it, as hopper's own Pod
// would hold) and returns its path.
func (c *Cluster) ServiceAccountKubeconfig(t testing.TB, namespace, name string) string {
	t.Helper()
	expiry := int64(3 * 3600)
	tr, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(context.Background(), name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &expiry}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for %s/%s: %v", namespace, name, err)
	}
	doc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q, certificate-authority-data: %q}}]
users: [{name: %s, user: {token: %q}}]
contexts: [{name: test, context: {cluster: test, user: %s}}]
current-context: test
`, c.Config.Host, base64.StdEncoding.EncodeToString(c.Config.CAData), name, tr.Status.Token, name)
	path := filepath.Join(c.dir, namespace+"-"+name+".kubeconfig")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
