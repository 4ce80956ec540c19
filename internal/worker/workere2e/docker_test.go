package workere2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestDockerTaskRuns runs one docker-worker task through the whole path:
// image, command, env, a custom log name, file/directory/volume artifacts
// with expiry, and checks that the container is gone afterwards and that
// the worker's credentials never reached it.
func TestDockerTaskRuns(t *testing.T) {
	queue := uniqueQueue("docker-run")
	expires := time.Now().Add(3 * time.Hour).UTC().Truncate(time.Millisecond)
	script := `echo "hello $GREETING"; env | sort; cat /etc/marker
mkdir -p /out/dir/sub && echo one > /out/file.txt && echo two > /out/dir/sub/b.txt && echo three > /out/dir/a.log
echo vol > /vol/v.txt`
	id := createTaskWith(t, queue, dockerPayload(script, func(pl map[string]any) {
		pl["env"] = map[string]string{"GREETING": "world", "TASK_ID": "forged"}
		pl["log"] = "public/logs/custom.log"
		pl["artifacts"] = map[string]any{
			"public/file.txt": map[string]any{"type": "file", "path": "/out/file.txt", "expires": expires.Format(time.RFC3339Nano)},
			"public/dir":      map[string]any{"type": "directory", "path": "/out/dir"},
			"public/vol":      map[string]any{"type": "volume", "path": "/vol"},
		}
	}), nil)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-run", tasks: 1})
	require.Equal(t, 0, w.wait(t, 90*time.Second))

	st := status(t, id)
	logf := fetchArtifact(t, id, 0, "public/logs/custom_backing.log")
	log := logf.body
	require.Equal(t, tcclient.StateCompleted, st.State, "log:\n%s", log)
	require.Equal(t, "gzip", logf.header.Get("Content-Encoding"))
	for _, want := range []string{
		"hello world", "hello from the image", "TASK_ID=" + id, "RUN_ID=0", "TASKCLUSTER_ROOT_URL=" + shared.rootURL,
		"TASKCLUSTER_WORKER_POOL=" + queue, `"engine": "docker"`, "Executing command 0: sh -c", "Exit Code: 0",
		"=== Task Finished ===", "Task resolution: completed",
	} {
		require.Contains(t, log, want)
	}
	require.NotContains(t, log, "TASK_ID=forged", "TASK_ID cannot be overridden")
	require.NotContains(t, log, shared.token, "the worker's access token reached the container")
	require.NotContains(t, log, "TASKCLUSTER_ACCESS_TOKEN")
	// Worker lines carry Taskcluster's prefixes, as with the process engine.
	require.Regexp(t, `(?m)^\[taskcluster \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z\] Image: hopper-test/busybox:1$`, log)
	require.Regexp(t, `(?m)^\[taskcluster \S+\] === Task Starting ===$`, log)

	require.Equal(t, "one\n", fetchArtifact(t, id, 0, "public/file.txt").body)
	require.Equal(t, "two\n", fetchArtifact(t, id, 0, "public/dir/sub/b.txt").body)
	require.Equal(t, "three\n", fetchArtifact(t, id, 0, "public/dir/a.log").body)
	require.Equal(t, "vol\n", fetchArtifact(t, id, 0, "public/vol/v.txt").body)
	arts := artifactsByName(t, id, 0)
	require.True(t, arts["public/file.txt"].Expires.Equal(expires), "expires %s, want %s", arts["public/file.txt"].Expires, expires)
	require.True(t, arts["public/dir/a.log"].Expires.Equal(st.Expires.Time), "directory artifacts default to task.expires")
	require.Equal(t, tcclient.StorageLink, arts["public/logs/custom.log"].StorageType, "the live log ends as a link to the backing log")
	require.True(t, strings.HasPrefix(arts["public/dir/a.log"].ContentType, "text/plain"))

	require.Empty(t, containersOf(t, labelTask, id+"/0"), "the run's container was removed")
}

// TestDockerResolutions checks how the container's end decides the run.
func TestDockerResolutions(t *testing.T) {
	queue := uniqueQueue("docker-res")
	cases := []struct {
		name, script string
		edit         func(map[string]any)
		state        string
		reason       string
		logHas       string
		logAlso      string
	}{
		{name: "exit 3 fails", script: "exit 3", state: tcclient.StateFailed, logHas: "The container exited with code 3."},
		{name: "retry code is intermittent", script: "echo flaky; exit 5",
			edit:  func(pl map[string]any) { pl["onExitStatus"] = map[string]any{"retry": []int{5}} },
			state: tcclient.StateException, reason: tcclient.ReasonIntermittentTask, logHas: "listed in onExitStatus.retry"},
		{name: "missing artifact fails", script: "true",
			edit: func(pl map[string]any) {
				pl["artifacts"] = map[string]any{"public/nope": map[string]any{"type": "file", "path": "/nope"}}
			},
			state: tcclient.StateFailed, logHas: "/nope does not exist in the container"},
		{name: "directory as file fails", script: "true",
			edit: func(pl map[string]any) {
				pl["artifacts"] = map[string]any{"public/etc": map[string]any{"type": "file", "path": "/etc"}}
			},
			state: tcclient.StateFailed, logHas: "is a directory, but the artifact type is file"},
		{name: "artifacts feature off publishes nothing", script: "echo artifacts skipped",
			edit: func(pl map[string]any) {
				pl["features"] = map[string]bool{"artifacts": false}
				pl["artifacts"] = map[string]any{"public/nope": map[string]any{"type": "file", "path": "/nope"}}
			},
			state: tcclient.StateCompleted, logHas: "artifacts skipped"},
		{name: "unknown command fails", script: "",
			edit:  func(pl map[string]any) { pl["command"] = []string{"/no/such/binary"} },
			state: tcclient.StateFailed, logHas: "could not be started",
			// A start the runtime failed is tried once more in a new
			// container, which fails the same way for a missing command.
			logAlso: "trying once more in a new container"},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = createTaskWith(t, queue, dockerPayload(c.script, c.edit), func(d *tcclient.TaskDefinition) { d.Retries = new(int) })
	}
	w := startDockerWorker(t, queue, workerOpts{id: "docker-res", tasks: len(cases)})
	require.Equal(t, 0, w.wait(t, 120*time.Second))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := status(t, ids[i])
			log := logOf(t, ids[i])
			require.Equal(t, c.state, st.State, "log:\n%s", log)
			if c.reason != "" {
				require.Equal(t, c.reason, st.Runs[0].ReasonResolved)
			}
			require.Contains(t, log, c.logHas)
			if c.logAlso != "" {
				require.Contains(t, log, c.logAlso)
			}
			require.Empty(t, containersOf(t, labelTask, ids[i]+"/0"))
		})
	}
	arts := artifactsByName(t, ids[2], 0)
	require.Equal(t, tcclient.StorageError, arts["public/nope"].StorageType)
	require.NotContains(t, artifactsByName(t, ids[4], 0), "public/nope", "features.artifacts false publishes nothing")
}

// TestDockerMalformedPayloads checks every refusal names its field and
// ends exception/malformed-payload (or resource-unavailable for a registry
// that does not answer), without a container left behind.
func TestDockerMalformedPayloads(t *testing.T) {
	queue := uniqueQueue("docker-bad")
	cases := []struct {
		name   string
		pl     map[string]any
		scopes []string
		reason string
		logHas string
	}{
		{name: "no image", pl: map[string]any{"command": []string{"true"}, "maxRunTime": 10}, logHas: "image"},
		{name: "generic-worker payload", pl: map[string]any{"command": [][]string{{"true"}}, "maxRunTime": 10}, logHas: "generic-worker payload"},
		{name: "unknown field", pl: dockerPayload("true", func(pl map[string]any) { pl["mounts"] = []any{} }), logHas: "mounts"},
		{name: "keep-alive too long", pl: dockerPayload("true", func(pl map[string]any) {
			pl["features"] = map[string]bool{"interactive": true}
			pl["interactive"] = map[string]int{"keepAlive": 86401}
		}), logHas: "interactive.keepAlive"},
		{name: "dind", pl: dockerPayload("true", func(pl map[string]any) { pl["features"] = map[string]bool{"dind": true} }),
			logHas: "payload.features.dind: docker-in-docker is not supported"},
		{name: "privileged without scope", pl: dockerPayload("true", func(pl map[string]any) { pl["capabilities"] = map[string]any{"privileged": true} }),
			logHas: "payload.capabilities.privileged requires scope docker-worker:capability:privileged"},
		{name: "privileged not allowed", pl: dockerPayload("true", func(pl map[string]any) { pl["capabilities"] = map[string]any{"privileged": true} }),
			scopes: []string{"docker-worker:capability:privileged"}, logHas: "does not allow privileged containers"},
		{name: "device not offered", pl: dockerPayload("true", func(pl map[string]any) {
			pl["capabilities"] = map[string]any{"devices": map[string]bool{"kvm": true}}
		}), scopes: []string{"docker-worker:capability:device:kvm"}, logHas: "payload.capabilities.devices.kvm: worker pool " + queue + " does not offer this device"},
		{name: "ptrace without scope", pl: dockerPayload("true", func(pl map[string]any) { pl["features"] = map[string]bool{"allowPtrace": true} }),
			logHas: "payload.features.allowPtrace requires scope docker-worker:feature:allowPtrace"},
		{name: "cache without scope", pl: dockerPayload("true", func(pl map[string]any) { pl["cache"] = map[string]string{"c1": "/cache"} }),
			logHas: `payload.cache["c1"] requires scope docker-worker:cache:c1`},
		{name: "maxRunTime too long", pl: dockerPayload("true", func(pl map[string]any) { pl["maxRunTime"] = 999999 }),
			logHas: "payload.maxRunTime 999999 exceeds"},
		{name: "proxy without network", pl: dockerPayload("true", func(pl map[string]any) { pl["features"] = map[string]bool{"taskclusterProxy": true} }),
			logHas: "have no network"},
		{name: "lz4 image", pl: map[string]any{"image": map[string]any{"type": "task-image", "taskId": tcclient.NewTaskID(), "path": "public/image.tar.lz4"}, "maxRunTime": 10},
			logHas: "is not an image tarball this worker can load"},
		{name: "image of a missing task", pl: map[string]any{"image": map[string]any{"type": "task-image", "taskId": tcclient.NewTaskID(), "path": "public/image.tar"}, "maxRunTime": 10},
			logHas: "locating artifact public/image.tar"},
		{name: "private image without scope", pl: map[string]any{"image": map[string]any{"type": "task-image", "taskId": tcclient.NewTaskID(), "path": "private/image.tar"}, "maxRunTime": 10},
			logHas: "requires scope queue:get-artifact:private/image.tar"},
		{name: "unindexed namespace", pl: map[string]any{"image": map[string]any{"type": "indexed-image", "namespace": "hopper.e2e.absent", "path": "public/image.tar"}, "maxRunTime": 10},
			logHas: "no task is indexed at namespace hopper.e2e.absent"},
		{name: "unreachable registry", pl: map[string]any{"image": "127.0.0.1:1/hopper/absent:1", "maxRunTime": 10},
			reason: tcclient.ReasonResourceUnavailable, logHas: "Pulling docker image 127.0.0.1:1/hopper/absent:1 failed after retries"},
		{name: "bad image reference", pl: map[string]any{"image": "UPPER/case:1", "maxRunTime": 10}, logHas: "payload.image: image UPPER/case:1 cannot be pulled"},
		{name: "image reference with a query", pl: map[string]any{"image": "busybox?x=1", "maxRunTime": 10}, logHas: `payload.image: "busybox?x=1" is not an image reference`},
		{name: "image as a number", pl: map[string]any{"image": 7, "maxRunTime": 10}, logHas: "payload.image"},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		ids[i] = createTaskWith(t, queue, c.pl, func(d *tcclient.TaskDefinition) { d.Scopes = c.scopes })
	}
	w := startDockerWorker(t, queue, workerOpts{id: "docker-bad", tasks: len(cases)})
	require.Equal(t, 0, w.wait(t, 180*time.Second))
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := status(t, ids[i])
			log := logOf(t, ids[i])
			want := c.reason
			if want == "" {
				want = tcclient.ReasonMalformedPayload
			}
			require.Equal(t, tcclient.StateException, st.State, "log:\n%s", log)
			require.Equal(t, want, st.Runs[0].ReasonResolved, "log:\n%s", log)
			require.Contains(t, log, c.logHas)
			require.Contains(t, log, "[taskcluster:error] ")
			require.Empty(t, containersOf(t, labelTask, ids[i]+"/0"))
		})
	}
}

// TestDockerCacheSurvivesAndPurges: a cache written by one task is seen by
// the next on the same worker; an exit code listed in
// onExitStatus.purgeCaches empties it, and so does a purge-cache request.
func TestDockerCacheSurvivesAndPurges(t *testing.T) {
	queue := uniqueQueue("docker-cache")
	scopes := func(d *tcclient.TaskDefinition) { d.Scopes = []string{"docker-worker:cache:hopper-e2e-*"} }
	cache := func(pl map[string]any) { pl["cache"] = map[string]string{"hopper-e2e-c1": "/cache"} }
	first := createTaskWith(t, queue, dockerPayload(`echo "written by $TASK_ID" > /cache/note`, cache), scopes)
	second := createTaskWith(t, queue, dockerPayload(`echo "seen: $(cat /cache/note)"; exit 7`, func(pl map[string]any) {
		cache(pl)
		pl["onExitStatus"] = map[string]any{"purgeCaches": []int{7}}
	}), func(d *tcclient.TaskDefinition) {
		scopes(d)
		d.Dependencies = []string{first}
	})
	third := createTaskWith(t, queue, dockerPayload(`if [ -e /cache/note ]; then echo still there; else echo cache is empty; fi; echo again > /cache/note`, cache), func(d *tcclient.TaskDefinition) {
		scopes(d)
		d.Dependencies = []string{second}
		d.Requires = "all-resolved"
	})
	w := startDockerWorker(t, queue, workerOpts{id: "docker-cache", tasks: 4})
	waitResolved(t, third, 120*time.Second)
	// A purge request through the Purge-Cache service empties the cache
	// before the next task that mounts it.
	require.NoError(t, shared.admin.PurgeCache(context.Background(), queue, "hopper-e2e-c1"))
	fourth := createTaskWith(t, queue, dockerPayload(`if [ -e /cache/note ]; then echo still there; else echo purged by request; fi`, cache), scopes)
	require.Equal(t, 0, w.wait(t, 120*time.Second))
	log4 := logOf(t, fourth)
	require.Equal(t, tcclient.StateCompleted, status(t, fourth).State, log4)
	require.Contains(t, log4, "purged by request")

	require.Equal(t, tcclient.StateCompleted, status(t, first).State, logOf(t, first))
	log2 := logOf(t, second)
	require.Equal(t, tcclient.StateFailed, status(t, second).State, log2)
	require.Contains(t, log2, "seen: written by "+first)
	require.Contains(t, log2, `Reusing cache "hopper-e2e-c1"`)
	require.Contains(t, log2, "listed in onExitStatus.purgeCaches")
	log3 := logOf(t, third)
	require.Equal(t, tcclient.StateCompleted, status(t, third).State, log3)
	require.Contains(t, log3, "cache is empty")
	require.Contains(t, log3, `Created cache "hopper-e2e-c1"`)
}

// TestDockerProxyPtracePrivileged runs containers on the host network
// with the taskcluster proxy at docker-worker's address, and checks the
// capabilities allowPtrace and privileged give.
func TestDockerProxyPtracePrivileged(t *testing.T) {
	queue := uniqueQueue("docker-caps")
	idle := uniqueQueue("idle")
	other := createTaskWith(t, idle, dockerPayload("true", nil), nil)
	proxy := createTaskWith(t, queue, dockerPayload(`echo "proxy url: $TASKCLUSTER_PROXY_URL"
wget -q -O - "http://taskcluster/api/queue/v1/task/$OTHER" && echo
wget -q -O /dev/null "http://taskcluster/api/queue/v1/task/$OTHER/cancel" --post-data '' || echo "cancel refused"`, func(pl map[string]any) {
		pl["features"] = map[string]bool{"taskclusterProxy": true}
		pl["env"] = map[string]string{"OTHER": other}
	}), func(d *tcclient.TaskDefinition) { d.Scopes = []string{"queue:get-task:" + other} })
	caps := `grep CapEff /proc/self/status`
	plain := createTaskWith(t, queue, dockerPayload(caps, nil), nil)
	ptrace := createTaskWith(t, queue, dockerPayload(caps, func(pl map[string]any) {
		pl["features"] = map[string]bool{"allowPtrace": true}
	}), func(d *tcclient.TaskDefinition) { d.Scopes = []string{"docker-worker:feature:allowPtrace"} })
	privileged := createTaskWith(t, queue, dockerPayload(caps, func(pl map[string]any) {
		pl["capabilities"] = map[string]any{"privileged": true}
	}), func(d *tcclient.TaskDefinition) { d.Scopes = []string{"docker-worker:capability:privileged:" + queue} })
	limits := createTaskWith(t, queue, dockerPayload(`cd /sys/fs/cgroup
echo "memory limit: $(cat memory/memory.limit_in_bytes 2>/dev/null || cat memory.max)"
echo "cpu quota: $(cat cpu/cpu.cfs_quota_us 2>/dev/null || cut -d' ' -f1 cpu.max)"`, nil), nil)
	hog := createTaskWith(t, queue, dockerPayload(`x=$(head -c 200000000 /dev/zero | tr '\0' a); echo survived ${#x}`, nil), nil)
	w := startDockerWorker(t, queue, workerOpts{id: "docker-caps", tasks: 6, config: map[string]any{
		"docker": map[string]any{"network": "host", "allowPrivileged": true, "memoryMiB": 64, "cpus": 0.5},
	}})
	require.Equal(t, 0, w.wait(t, 120*time.Second))

	log := logOf(t, proxy)
	require.Equal(t, tcclient.StateCompleted, status(t, proxy).State, log)
	require.Contains(t, log, "proxy url: http://taskcluster\n", "docker-worker's proxy address, port 80")
	require.Contains(t, log, `"taskQueueId":"`+idle+`"`, "getTask through the proxy")
	require.Contains(t, log, "cancel refused", "the proxy signs with the task's scopes only")
	require.Equal(t, tcclient.StatePending, status(t, other).State)

	log = logOf(t, limits)
	require.Equal(t, tcclient.StateCompleted, status(t, limits).State, log)
	require.Contains(t, log, "memory limit: 67108864\n", "docker.memoryMiB limits the container")
	require.Contains(t, log, "cpu quota: 50000\n", "docker.cpus limits the container (period 100 ms)")
	log = logOf(t, hog)
	require.Equal(t, tcclient.StateFailed, status(t, hog).State, log)
	require.Contains(t, log, "The container ran out of memory (this worker pool allows 64 MiB)")
	require.NotContains(t, log, "\nsurvived")

	capEff := func(id string) uint64 {
		log := logOf(t, id)
		require.Equal(t, tcclient.StateCompleted, status(t, id).State, log)
		i := strings.Index(log, "CapEff:")
		require.GreaterOrEqual(t, i, 0, log)
		var v uint64
		_, err := fmt.Sscanf(strings.TrimSpace(log[i+len("CapEff:"):]), "%x", &v)
		require.NoError(t, err)
		return v
	}
	const sysPtrace, sysAdmin = 1 << 19, 1 << 21
	require.Zero(t, capEff(plain)&(sysPtrace|sysAdmin), "a plain container has neither CAP_SYS_PTRACE nor CAP_SYS_ADMIN")
	require.NotZero(t, capEff(ptrace)&sysPtrace, "allowPtrace adds CAP_SYS_PTRACE")
	if hostHasAllCapabilities(t) {
		require.NotZero(t, capEff(privileged)&sysAdmin, "privileged containers have CAP_SYS_ADMIN")
		return
	}
	// Docker 20.10 gives a privileged container every capability it knows
	// and runc refuses those outside the host's bounding set: on such a
	// host (some VMs and nested containers) the request got as far as the
	// runtime, and the task failed there, as docker-worker's would.
	log = logOf(t, privileged)
	require.Equal(t, tcclient.StateFailed, status(t, privileged).State, log)
	require.Contains(t, log, "unable to apply caps")
}

// hostHasAllCapabilities reports whether this process's capability
// bounding set is contiguous from bit 0 (no capability taken away).
func hostHasAllCapabilities(t *testing.T) bool {
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "CapBnd:"); ok {
			v, err := strconv.ParseUint(strings.TrimSpace(rest), 16, 64)
			require.NoError(t, err)
			return v&(v+1) == 0
		}
	}
	return false
}
