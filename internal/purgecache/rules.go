// Package purgecache is hopper's Purge-Cache service (Taskcluster's
// Purge-Cache API v1): operators ask the workers of a pool to empty a named
// cache; workers ask, before they use their caches, which caches to empty.
//
// This file holds the rules, plain Go with the time passed in;
// internal/purgecacheapi serves them over HTTP and keeps the requests
// through the store.
package purgecache

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/queue"
)

// Request asks the workers of a pool to empty a cache created before
// Before; the store keeps one per pool and cache name.
type Request struct {
	WorkerPoolID string
	CacheName    string
	Before       time.Time
	Expires      time.Time
}

// RequestLifetime is how long a purge request is kept: a worker that was
// away longer keeps caches older than the request (as in Taskcluster).
const RequestLifetime = 24 * time.Hour

// workerPoolIDPattern is <provisionerId>/<workerType>, as the service
// defines it (either half up to 38 characters, upper case allowed).
var workerPoolIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,38}/[A-Za-z0-9_-]{1,38}$`)

// WorkerPoolIDPattern is the pattern ValidWorkerPoolID checks (error messages
// quote it).
func WorkerPoolIDPattern() *regexp.Regexp { return workerPoolIDPattern }

// ValidWorkerPoolID reports whether id is a well-formed workerPoolId.
func ValidWorkerPoolID(id string) bool { return workerPoolIDPattern.MatchString(id) }

// NewRequest is the record a purgeCache call leaves: caches of that name
// created before now are to be emptied.
func NewRequest(workerPoolID, cacheName string, now time.Time) Request {
	return Request{WorkerPoolID: workerPoolID, CacheName: cacheName, Before: now, Expires: now.Add(RequestLifetime)}
}

// Since keeps the requests made at or after since (a worker passes the
// time of its previous question, so it hears of each request once or
// twice, never not at all).
func Since(reqs []Request, since time.Time) []Request {
	out := reqs[:0:0]
	for _, r := range reqs {
		if !r.Before.Before(since) {
			out = append(out, r)
		}
	}
	return out
}

// Entry is one request as the API lists it.
type Entry struct {
	ProvisionerID string `json:"provisionerId"`
	WorkerType    string `json:"workerType"`
	CacheName     string `json:"cacheName"`
	Before        string `json:"before"`
}

// Entries renders requests for the API.
func Entries(reqs []Request) []Entry {
	out := make([]Entry, 0, len(reqs))
	for _, r := range reqs {
		p, w, _ := strings.Cut(r.WorkerPoolID, "/")
		out = append(out, Entry{ProvisionerID: p, WorkerType: w, CacheName: r.CacheName,
			Before: queue.NewTime(r.Before).String()})
	}
	return out
}

// sinceLayouts are the ISO 8601 forms since may take: Taskcluster reads it
// with JavaScript's Date.parse, so a date alone or a time without seconds
// is accepted too. Forms without an offset are UTC.
var sinceLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02T15:04:05.999999999", "2006-01-02T15:04", "2006-01-02"}

// ParseSince reads the since query parameter: absent means the beginning
// of time; otherwise an ISO 8601 date or date-time.
func ParseSince(v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	for _, layout := range sinceLayouts {
		if t, err := time.Parse(layout, v); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("Query-string parameter: since=%q is not valid, error: Invalid Date", v)
}
