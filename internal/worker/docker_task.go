package worker

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/hopper-ci/hopper/internal/dockerapi"
	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/payload"
)

// containerEnv is the container's environment: payload.env, then the
// variables docker-worker forced (task authors cannot override them).
// Nothing of the worker's own environment, and so none of its
// credentials, reaches the container.
func (t *dockerTask) containerEnv() []string {
	cfg, c := t.e.cfg, t.r.claim
	env := map[string]string{}
	for k, v := range t.pl.Env {
		env[k] = v
	}
	env["TASK_ID"] = c.TaskID
	env["RUN_ID"] = strconv.Itoa(c.RunID)
	env["TASK_GROUP_ID"] = c.Task.TaskGroupID
	env["TASKCLUSTER_ROOT_URL"] = cfg.RootURL
	env["TASKCLUSTER_WORKER_TYPE"] = cfg.WorkerType
	env["TASKCLUSTER_WORKER_POOL"] = cfg.TaskQueueID
	env["TASKCLUSTER_WORKER_GROUP"] = cfg.WorkerGroup
	if cfg.WorkerLocation != "" {
		env["TASKCLUSTER_WORKER_LOCATION"] = cfg.WorkerLocation
	}
	if cfg.InstanceType != "" {
		env["TASKCLUSTER_INSTANCE_TYPE"] = cfg.InstanceType
	}
	if t.proxyURL != "" {
		env["TASKCLUSTER_PROXY_URL"] = t.proxyURL
	}
	out := make([]string, 0, len(env))
	for _, k := range sortedKeys(env) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// containerConfig is the container of this run: one per run, labelled so
// a restarted worker can find it, with the worker's limits.
func (t *dockerTask) containerConfig() (*dockerapi.ContainerConfig, error) {
	cfg := t.e.cfg
	hc := dockerapi.HostConfig{
		NetworkMode: t.e.network,
		Binds:       t.binds,
		Privileged:  t.pl.Capabilities.Privileged,
		ExtraHosts:  t.extraHosts,
		Memory:      cfg.Docker.MemoryMiB << 20,
		NanoCPUs:    int64(cfg.Docker.CPUs * 1e9),
	}
	if cfg.MaxTaskProcesses > 0 {
		// The same ceiling as the process engine's: a fork loop stops at
		// it instead of at the memory limit (or the machine's).
		pids := int64(cfg.MaxTaskProcesses)
		hc.PidsLimit = &pids
	}
	if t.pl.Features.AllowPtrace {
		hc.CapAdd = append(hc.CapAdd, "SYS_PTRACE")
	}
	for _, d := range t.pl.Capabilities.RequestedDevices() {
		dev := dockerDevices[d]
		if dev.device != "" {
			hc.Devices = append(hc.Devices, dockerapi.DeviceMapping{PathOnHost: dev.device, PathInContainer: dev.device, CgroupPermissions: "rwm"})
		} else {
			hc.Binds = append(hc.Binds, dev.bind+":"+dev.bind)
		}
	}
	for _, name := range sortedKeys(t.pl.Artifacts) {
		a := t.pl.Artifacts[name]
		if a.Type != "volume" {
			continue
		}
		host := filepath.Join(t.r.dir, "volumes", strconv.Itoa(len(t.volumes)))
		if err := os.MkdirAll(host, 0o777); err != nil {
			return nil, fmt.Errorf("creating volume for artifact %s: %w", name, err)
		}
		// The task's user inside the container is unknown; let it write.
		if err := os.Chmod(host, 0o777); err != nil {
			return nil, fmt.Errorf("opening volume for artifact %s: %w", name, err)
		}
		t.volumes[name] = host
		hc.Binds = append(hc.Binds, host+":"+a.Path)
	}
	return &dockerapi.ContainerConfig{
		Image:      t.image,
		Cmd:        t.pl.Command,
		Env:        t.containerEnv(),
		Labels:     map[string]string{labelWorker: t.e.workerLabel(), labelTask: fmt.Sprintf("%s/%d", t.r.claim.TaskID, t.r.claim.RunID)},
		HostConfig: hc,
	}, nil
}

// startContainer starts the created container t.containerID. A start the
// runtime failed is tried once more in a new container made from the same
// configuration (dockerapi.IsRuntimeStartFailure says why a new container
// can start where the first did not); a command the image lacks fails
// both times and is the task's failure as before.
func (t *dockerTask) startContainer(ctx context.Context, name string, cfg *dockerapi.ContainerConfig) error {
	err := t.e.client.StartContainer(ctx, t.containerID)
	if err == nil || !dockerapi.IsRuntimeStartFailure(err) {
		return err
	}
	t.r.log.Warnf("The container runtime could not start the command (%v); trying once more in a new container", err)
	if rmErr := t.e.client.RemoveContainer(ctx, t.containerID); rmErr != nil {
		t.r.logger.Error("removing a container that did not start; the next start of this worker removes it", "container", t.containerID, "error", rmErr)
	}
	t.containerID = ""
	id, cerr := t.e.client.CreateContainer(ctx, name+"-again", cfg)
	if cerr != nil {
		return fmt.Errorf("%w (and creating a new container failed: %v)", err, cerr)
	}
	t.containerID = id
	return t.e.client.StartContainer(ctx, id)
}

// run creates and starts the container, streams its output into the task
// log and waits for it; maxRunTime, a cancelled claim and an immediate
// shutdown kill it (docs/contract/worker.md §6.2 rows 9–14).
func (t *dockerTask) run() {
	r := t.r
	cfg, err := t.containerConfig()
	if err != nil {
		r.record(internalError("Preparing the container: %v", err))
		return
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	name := fmt.Sprintf("hopper-%s-%d-%s", r.claim.TaskID, r.claim.RunID, hex.EncodeToString(suffix[:]))
	if lim := cfg.HostConfig.PidsLimit; lim != nil {
		r.log.Infof("Limits: processes %d", *lim)
	}
	if len(t.pl.Command) > 0 {
		r.log.Infof("Executing command 0: %s", shellQuote(t.pl.Command))
	} else {
		r.log.Infof("Executing command 0: the image's default command")
	}
	// Daemon calls outlive the run's contexts: a container must be killed
	// and removed even when the claim was just lost.
	ctx := context.Background()
	id, err := t.e.client.CreateContainer(ctx, name, cfg)
	if err != nil {
		var de *dockerapi.Error
		if errors.As(err, &de) && de.StatusCode == http.StatusBadRequest {
			r.record(malformed("The container cannot be created from this payload: %v", err))
			return
		}
		r.record(internalError("Creating the container: %v", err))
		return
	}
	t.containerID = id
	start := time.Now()
	if err := t.startContainer(ctx, name, cfg); err != nil {
		// As in docker-worker: a command the image does not have is the
		// task's failure, not the worker's.
		r.log.Errorf("Failure to properly start execution environment: %v", err)
		res := commandResult{exitCode: -1, wall: time.Since(start), startErr: err}
		r.log.Infof("%s", containerSummary(res))
		r.record(failure("The container could not be started: %v", err))
		return
	}
	// A start tried once more runs in a new container.
	id = t.containerID
	if t.pl.Features.Interactive {
		shells := &dockerShells{t: t, container: id}
		r.startShells(shells.start)
		defer func() {
			r.closeShells()
			shells.close()
		}()
		defer func() { shells.keepAlive(cfg) }()
	}
	logsDone := make(chan struct{})
	go func() {
		defer close(logsDone)
		if err := t.e.client.FollowLogs(ctx, id, r.log); err != nil {
			r.log.Warnf("Streaming the container's output ended early: %v", err)
		}
	}()
	waited := make(chan error, 1)
	go func() {
		code, err := t.e.client.WaitContainer(ctx, id)
		t.exitCode = code
		waited <- err
	}()
	deadline := time.NewTimer(time.Duration(t.pl.MaxRunTime) * time.Second)
	defer deadline.Stop()
	res := commandResult{started: true}
	var waitErr error
	select {
	case waitErr = <-waited:
	case <-deadline.C:
		res.aborted, res.abortReason = true, "maxRunTime exceeded"
	case <-r.w.abort:
		res.aborted, res.abortReason = true, "worker shutdown"
	case <-r.claim.Lost():
		res.aborted, res.abortReason = true, "claim lost"
	}
	if res.aborted {
		if err := t.e.client.KillContainer(ctx, id); err != nil {
			r.logger.Error("killing container", "container", id, "error", err)
		}
		waitErr = <-waited
	}
	res.wall = time.Since(start)
	select {
	case <-logsDone:
	case <-time.After(5 * time.Second):
		r.log.Warnf("The container's output did not end within 5 s of its exit; the log may be incomplete")
	}
	res.exitCode = t.exitCode
	if waitErr != nil && !res.aborted {
		r.record(internalError("Waiting for the container: %v", waitErr))
		return
	}
	if !res.aborted && t.oomKilled(ctx, id, res.exitCode) {
		r.log.Errorf("The container ran out of memory (this worker pool allows %d MiB) and was killed by the kernel", t.e.cfg.Docker.MemoryMiB)
	}
	r.log.Infof("%s", containerSummary(res))
	t.conclude(res)
}

// oomKilled says whether the kernel killed the container for memory. The
// daemon learns of an OOM kill from an event that may come a moment after
// the container's exit: a container killed by SIGKILL (exit code 137) that
// the worker did not kill is looked at again for up to two seconds before
// the log calls it anything else.
func (t *dockerTask) oomKilled(ctx context.Context, id string, exitCode int) bool {
	wait := time.Duration(0)
	if exitCode == 128+9 {
		wait = 2 * time.Second
	}
	give := time.Now().Add(wait)
	for {
		st, err := t.e.client.InspectContainer(ctx, id)
		if err != nil {
			return false
		}
		if st.OOMKilled || !time.Now().Before(give) {
			return st.OOMKilled
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// containerSummary is the process engine's result block without the CPU
// times, which the worker cannot see for a container's processes.
func containerSummary(res commandResult) string {
	return fmt.Sprintf("Exit Code: %d\nWall Time: %s\nResult: %s", res.exitCode, res.wall.Round(time.Millisecond), res.verdict())
}

// conclude records the outcome of the container like runCommands does for
// the process engine; onExitStatus.purgeCaches applies to any exit code
// listed, as in docker-worker.
func (t *dockerTask) conclude(res commandResult) {
	r := t.r
	if res.aborted {
		r.purge = true
		switch res.abortReason {
		case "maxRunTime exceeded":
			r.record(runErr{failed: true, aborted: true, msg: fmt.Sprintf("Aborting task: max run time exceeded (maxRunTime %d seconds); container killed.", t.pl.MaxRunTime)})
		case "worker shutdown":
			r.record(runErr{reason: tcclient.ReasonWorkerShutdown, aborted: true, msg: "Worker is shutting down; task aborted."})
		}
		return
	}
	if slices.Contains(t.pl.OnExitStatus.PurgeCaches, res.exitCode) {
		r.log.Infof("Exit code %d is listed in onExitStatus.purgeCaches: caches of this run will be purged.", res.exitCode)
		r.purge = true
	}
	if res.exitCode == 0 {
		return
	}
	if slices.Contains(t.pl.OnExitStatus.Retry, res.exitCode) {
		r.record(runErr{reason: tcclient.ReasonIntermittentTask,
			msg: fmt.Sprintf("The container exited with code %d, listed in onExitStatus.retry: resolving as intermittent-task.", res.exitCode)})
		return
	}
	r.record(failure("The container exited with code %d.", res.exitCode))
}

// uploads copies each payload artifact out of the stopped container (or
// takes it from its volume) and lists the files to publish, sorted by
// name; missing or mistyped paths become error artifacts that fail the run.
func (t *dockerTask) uploads() []artifactUpload {
	// A container that never existed produced nothing: the run already
	// has its first error, and error artifacts would only add noise.
	if t.containerID == "" {
		return nil
	}
	// Once its artifacts are copied out the container has served; it goes
	// before the run is resolved, as in docker-worker, so a resolved run
	// never has a container left.
	defer t.removeContainer()
	if !t.pl.Features.Artifacts {
		return nil
	}
	var out []artifactUpload
	for i, name := range sortedKeys(t.pl.Artifacts) {
		a := t.pl.Artifacts[name]
		expires := t.r.claim.Task.Expires.Time
		if !a.Expires.IsZero() {
			expires = a.Expires.Time
		}
		spec := payload.Artifact{Type: a.Type, Name: name, Expires: a.Expires}
		if host, ok := t.volumes[name]; ok {
			spec.Type, spec.Path = "directory", host
			out = append(out, ExpandArtifacts("/", []payload.Artifact{spec}, expires)...)
			continue
		}
		dst := filepath.Join(t.r.tmpDir, "artifacts", strconv.Itoa(i))
		local, up := t.copyOut(name, a, dst, expires)
		if up != nil {
			out = append(out, *up)
			continue
		}
		spec.Path = local
		out = append(out, ExpandArtifacts(dst, []payload.Artifact{spec}, expires)...)
	}
	slices.SortStableFunc(out, func(a, b artifactUpload) int {
		switch {
		case a.name < b.name:
			return -1
		case a.name > b.name:
			return 1
		}
		return 0
	})
	return out
}

// copyOut extracts artifact a from the container into dst and returns the
// path (relative to dst) of the copy, or an error artifact.
func (t *dockerTask) copyOut(name string, a payload.DockerArtifact, dst string, expires time.Time) (string, *artifactUpload) {
	errArt := func(reason, format string, args ...any) (string, *artifactUpload) {
		up := errorUpload(name, expires, reason, fmt.Sprintf(format, args...))
		return "", &up
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	rc, st, err := t.e.client.CopyFrom(ctx, t.containerID, a.Path)
	switch {
	case dockerapi.IsNotFound(err):
		return errArt(tcclient.ArtifactFileMissing, "Artifact %s: %s does not exist in the container", name, a.Path)
	case err != nil:
		return errArt(tcclient.ArtifactNotReadable, "Artifact %s: could not copy %s out of the container: %v", name, a.Path, err)
	}
	defer rc.Close()
	if a.Type == "file" && st.IsDir() {
		return errArt(tcclient.ArtifactInvalidResource, "Artifact %s: %s is a directory, but the artifact type is file", name, a.Path)
	}
	if a.Type == "directory" && !st.IsDir() {
		return errArt(tcclient.ArtifactInvalidResource, "Artifact %s: %s is not a directory, but the artifact type is directory", name, a.Path)
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return errArt(tcclient.ArtifactNotReadable, "Artifact %s: preparing a copy: %v", name, err)
	}
	if err := extractArtifactTar(rc, dst); err != nil {
		return errArt(tcclient.ArtifactNotReadable, "Artifact %s: could not copy %s out of the container: %v", name, a.Path, err)
	}
	base := st.Name
	if base == "" {
		base = path.Base(a.Path)
	}
	if _, err := os.Lstat(filepath.Join(dst, base)); err != nil {
		// A symbolic link (not followed, so it cannot point into the
		// host) or a special file: nothing to publish.
		return errArt(tcclient.ArtifactInvalidResource, "Artifact %s: %s is not a regular file or directory", name, a.Path)
	}
	return base, nil
}

// extractArtifactTar writes the regular files and directories of a tar
// stream below dst. Links and special files are skipped: a symbolic link
// copied out of a container would otherwise resolve on the host, and an
// artifact could publish a host file.
func extractArtifactTar(r io.Reader, dst string) error {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening %s: %w", dst, err)
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading the archive: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return fmt.Errorf("creating %s: %w", name, err)
			}
		case tar.TypeReg:
			if err := writeEntry(root, name, 0o644, tr); err != nil {
				return err
			}
		}
	}
}

// cleanup removes the container (killing it if it still runs) if the
// run ended before its artifacts were collected.
func (t *dockerTask) cleanup() { t.removeContainer() }

func (t *dockerTask) removeContainer() {
	if t.containerID == "" {
		return
	}
	defer func() { t.containerID = "" }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := t.e.client.RemoveContainer(ctx, t.containerID); err != nil {
		t.r.logger.Error("removing container; the next start of this worker removes it", "container", t.containerID, "error", err)
	}
}
