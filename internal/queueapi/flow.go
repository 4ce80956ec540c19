package queueapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/artifacts"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Flow control's HTTP side (README "Flow control"): the declaration is
// checked at createTask, a claim that superseded tasks leaves the same
// artifacts the worker-side flow leaves, a failure in a fail-fast group
// cancels the rest of the group, and /metrics reports each key.

// Artifact names shared with the worker-side flow (internal/worker/superseding).
const (
	supersededByArtifact = "public/superseded-by.json"
	supersedesArtifact   = "public/supersedes.json"
)

// flowPolicy reads and checks a new task's flow block.
func flowPolicy(def *queue.Task) (*queue.FlowPolicy, error) {
	p, err := queue.ParseFlow(def)
	if err != nil {
		return nil, api.Errorf(api.CodeInputValidationError, "%s", err.Error())
	}
	return p, nil
}

// blobPutter is what both blob backends offer besides signed URLs: storing
// bytes directly.
type blobPutter interface {
	Put(ctx context.Context, key, contentType, contentEncoding string, size int64, r io.Reader) (artifacts.BlobInfo, error)
}

// writeSupersessions gives each superseded run public/superseded-by.json
// and the claimed run public/supersedes.json, as the worker-side flow does.
// They are written after the claim committed (an artifact's bytes live
// outside the database); a failure is logged and leaves the tasks as
// resolved.
func (s *Server) writeSupersessions(ctx context.Context, sessions []store.Supersession, now time.Time) {
	for _, ss := range sessions {
		for _, old := range ss.Superseded {
			if err := s.putFlowArtifact(ctx, old, supersededByArtifact, ss.By, now); err != nil {
				s.log.Warn("writing superseded-by artifact", "taskId", old.TaskID, "error", err)
			}
		}
		if err := s.putFlowArtifact(ctx, ss.By, supersedesArtifact, ss.Superseded, now); err != nil {
			s.log.Warn("writing supersedes artifact", "taskId", ss.By.TaskID, "error", err)
		}
	}
}

func (s *Server) putFlowArtifact(ctx context.Context, run store.RecentTask, name string, content any, now time.Time) error {
	put, ok := s.blobs.(blobPutter)
	if !ok {
		return fmt.Errorf("this queue has no blob storage to keep %s in", name)
	}
	body, err := json.Marshal(content)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", name, err)
	}
	size := int64(len(body))
	details, err := json.Marshal(artifactDetails{ContentLength: &size})
	if err != nil {
		return fmt.Errorf("encoding details of %s: %w", name, err)
	}
	key := artifacts.BlobKey(run.TaskID, run.RunID, name)
	if _, err := put.Put(ctx, key, "application/json", "", size, bytes.NewReader(body)); err != nil {
		return fmt.Errorf("storing %s of %s/%d: %w", name, run.TaskID, run.RunID, err)
	}
	_, err = s.store.CreateArtifact(ctx, store.CreateArtifactParams{TaskID: run.TaskID, RunID: run.RunID, Name: name, Now: now,
		Check: func(t *queue.TaskState, _ *store.Artifact) (*store.Artifact, error) {
			return &store.Artifact{TaskID: run.TaskID, RunID: run.RunID, Name: name, StorageType: storageS3,
				ContentType: "application/json", Details: details, Expires: t.Task.Expires.Time, Present: true}, nil
		}})
	if err != nil {
		return fmt.Errorf("recording %s of %s/%d: %w", name, run.TaskID, run.RunID, err)
	}
	return nil
}

// failFast cancels the rest of a failed task's group when the group opted
// in (store.FlowStore.FailFastGroup); the report stands whatever happens.
func (s *Server) failFast(ctx context.Context, t *queue.TaskState, now time.Time) {
	if t == nil || t.State() != queue.StateFailed {
		return
	}
	res, err := s.store.FailFastGroup(ctx, t.Task.TaskGroupID, now)
	if err != nil {
		s.log.Warn("fail-fast: cancelling the group of a failed task", "taskId", t.TaskID, "taskGroupId", t.Task.TaskGroupID, "error", err)
		return
	}
	s.publish(ctx, res.Changes)
}

// flowCollector reports every flow key at scrape time, from the store, so
// every replica reports the same numbers.
type flowCollector struct {
	store                                                store.FlowStore
	pending, running, limit, limited, superseded, cancel *prometheus.Desc
}

func newFlowCollector(st store.FlowStore) *flowCollector {
	labels := []string{"task_queue_id", "key"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, labels, nil) }
	return &flowCollector{store: st,
		pending:    d("hopper_flow_pending_tasks", "Pending tasks per flow key."),
		running:    d("hopper_flow_running_tasks", "Running tasks per flow key."),
		limit:      d("hopper_flow_limit", "The running-task limit of each flow key (0: none)."),
		limited:    d("hopper_flow_limited_tasks", "Pending tasks of a flow key held back by its limit."),
		superseded: d("hopper_flow_superseded_total", "Tasks resolved exception/superseded by claims of each flow key."),
		cancel:     d("hopper_flow_canceled_total", "Running tasks cancelled by newer tasks of each flow key (cancelInProgress)."),
	}
}

func (f *flowCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{f.pending, f.running, f.limit, f.limited, f.superseded, f.cancel} {
		ch <- d
	}
}

func (f *flowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys, err := f.store.FlowKeys(ctx, "")
	if err != nil {
		return
	}
	for _, k := range keys {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, k.TaskQueueID, k.Key)
		}
		gauge(f.pending, float64(k.Pending))
		gauge(f.running, float64(k.Running))
		gauge(f.limit, float64(k.Limit))
		gauge(f.limited, float64(k.Limited()))
		ch <- prometheus.MustNewConstMetric(f.superseded, prometheus.CounterValue, float64(k.Superseded), k.TaskQueueID, k.Key)
		ch <- prometheus.MustNewConstMetric(f.cancel, prometheus.CounterValue, float64(k.Canceled), k.TaskQueueID, k.Key)
	}
}
