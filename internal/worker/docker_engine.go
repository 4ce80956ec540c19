package worker

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
	"github.com/hopper-ci/hopper/internal/worker/tcproxy"
)

// Labels put on every task container, so that a restarted worker finds
// the containers of its previous life.
const (
	labelWorker = "org.hopper-ci.worker"
	labelTask   = "org.hopper-ci.task"
)

// dockerDevice is how a capabilities.devices entry reaches the container.
type dockerDevice struct {
	device string // a host device node passed through, or
	bind   string // a host path bind-mounted at the same place
}

// dockerDevices are the devices docker-worker knew, as this worker maps
// them: the host must already have them (loopback devices come from the
// v4l2loopback and snd-aloop kernel modules).
var dockerDevices = map[string]dockerDevice{
	"kvm":              {device: "/dev/kvm"},
	"hostSharedMemory": {bind: "/dev/shm"},
	"loopbackVideo":    {device: "/dev/video0"},
	"loopbackAudio":    {device: "/dev/snd"},
}

// dockerEngine runs docker-worker payloads in containers of one daemon.
type dockerEngine struct {
	cfg    *Config
	client *dockerapi.Client
	// network is the containers' network mode, settled by recover before
	// the first claim.
	network string
}

func newDockerEngine(cfg *Config) (*dockerEngine, error) {
	c, err := dockerapi.New(cfg.Docker.Host)
	if err != nil {
		return nil, err
	}
	return &dockerEngine{cfg: cfg, client: c}, nil
}

func (e *dockerEngine) headerName() string { return "docker" }

func (e *dockerEngine) workerLabel() string { return e.cfg.WorkerGroup + "/" + e.cfg.WorkerID }

// recover checks that the daemon answers and removes every container a
// previous life of this worker (same workerGroup/workerId) left behind: a
// worker killed with SIGKILL could not stop them, and the queue has since
// retried their tasks elsewhere.
func (e *dockerEngine) recover(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := e.client.Version(ctx); err != nil {
		return fmt.Errorf("the Docker daemon at %s does not answer: %w", e.cfg.Docker.Host, err)
	}
	e.network = e.cfg.Docker.Network
	if e.network == "" || e.network == "bridge" {
		_, err := e.client.NetworkGateway(ctx, "bridge")
		switch {
		case err == nil:
			e.network = "bridge"
		case e.network == "" && dockerapi.IsNotFound(err):
			// A daemon started with --bridge=none: containers get no
			// network rather than failing to start.
			e.network = "none"
		default:
			return fmt.Errorf("docker.network bridge: the daemon's bridge network is unusable (dockerd --bridge=none? use host or none): %w", err)
		}
	}
	left, err := e.client.ListContainers(ctx, labelWorker, e.workerLabel())
	if err != nil {
		return fmt.Errorf("listing containers left by a previous run of this worker: %w", err)
	}
	for _, c := range left {
		if err := e.client.RemoveContainer(ctx, c.ID); err != nil {
			return fmt.Errorf("removing container %s (task %s) left by a previous run of this worker: %w", c.ID, c.Labels[labelTask], err)
		}
	}
	return nil
}

// dockerTask is one run of a docker-worker payload.
type dockerTask struct {
	e  *dockerEngine
	r  *taskRun
	pl *payload.DockerPayload

	image       string   // local reference of the image to run
	binds       []string // caches and volume artifacts
	volumes     map[string]string
	extraHosts  []string
	proxyURL    string
	containerID string
	exitCode    int
}

// prepare validates the payload (docs/contract/worker.md §6.2 rows 5–8 for docker-worker
// payloads): schema, refused features, scopes and worker permissions, then
// live log, proxy, image and caches.
func (e *dockerEngine) prepare(r *taskRun) engineTask {
	raw := r.claim.Task.Payload
	r.logs = payload.DockerLogs(raw)
	r.backing = true
	pl, problems := r.w.validator.ParseDocker(raw)
	if len(problems) > 0 {
		r.log.Errorf("The task payload is invalid for this worker (docker-worker format):")
		for _, p := range problems {
			r.log.Errorf("  - %s", p)
		}
		r.record(malformed("The payload failed validation (%d problem(s), listed above).", len(problems)))
		return nil
	}
	r.logs, r.backing = payload.Logs{Live: pl.Log, Backing: payload.BackingLogName(pl.Log)}, pl.Features.BulkLog
	t := &dockerTask{e: e, r: r, pl: pl, volumes: map[string]string{}}
	if bad := t.check(); len(bad) > 0 {
		for _, b := range bad {
			r.log.Errorf("%s", b)
		}
		r.record(malformed("The task cannot run on this worker (%d problem(s), listed above).", len(bad)))
		return t
	}
	if pl.Features.LocalLiveLog && boolOr(e.cfg.EnableLiveLog, true) {
		r.liveLog = true
		r.startLiveLog(pl.MaxRunTime)
	}
	if pl.Features.TaskclusterProxy {
		if err := t.startProxy(); err != nil {
			r.record(internalError("Could not start the taskcluster proxy: %v", err))
			return t
		}
	}
	if re := t.ensureImage(); re != nil {
		if r.aborting() {
			r.record(runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Worker is shutting down; task aborted while preparing its image."})
			return t
		}
		r.record(*re)
		return t
	}
	if err := t.mountCaches(); err != nil {
		r.record(internalError("Preparing caches: %v", err))
	}
	return t
}

// anyScope reports whether the task's scopes satisfy one of required.
func (t *dockerTask) anyScope(required ...string) bool {
	for _, s := range required {
		if scopeSatisfied(t.r.claim.Task.Scopes, s) {
			return true
		}
	}
	return false
}

// check lists every reason the payload cannot run here, each naming the
// field; docker-worker's scope forms are accepted, with or without the
// worker pool suffix.
func (t *dockerTask) check() []string {
	cfg, pl, task := t.e.cfg, t.pl, &t.r.claim.Task
	pool := cfg.TaskQueueID
	var bad []string
	if pl.MaxRunTime > cfg.MaxTaskRunTime {
		bad = append(bad, fmt.Sprintf("payload.maxRunTime %d exceeds this worker pool's maximum of %d seconds", pl.MaxRunTime, cfg.MaxTaskRunTime))
	}
	if pl.Features.ChainOfTrust {
		bad = append(bad, "payload.features.chainOfTrust: chain-of-trust artifacts are not supported by this worker")
	}
	if pl.Capabilities.DisableSeccomp {
		bad = append(bad, "payload.capabilities.disableSeccomp: running without a seccomp profile is not supported (docker-worker dropped it too)")
	}
	if pl.Features.TaskclusterProxy {
		switch {
		case !boolOr(cfg.EnableTaskclusterProxy, true):
			bad = append(bad, fmt.Sprintf("payload.features.taskclusterProxy is requested but the taskcluster proxy is disabled on worker pool %s", pool))
		case t.e.network == "none":
			bad = append(bad, fmt.Sprintf("payload.features.taskclusterProxy: containers of worker pool %s have no network, so the proxy cannot be reached", pool))
		}
	}
	if pl.Features.AllowPtrace && !t.anyScope("docker-worker:feature:allowPtrace") {
		bad = append(bad, fmt.Sprintf("payload.features.allowPtrace requires scope docker-worker:feature:allowPtrace, but task.scopes are %q", task.Scopes))
	}
	if pl.Capabilities.Privileged {
		if !t.anyScope("docker-worker:capability:privileged", "docker-worker:capability:privileged:"+pool) {
			bad = append(bad, fmt.Sprintf("payload.capabilities.privileged requires scope docker-worker:capability:privileged (or docker-worker:capability:privileged:%s), but task.scopes are %q", pool, task.Scopes))
		} else if !cfg.Docker.AllowPrivileged {
			bad = append(bad, fmt.Sprintf("payload.capabilities.privileged: worker pool %s does not allow privileged containers", pool))
		}
	}
	for _, d := range pl.Capabilities.RequestedDevices() {
		scope := "docker-worker:capability:device:" + d
		switch {
		case !t.anyScope(scope, scope+":"+pool):
			bad = append(bad, fmt.Sprintf("payload.capabilities.devices.%s requires scope %s (or %s:%s), but task.scopes are %q", d, scope, scope, pool, task.Scopes))
		case !slices.Contains(cfg.Docker.AllowedDevices, d):
			bad = append(bad, fmt.Sprintf("payload.capabilities.devices.%s: worker pool %s does not offer this device", d, pool))
		default:
			dev := dockerDevices[d]
			if _, err := os.Stat(dev.device + dev.bind); err != nil {
				bad = append(bad, fmt.Sprintf("payload.capabilities.devices.%s: the device is missing on this worker: %v", d, err))
			}
		}
	}
	for _, name := range sortedKeys(pl.Cache) {
		scope := "docker-worker:cache:" + name
		if !t.anyScope(scope, scope+":"+pool) {
			bad = append(bad, fmt.Sprintf("payload.cache[%q] requires scope %s (or %s:%s), but task.scopes are %q", name, scope, scope, pool, task.Scopes))
		}
	}
	for _, name := range sortedKeys(pl.Artifacts) {
		bad = append(bad, artifactExpiryProblems(fmt.Sprintf("payload.artifacts[%q]", name), pl.Artifacts[name].Expires, task)...)
	}
	if img := pl.Image; (img.Type == payload.ImageRegistry || img.Type == payload.ImageNamed) && !imageRefRE.MatchString(img.Name) {
		bad = append(bad, fmt.Sprintf("payload.image: %q is not an image reference (name[:tag][@digest])", img.Name))
	}
	if img := pl.Image; img.Type == payload.ImageTask || img.Type == payload.ImageIndexed {
		if !strings.HasPrefix(strings.TrimPrefix(img.Path, "/"), "public/") && !t.anyScope("queue:get-artifact:"+img.Path) {
			bad = append(bad, fmt.Sprintf("payload.image: the private image artifact %s requires scope queue:get-artifact:%s in task.scopes", img.Path, img.Path))
		}
	}
	return bad
}

// imageRefRE is the character set of image references; anything else
// could not name an image and would not be safe in the daemon's URL paths.
var imageRefRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._/:@-]{0,511}$`)

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// startProxy starts the run's taskcluster proxy where the container finds
// it under docker-worker's address, http://taskcluster (port 80), by an
// /etc/hosts entry. With host networking every run gets its own loopback
// address; on the bridge the proxy listens on the bridge's gateway. When
// port 80 cannot be had (worker not root, port taken) the proxy takes an
// ephemeral port and TASKCLUSTER_PROXY_URL carries it.
func (t *dockerTask) startProxy() error {
	ip := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
	if t.e.network == "bridge" {
		ctx, cancel := context.WithTimeout(t.r.workCtx, 30*time.Second)
		gw, err := t.e.client.NetworkGateway(ctx, "bridge")
		cancel()
		if err != nil {
			return fmt.Errorf("finding the docker bridge's gateway: %w", err)
		}
		ip = gw
	}
	err := t.r.startProxy(tcproxy.Options{BindAddress: ip, Port: 80})
	if err != nil {
		t.r.log.Warnf("Taskcluster proxy cannot listen on %s:80 (%v); using an ephemeral port", ip, err)
		if err = t.r.startProxy(tcproxy.Options{BindAddress: ip}); err != nil {
			return err
		}
	}
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(t.r.proxy.URL(), "http://"))
	t.proxyURL = "http://taskcluster"
	if port != "80" {
		t.proxyURL += ":" + port
	}
	t.extraHosts = append(t.extraHosts, "taskcluster:"+ip)
	return nil
}

// mountCaches takes one pooled directory per payload.cache entry and
// bind-mounts it at its mount point; entries return to the pool (or are
// purged) in taskRun.cleanup, like the process engine's writable caches.
func (t *dockerTask) mountCaches() error {
	for _, name := range sortedKeys(t.pl.Cache) {
		entry, fresh, err := t.r.w.caches.acquire(name)
		if err != nil {
			return err
		}
		t.r.caches = append(t.r.caches, &mountedCache{name: name, entry: entry, target: entry})
		t.binds = append(t.binds, entry+":"+t.pl.Cache[name])
		if fresh {
			t.r.log.Infof("Created cache %q, mounted at %s", name, t.pl.Cache[name])
		} else {
			t.r.log.Infof("Reusing cache %q, mounted at %s", name, t.pl.Cache[name])
		}
	}
	return nil
}
