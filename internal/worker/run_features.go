package worker

// Run code both engines share: the live log, the taskcluster proxy and
// its scopes.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/tcclient"
	"github.com/hopper-ci/hopper/internal/worker/tasklog"
	"github.com/hopper-ci/hopper/internal/worker/tcproxy"
)

// scopeSatisfied reports whether scopes satisfy required (exact match or a
// held scope ending in "*" that prefixes it).
func scopeSatisfied(scopes []string, required string) bool {
	for _, s := range scopes {
		if s == required || strings.HasSuffix(s, "*") && strings.HasPrefix(required, strings.TrimSuffix(s, "*")) {
			return true
		}
	}
	return false
}

func (r *taskRun) startLiveLog(maxRunTime int) {
	cfg := &r.w.cfg
	var live liveEndpoint
	if r.w.tunnel != nil {
		live = startTunnelLive(r.w.tunnel, r.log)
	} else {
		server, err := tasklog.StartLive(r.log, cfg.LiveLogBindAddress, cfg.LiveLogPublicHost)
		if err != nil {
			r.log.Warnf("Live log unavailable: %v", err)
			return
		}
		live = server
	}
	r.live = live
	expires := time.Now().Add(time.Duration(maxRunTime)*time.Second + 900*time.Second)
	if expires.After(r.claim.Task.Expires.Time) {
		expires = r.claim.Task.Expires.Time
	}
	ctx, cancel := context.WithTimeout(r.workCtx, time.Minute)
	defer cancel()
	_, err := r.claim.Queue().CreateArtifact(ctx, r.claim.TaskID, r.claim.RunID, r.logs.Live, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageReference, Expires: tcclient.NewTime(expires),
		ContentType: "text/plain; charset=utf-8", URL: live.URL(),
	})
	if err != nil {
		r.log.Warnf("Could not publish the live log artifact: %v", err)
		return
	}
	r.log.Infof("Live log: %s", live.URL())
}

func (r *taskRun) proxyScopes() []string {
	scopes := slices.Clone(r.claim.Task.Scopes)
	return append(scopes, fmt.Sprintf("queue:create-artifact:%s/%d", r.claim.TaskID, r.claim.RunID))
}

// startProxy starts the run's taskcluster proxy; opts may choose where it
// listens, the rest is filled in here.
func (r *taskRun) startProxy(opts tcproxy.Options) error {
	opts.RootURL, opts.Credentials, opts.AuthorizedScopes = r.w.cfg.RootURL, r.claim.Credentials(), r.proxyScopes()
	opts.TaskID, opts.RunID = r.claim.TaskID, r.claim.RunID
	opts.HTTPClient = r.w.HTTPClient
	if r.proxyPeerFunc != nil {
		opts.AllowPeerFunc = r.proxyPeerFunc
	}
	if r.proxyListen != nil {
		ln, err := r.proxyListen("127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listening in the task's network namespace: %w", err)
		}
		opts.Listener = ln
	}
	p, err := tcproxy.Start(opts)
	if err != nil {
		return err
	}
	r.proxy = p
	r.claim.OnCredentials(func(c tcclient.Credentials) {
		p.SetCredentials(c)
		if r.log != nil {
			r.log.Infof("Taskcluster proxy credentials refreshed after reclaim")
		}
	})
	r.log.Infof("Taskcluster proxy listening at %s", p.URL())
	return nil
}

// artifactExpiryProblems checks an artifact's expires, when set, against
// the task's deadline and expiry, a second of slack each way; where names
// the artifact as the engine's payload does (payload.artifacts[0],
// payload.artifacts["name"]).
func artifactExpiryProblems(where string, expires tcclient.Time, task *tcclient.TaskDefinition) []string {
	if expires.IsZero() {
		return nil
	}
	var bad []string
	if expires.Before(task.Deadline.Add(-time.Second)) {
		bad = append(bad, fmt.Sprintf("%s.expires (%s) is before the task deadline (%s)", where, expires, task.Deadline))
	}
	if expires.After(task.Expires.Add(time.Second)) {
		bad = append(bad, fmt.Sprintf("%s.expires (%s) is after the task expiry (%s)", where, expires, task.Expires))
	}
	return bad
}
