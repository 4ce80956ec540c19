package superseding

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// secondarySet holds the claims a primary supersedes (docs/contract/worker.md §5.5–5.6).
// Each member keeps its own reclaimer, and so its own fresh credentials,
// until Finish; a member whose claim is lost meanwhile is dropped: never
// resolved, never listed.
type secondarySet struct {
	opts    Options
	w       Host
	members []Claim // in list order
	once    sync.Once
}

var _ SecondarySet = (*secondarySet)(nil)

// Finish implements SecondarySet: case A (the primary's task code
// concluded) resolves each live secondary exception/superseded and gives it
// public/superseded-by.json, then gives the primary public/supersedes.json
// listing those; every other outcome (B: aborted or exception, C: primary
// lost, D: shutdown) resolves them exception/worker-shutdown so the queue
// retries them at once.
func (s *secondarySet) Finish(ctx context.Context, primary Claim, outcome Outcome) {
	s.once.Do(func() { s.resolveAll(ctx, primary, outcome) })
}

func (s *secondarySet) resolveAll(ctx context.Context, primary Claim, outcome Outcome) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	// Stop every reclaimer first (dw did the same before resolving); a claim
	// lost until then is dropped.
	s.each(func(_ int, c Claim) { c.StopReclaiming() })
	supersede := primary != nil && outcome.TaskCodeConcluded()
	done := make([]bool, len(s.members))
	s.each(func(i int, c Claim) {
		log := s.opts.Logger.With("taskId", c.Ref().TaskID, "runId", c.Ref().RunID)
		select {
		case <-c.Lost():
			log.Info("secondary dropped: its claim was lost", "reason", c.LostReason())
			return
		default:
		}
		if !supersede {
			if _, err := c.Queue().ReportException(ctx, c.Ref().TaskID, c.Ref().RunID, tcclient.ReasonWorkerShutdown); err != nil {
				log.Warn("releasing secondary with worker-shutdown failed; its claim will expire", "error", err)
				return
			}
			log.Info("secondary released with worker-shutdown", "primaryState", outcome.State, "primaryReason", outcome.Reason, "primaryLost", outcome.Lost)
			return
		}
		if _, err := c.Queue().ReportException(ctx, c.Ref().TaskID, c.Ref().RunID, tcclient.ReasonSuperseded); err != nil {
			log.Warn("resolving secondary superseded failed; it is not listed as superseded", "error", err)
			return
		}
		body, err := json.Marshal(TaskRef{TaskID: primary.Ref().TaskID, RunID: primary.Ref().RunID})
		if err == nil {
			err = s.putJSON(ctx, c, SupersededByArtifact, body)
		}
		if err != nil {
			log.Warn("secondary resolved superseded, but its superseded-by artifact failed; it is not listed as superseded", "error", err)
			return
		}
		log.Info("secondary resolved superseded", "primaryTaskId", primary.Ref().TaskID, "primaryRunId", primary.Ref().RunID)
		done[i] = true
	})
	if !supersede {
		return
	}
	var refs []TaskRef
	for i, c := range s.members {
		if done[i] {
			refs = append(refs, TaskRef{TaskID: c.Ref().TaskID, RunID: c.Ref().RunID})
		}
	}
	if len(refs) == 0 {
		return
	}
	body, err := json.Marshal(refs)
	if err == nil {
		err = s.putJSON(ctx, primary, SupersedesArtifact, body)
	}
	if err != nil {
		s.opts.Logger.Warn("creating the primary's supersedes artifact failed", "taskId", primary.Ref().TaskID, "runId", primary.Ref().RunID, "error", err)
	}
}

// each runs fn for every member, at most Concurrency at once, and waits.
func (s *secondarySet) each(fn func(i int, c Claim)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, s.opts.Concurrency)
	for i, c := range s.members {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i, c)
		}()
	}
	wg.Wait()
}

// putJSON creates an s3 artifact of JSON content on c's run with c's current
// credentials and uploads body to its putUrl. It expires with the task.
func (s *secondarySet) putJSON(ctx context.Context, c Claim, name string, body []byte) error {
	expires := c.Definition().Expires
	if expires.IsZero() {
		// The queue always sets expires; the deadline is a safe lower
		// bound should a definition lack it.
		expires = c.Definition().Deadline
	}
	n := int64(len(body))
	resp, err := c.Queue().CreateArtifact(ctx, c.Ref().TaskID, c.Ref().RunID, name, &tcclient.CreateArtifactRequest{
		StorageType: tcclient.StorageS3, Expires: expires, ContentType: artifactContentType, ContentLength: &n,
	})
	if err != nil {
		return err
	}
	if resp.PutURL == "" {
		return fmt.Errorf("createArtifact for %s on %s run %d returned no putUrl", name, c.Ref().TaskID, c.Ref().RunID)
	}
	up := tcclient.BytesUpload(resp.PutURL, artifactContentType, "", body)
	up.HTTPClient = s.w.HTTPClient()
	if err := up.Do(ctx); err != nil {
		return fmt.Errorf("uploading %s to %s run %d: %w", name, c.Ref().TaskID, c.Ref().RunID, err)
	}
	return nil
}
