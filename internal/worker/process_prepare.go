package worker

import (
	"encoding/json"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
	"github.com/hopper-ci/hopper/internal/worker/tcproxy"
)

// rawFeatureRequested reports whether the raw payload explicitly sets
// features.<name> to true (features that default to on are only an error
// on a worker that disables them when asked for explicitly).
func rawFeatureRequested(raw json.RawMessage, name string) bool {
	var loose struct {
		Features map[string]any `json:"features"`
	}
	if json.Unmarshal(raw, &loose) != nil {
		return false
	}
	v, _ := loose.Features[name].(bool)
	return v
}

// prepare validates the payload and sets up features and mounts
// (docs/contract/worker.md §6.2 rows 5–8). Problems are recorded, not returned.
func (r *taskRun) prepare() {
	raw := r.claim.Task.Payload
	r.logs, r.backing = payload.DefaultLogsOnly(raw)
	pl, problems := r.w.validator.Parse(raw)
	if len(problems) > 0 {
		r.log.Errorf("The task payload is invalid for this worker (generic-worker native posix format):")
		for _, p := range problems {
			r.log.Errorf("  - %s", p)
		}
		r.record(malformed("The payload failed validation (%d problem(s), listed above).", len(problems)))
		return
	}
	r.pl, r.logs, r.backing = pl, pl.Logs, pl.Features.BackingLog
	cfg := &r.w.cfg
	task := &r.claim.Task
	var bad []string
	if rawFeatureRequested(raw, "liveLog") && !boolOr(cfg.EnableLiveLog, true) {
		bad = append(bad, fmt.Sprintf("features.liveLog is requested but the live log feature is disabled on worker pool %s", cfg.TaskQueueID))
	}
	if pl.Features.TaskclusterProxy && !boolOr(cfg.EnableTaskclusterProxy, true) {
		bad = append(bad, fmt.Sprintf("features.taskclusterProxy is requested but the taskcluster proxy is disabled on worker pool %s", cfg.TaskQueueID))
	}
	if len(pl.Mounts) > 0 && !boolOr(cfg.EnableMounts, true) {
		bad = append(bad, fmt.Sprintf("payload.mounts is used but mounts are disabled on worker pool %s", cfg.TaskQueueID))
	}
	for name, on := range map[string]bool{
		"loopbackVideo": pl.Features.LoopbackVideo, "loopbackAudio": pl.Features.LoopbackAudio} {
		if on {
			bad = append(bad, fmt.Sprintf("features.%s is not supported by this worker", name))
		}
	}
	if pl.TaskclusterProxyInterface != "localhost" {
		bad = append(bad, fmt.Sprintf("taskclusterProxyInterface %q is not supported by this worker (only \"localhost\")", pl.TaskclusterProxyInterface))
	}
	if pl.MaxRunTime > cfg.MaxTaskRunTime {
		bad = append(bad, fmt.Sprintf("payload.maxRunTime %d exceeds this worker pool's maximum of %d seconds", pl.MaxRunTime, cfg.MaxTaskRunTime))
	}
	for i, a := range pl.Artifacts {
		bad = append(bad, artifactExpiryProblems(fmt.Sprintf("payload.artifacts[%d]", i), a.Expires, task)...)
	}
	bad = append(bad, checkOSGroups(pl.OSGroups)...)
	bad = append(bad, r.checkMounts()...)
	if len(bad) > 0 {
		for _, b := range bad {
			r.log.Errorf("%s", b)
		}
		r.record(malformed("The task cannot run on this worker (%d problem(s), listed above).", len(bad)))
		return
	}
	if pl.Features.LiveLog && boolOr(cfg.EnableLiveLog, true) {
		r.liveLog = true
		r.startLiveLog(pl.MaxRunTime)
	}
	if pl.Features.TaskclusterProxy {
		if err := r.startProxy(tcproxy.Options{}); err != nil {
			r.record(internalError("Could not start the taskcluster proxy: %v", err))
			return
		}
	}
	if e := r.applyMounts(); e != nil {
		if r.aborting() {
			r.record(runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Worker is shutting down; task aborted while preparing mounts."})
			return
		}
		r.record(*e)
	}
}

// checkOSGroups allows only groups the worker's own user already has (the
// insecure engine runs tasks as that user).
func checkOSGroups(groups []string) []string {
	if len(groups) == 0 {
		return nil
	}
	have := map[string]bool{}
	if u, err := user.Current(); err == nil {
		if ids, err := u.GroupIds(); err == nil {
			for _, id := range ids {
				have[id] = true
				if g, err := user.LookupGroupId(id); err == nil {
					have[g.Name] = true
				}
			}
		}
	}
	var bad []string
	for _, g := range groups {
		if !have[g] {
			bad = append(bad, fmt.Sprintf("payload.osGroups: the worker's user is not in group %q, and this (insecure) worker cannot add it", g))
		}
	}
	return bad
}

// taskEnv builds the command environment (docs/contract/worker.md §2.2): the worker's
// environment without any of its secrets, overlaid with payload.env, then
// the forced variables.
func (r *taskRun) taskEnv() []string {
	secret := r.w.cfg.Credentials.AccessToken
	drop := map[string]bool{"TASKCLUSTER_ACCESS_TOKEN": true, "TASKCLUSTER_CLIENT_ID": true, "TASKCLUSTER_CERTIFICATE": true}
	env := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := env[k]; !ok {
			order = append(order, k)
		}
		env[k] = v
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if drop[k] || secret != "" && strings.Contains(v, secret) ||
			r.w.cfg.Credentials.Certificate != "" && strings.Contains(v, r.w.cfg.Credentials.Certificate) {
			continue
		}
		set(k, v)
	}
	for k, v := range r.pl.Env {
		set(k, v)
	}
	set("TASK_ID", r.claim.TaskID)
	set("RUN_ID", strconv.Itoa(r.claim.RunID))
	set("TASK_WORKDIR", r.dir)
	set("TASK_GROUP_ID", r.claim.Task.TaskGroupID)
	set("TASKCLUSTER_ROOT_URL", r.w.cfg.RootURL)
	if r.w.cfg.WorkerLocation != "" {
		set("TASKCLUSTER_WORKER_LOCATION", r.w.cfg.WorkerLocation)
	}
	if r.w.cfg.InstanceType != "" {
		set("TASKCLUSTER_INSTANCE_TYPE", r.w.cfg.InstanceType)
	}
	if r.proxy != nil {
		set("TASKCLUSTER_PROXY_URL", r.proxy.URL())
	}
	if u := r.box.User(); u != nil {
		set("HOME", u.Home)
		set("USER", u.Name)
		set("LOGNAME", u.Name)
		set("TMPDIR", u.Tmp)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+env[k])
	}
	return out
}
