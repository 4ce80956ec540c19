package kubetest

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The node tier: kube-scheduler, kube-controller-manager, containerd 2.x
// and a kubelet running Pods through runc, on this machine (root, cgroup
// v1, no CAP_SYS_RESOURCE: hostNetwork Pods, images imported without a
// registry). ../shared/notes/kubernetes-test-cluster.md says why each
// setting is what it is.

// nodeBinaries are what .ci/kubernetes.sh node builds beside the control
// plane.
var nodeBinaries = []string{"kube-scheduler", "kube-controller-manager", "kubelet", "containerd",
	"containerd-shim-runc-v2", "ctr", "pause", "cni/loopback"}

// NodeMissing says why a whole node cannot run here ("" when it can).
func NodeMissing() string {
	if m := Missing(); m != "" {
		return m
	}
	dir := BinDir()
	for _, name := range nodeBinaries {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode()&0o111 == 0 {
			return fmt.Sprintf("no %s in %s: the end-to-end tier needs a real node; build it with .ci/kubernetes.sh node (about 10 minutes more) or set HOPPER_TEST_KUBERNETES", name, dir)
		}
	}
	if _, err := exec.LookPath("runc"); err != nil {
		return "no runc on PATH: the kubelet's containers run through it (Debian: apt-get install runc)"
	}
	if os.Geteuid() != 0 {
		return "not root: the kubelet and containerd mount, make cgroups and run containers"
	}
	return ""
}

// node is the node tier's processes and state.
type node struct {
	dir    string // short: containerd's socket path is bounded
	socket string
	name   string
	lock   *os.File
	procs  []*exec.Cmd // in start order
}

// StartWithNode starts a control plane and a real node, stopped (Pods,
// containers, mounts and cgroups removed) when the test ends; the test
// skips when the node tier is not built or cannot run here. One node runs
// on a machine at a time: a second test waits for the first to end.
func StartWithNode(t testing.TB) *Cluster {
	t.Helper()
	if m := NodeMissing(); m != "" {
		t.Skip(m)
	}
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "hopper-kubetest-node.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("waiting for the node lock: %v", err)
	}
	c := Start(t)
	dir, err := os.MkdirTemp("", "kn")
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	n := &node{dir: dir, socket: filepath.Join(dir, "containerd.sock"), name: strings.ToLower(host), lock: lock}
	c.node = n
	t.Cleanup(func() { n.stop(t) })
	if err := n.start(t, c); err != nil {
		t.Fatalf("starting the node: %v", err)
	}
	return c
}

func (n *node) start(t testing.TB, c *Cluster) error {
	bin := BinDir()
	admin := c.Kubeconfig(t, "kubetest-admin", "system:masters")
	kubelet := c.Kubeconfig(t, "system:node:"+n.name, "system:nodes", "system:masters")
	ca := filepath.Join(n.dir, "ca.crt")
	cni := filepath.Join(n.dir, "cni")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return err
	}
	for path, data := range map[string]string{
		ca: string(c.Config.CAData),
		filepath.Join(cni, "10-loopback.conflist"): `{"cniVersion": "1.0.0", "name": "loopback", "plugins": [{"type": "loopback"}]}`,
		filepath.Join(n.dir, "containerd.toml"): fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[4]q]
    conf_dir = %[5]q
[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = "hopper.test/pause:1"
`, filepath.Join(n.dir, "containerd"), filepath.Join(n.dir, "containerd-state"), n.socket, filepath.Join(bin, "cni"), cni),
		filepath.Join(n.dir, "kubelet.yaml"): fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: %d
readOnlyPort: 0
healthzPort: 0
failCgroupV1: false
failSwapOn: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
authentication: {anonymous: {enabled: false}, webhook: {enabled: false}, x509: {clientCAFile: %s}}
authorization: {mode: AlwaysAllow}
evictionHard: {memory.available: 50Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
`, freePort(t), n.socket, filepath.Join(n.dir, "pod-logs"), ca),
	} {
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			return err
		}
	}
	env := append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if err := n.run(t, env, "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := n.waitFor(func() bool {
		return exec.Command(filepath.Join(bin, "ctr"), "--address", n.socket, "version").Run() == nil
	}, time.Minute); err != nil {
		return fmt.Errorf("containerd did not answer: %w", err)
	}
	pause, err := os.ReadFile(filepath.Join(bin, "pause"))
	if err != nil {
		return err
	}
	layer, err := FileLayer("pause", pause)
	if err != nil {
		return err
	}
	if err := c.ImportImage("hopper.test/pause:1", layer, []string{"/pause"}); err != nil {
		return err
	}
	serve := func(name string) []string {
		return []string{name, "--kubeconfig", admin, "--authentication-kubeconfig", admin, "--authorization-kubeconfig", admin,
			"--leader-elect=false", "--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(freePort(t))}
	}
	if err := n.run(t, env, serve("kube-scheduler")...); err != nil {
		return err
	}
	if err := n.run(t, env, append(serve("kube-controller-manager"), "--use-service-account-credentials=false")...); err != nil {
		return err
	}
	if err := n.run(t, env, "kubelet", "--config", filepath.Join(n.dir, "kubelet.yaml"), "--kubeconfig", kubelet,
		"--root-dir", filepath.Join(n.dir, "kubelet"), "--cert-dir", filepath.Join(n.dir, "kubelet-pki")); err != nil {
		return err
	}
	return n.waitFor(func() bool {
		nd, err := c.Client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		return slices.ContainsFunc(nd.Status.Conditions, func(cd corev1.NodeCondition) bool {
			return cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue
		})
	}, 3*time.Minute)
}

// run starts one of the node's processes, its output in the node's
// directory (the test's log shows it when the test fails).
func (n *node) run(t testing.TB, env []string, args ...string) error {
	log, err := os.Create(filepath.Join(n.dir, args[0]+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(BinDir(), args[0]), args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", args[0], err)
	}
	n.procs = append(n.procs, cmd)
	return nil
}

func (n *node) waitFor(ok func() bool, within time.Duration) error {
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %s (logs in %s)", within, n.dir)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}

// stop ends the kubelet and what it ran: the containers (through ctr:
// the kubelet no longer runs to delete them), then the other processes,
// the kubelet's mounts and the Pods' cgroups.
func (n *node) stop(t testing.TB) {
	defer n.lock.Close()
	if t.Failed() {
		for _, p := range n.procs {
			name := filepath.Base(p.Path)
			if out, err := os.ReadFile(filepath.Join(n.dir, name+".log")); err == nil {
				t.Logf("%s's log (last 4 KiB):\n%s", name, tail(out, 4096))
			}
		}
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		if filepath.Base(p.Path) == "containerd" {
			n.removeContainers(t)
		}
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	unmountUnder(t, n.dir)
	removeCgroups(t, "kubepods")
	if err := os.RemoveAll(n.dir); err != nil {
		t.Logf("removing the node's directory: %v", err)
	}
}

// removeContainers kills and deletes every container of the kubelet's
// namespace.
func (n *node) removeContainers(t testing.TB) {
	ctr := func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(BinDir(), "ctr"), append([]string{"--address", n.socket, "--namespace", "k8s.io"}, args...)...).CombinedOutput()
		return string(out), err
	}
	// The ids alone: ctr warns on stderr (cgroup v1 is deprecated).
	list, err := exec.Command(filepath.Join(BinDir(), "ctr"), "--address", n.socket, "--namespace", "k8s.io", "containers", "list", "--quiet").Output()
	if err != nil {
		t.Logf("listing the node's containers: %v", err)
		return
	}
	for _, id := range strings.Fields(string(list)) {
		_, _ = ctr("tasks", "kill", "--signal", "SIGKILL", id)
		_, _ = ctr("tasks", "delete", "--force", id)
		if out, err := ctr("containers", "delete", id); err != nil {
			t.Logf("deleting container %s: %v: %s", id, err, out)
		}
	}
}

// unmountUnder unmounts every mount below dir, deepest first.
func unmountUnder(t testing.TB, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Logf("reading the mounts: %v", err)
		return
	}
	var mounts []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	f.Close()
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil {
			t.Logf("unmounting %s: %v", mounts[i], err)
		}
	}
}

// removeCgroups removes the named cgroup, children first, from every
// cgroup v1 hierarchy.
func removeCgroups(t testing.TB, name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/" + name)
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !os.IsNotExist(err) {
				t.Logf("removing cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
