package storetest

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// forgedTokens are continuation tokens hopper never issues: each decodes
// to bytes no cursor holds (NUL, bytes that are not UTF-8), or is no
// base64url at all, or is far longer than any cursor. PostgreSQL refused
// the first ones as text parameters (a 500 on every list method) where
// SQLite listed from them.
var forgedTokens = map[string]string{
	"NUL":             "AA",
	"NUL inside":      base64.RawURLEncoding.EncodeToString([]byte("abc\x00def\x00ghi")),
	"not UTF-8":       "_w",
	"invalid UTF-8":   base64.RawURLEncoding.EncodeToString([]byte("1700000000000|\xc3\x28")),
	"not base64url":   "!!not-a-token!!",
	"padded":          "YWJj=",
	"non-canonical":   "YR",
	"longer than any": strings.Repeat("QUFB", 2000),
}

// testForgedContinuationTokens: every list method of the store refuses a
// forged token with ErrBadContinuationToken, the same on every driver.
func testForgedContinuationTokens(t *testing.T, open Opener) {
	e := setup(t, open)
	lists := map[string]func(store.Page) error{
		"ListArtifacts": func(p store.Page) error {
			_, _, err := e.s.ListArtifacts(e.ctx, "aaaaaaaaaaaaaaaaaaaaaa", 0, p)
			return err
		},
		"ListClients": func(p store.Page) error { _, _, err := e.s.ListClients(e.ctx, "", p); return err },
		"ListTaskGroup": func(p store.Page) error {
			_, _, err := e.s.ListTaskGroup(e.ctx, "aaaaaaaaaaaaaaaaaaaaaa", p)
			return err
		},
		"ListLastFires": func(p store.Page) error { _, _, err := e.s.ListLastFires(e.ctx, "g", "h", p); return err },
		"ListIndexedTasks": func(p store.Page) error {
			_, _, err := e.s.ListIndexedTasks(e.ctx, "a.b", Epoch, p)
			return err
		},
		"ListIndexNamespaces": func(p store.Page) error {
			_, _, err := e.s.ListIndexNamespaces(e.ctx, "a", Epoch, p)
			return err
		},
		"ListPurgeRequests": func(p store.Page) error { _, _, err := e.s.ListPurgeRequests(e.ctx, "p/w", p); return err },
		"ListPending":       func(p store.Page) error { _, _, err := e.s.ListPending(e.ctx, testQueue, Epoch, p); return err },
		"ListClaimed":       func(p store.Page) error { _, _, err := e.s.ListClaimed(e.ctx, testQueue, Epoch, p); return err },
		"ListTaskQueues": func(p store.Page) error {
			_, _, err := e.s.ListTaskQueues(e.ctx, Epoch, store.TaskQueueFilter{}, p)
			return err
		},
		"ListWorkers": func(p store.Page) error {
			_, _, err := e.s.ListWorkers(e.ctx, Epoch, store.WorkerFilter{TaskQueueID: testQueue}, p)
			return err
		},
		"ListSecrets": func(p store.Page) error { _, _, err := e.s.ListSecrets(e.ctx, Epoch, p); return err },
		"ListDependents": func(p store.Page) error {
			_, _, err := e.s.ListDependents(e.ctx, "aaaaaaaaaaaaaaaaaaaaaa", p)
			return err
		},
	}
	for method, list := range lists {
		for name, token := range forgedTokens {
			err := list(store.Page{Limit: 2, ContinuationToken: token})
			require.ErrorIs(t, err, store.ErrBadContinuationToken, "%s with a token %s (%q)", method, name, token)
		}
		require.NoError(t, list(store.Page{Limit: 2}), method)
	}
}
