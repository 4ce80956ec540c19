package queueapi

import (
	"context"
	"sync"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/store"
)

// A claimWork call that finds its task queue empty parks instead of
// blocking in its handler (api.Call.Park): it waits with nothing but the
// connection, a hub subscription and its place in the server's list of
// parked calls, whose one timer ends the long-polls (parkedset.go). A
// wake-up, the end of the long-poll or a drain has a goroutine claim and
// write the reply (api.ParkedCall.Reply), which hands the connection back
// to the HTTP server for the client's next request. An idle fleet of ten
// thousand workers then costs a few kilobytes a worker instead of some
// forty.

// parkedClaim is one parked claimWork call. It keeps what the reply, an
// error's reply and the access log need of the call and no more: a few
// hundred bytes besides the connection.
type parkedClaim struct {
	s        *Server
	call     api.ParkedCall
	claim    store.ClaimWorkParams
	deadline time.Time

	// The place in Server.parked (-1: not parked), under its lock.
	index int

	mu      sync.Mutex
	done    bool
	waiting *store.Waiting
}

// parkClaim parks the call if it can: HTTP/1.x on a connection the server
// accepted through its parking listener. It returns false, leaving the
// call as it was, when it cannot. The parked call subscribes before it
// leaves the handler's subscription (handler, never armed), so that a
// wake-up the handler received meanwhile passes on rather than being lost.
func (s *Server) parkClaim(c *api.Call, p store.ClaimWorkParams, started, deadline time.Time, handler *store.Waiting) bool {
	call, ok := c.Park(started)
	if !ok {
		return false
	}
	pc := &parkedClaim{s: s, call: call, claim: p, deadline: deadline, index: -1}
	// A create may claim for the call while the worker is still there:
	// a look at the socket that does not wait.
	claimant := &store.Claimant{WorkerGroup: p.WorkerGroup, WorkerID: p.WorkerID, ClaimTimeout: s.cfg.ClaimTimeout,
		Alive: pc.call.StillThere}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.waiting = s.hub.WaitForWork(p.TaskQueueID, p.Count, claimant, pc.woken)
	handler.Leave()
	if !s.parked.add(pc) { // draining
		pc.finishLocked(emptyClaim{}, nil)
		return true
	}
	pc.waiting.Arm()
	return true
}

// woken runs when the hub wakes the parked call: it claims, and answers if
// it got work; otherwise it stays parked.
func (pc *parkedClaim) woken() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.done {
		return
	}
	if !pc.call.Alive() {
		// The worker went away: leaving hands the wake-up to another.
		pc.done = true
		pc.leave()
		pc.s.parked.remove(pc)
		pc.call.Gone()
		return
	}
	select {
	case <-pc.waiting.C:
	default:
		return // taken already
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := pc.s.clock.Now()
	p := pc.claim
	res := pc.waiting.Claimed() // runs a create claimed for the call
	if res == nil {
		p.Now, p.TakenUntil, p.Woken = now, pc.s.takenUntil(now), true
		var err error
		if res, err = pc.s.store.ClaimWork(ctx, p); err != nil {
			pc.finishLocked(nil, err)
			return
		}
	}
	switch {
	case !res.QuarantinedUntil.IsZero():
		// Quarantined meanwhile: wait out the long-poll, out of the hub.
		pc.leave()
	case len(res.Claims) > 0:
		pc.s.recordRecentTasks(pc.workerKey(), res)
		out, err := pc.s.claimReply(ctx, res, now)
		pc.finishLocked(out, err)
	default:
		pc.waiting.Arm() // still waiting
	}
}

func (pc *parkedClaim) workerKey() store.WorkerKey {
	return store.WorkerKey{TaskQueueID: pc.claim.TaskQueueID, WorkerGroup: pc.claim.WorkerGroup, WorkerID: pc.claim.WorkerID}
}

// leave ends the call's wait in the hub and returns runs claimed for it
// that it has not answered with (see Waiting.Leave).
func (pc *parkedClaim) leave() *store.ClaimResult {
	res := pc.waiting.Leave()
	if res != nil && pc.done {
		pc.s.lostClaims(pc.workerKey(), res)
		return nil
	}
	return res
}

func (pc *parkedClaim) finish(out any, err error) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.finishLocked(out, err)
}

// finishLocked writes the reply (or the error's), hands the connection
// back and records the call as served.
func (pc *parkedClaim) finishLocked(out any, err error) {
	if pc.done {
		return
	}
	if res := pc.leave(); res != nil {
		// Runs claimed for the call as its wait ended are its answer.
		if _, empty := out.(emptyClaim); empty && err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pc.s.recordRecentTasks(pc.workerKey(), res)
			out, err = pc.s.claimReply(ctx, res, pc.s.clock.Now())
		} else {
			pc.s.lostClaims(pc.workerKey(), res)
		}
	}
	pc.done = true
	pc.s.parked.remove(pc)
	pc.call.Reply(out, err)
}
