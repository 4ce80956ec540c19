package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

// testSigningKeys checks that signing keys are kept per generation (a
// second key of a generation is not stored), listed oldest first, and
// deleted once their successor activated before the cutoff.
func testSigningKeys(t *testing.T, open Opener) {
	e := setup(t, open)
	key := func(gen int64, id string, created time.Time) *store.SigningKey {
		return &store.SigningKey{Generation: gen, KeyID: id, Algorithm: "RS256", Sealed: "sealed-" + id, Created: created, Activates: created.Add(time.Hour)}
	}
	keys, err := e.s.ListSigningKeys(e.ctx)
	require.NoError(t, err)
	require.Empty(t, keys)

	added, err := e.s.AddSigningKey(e.ctx, key(1, "k1", Epoch))
	require.NoError(t, err)
	require.True(t, added)
	added, err = e.s.AddSigningKey(e.ctx, key(1, "other", Epoch.Add(time.Minute)))
	require.NoError(t, err)
	require.False(t, added, "generation 1 is taken")
	added, err = e.s.AddSigningKey(e.ctx, key(2, "k2", Epoch.Add(48*time.Hour)))
	require.NoError(t, err)
	require.True(t, added)

	keys, err = e.s.ListSigningKeys(e.ctx)
	require.NoError(t, err)
	require.Equal(t, []store.SigningKey{*key(1, "k1", Epoch), *key(2, "k2", Epoch.Add(48*time.Hour))}, keys)

	activated2 := Epoch.Add(49 * time.Hour)
	n, err := e.s.ExpireSigningKeys(e.ctx, activated2)
	require.NoError(t, err)
	require.Zero(t, n, "k2 activated at the cutoff, not before")
	n, err = e.s.ExpireSigningKeys(e.ctx, activated2.Add(time.Millisecond))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	keys, err = e.s.ListSigningKeys(e.ctx)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, "k2", keys[0].KeyID, "the newest key is never deleted")
}

// testTaskIdentities checks that the first record of a task is kept, read
// back, deleted and expired.
func testTaskIdentities(t *testing.T, open Opener) {
	e := setup(t, open)
	_, err := e.s.GetTaskIdentity(e.ctx, "t1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, e.s.PutTaskIdentity(e.ctx, &store.TaskIdentity{TaskID: "t1", Claims: `{"a":1}`, Expires: Epoch.Add(time.Hour)}))
	require.NoError(t, e.s.PutTaskIdentity(e.ctx, &store.TaskIdentity{TaskID: "t1", Claims: `{"a":2}`, Expires: Epoch.Add(2 * time.Hour)}))
	require.NoError(t, e.s.PutTaskIdentity(e.ctx, &store.TaskIdentity{TaskID: "t2", Claims: `{}`, Expires: Epoch.Add(3 * time.Hour)}))
	got, err := e.s.GetTaskIdentity(e.ctx, "t1")
	require.NoError(t, err)
	require.Equal(t, &store.TaskIdentity{TaskID: "t1", Claims: `{"a":1}`, Expires: Epoch.Add(time.Hour)}, got, "the first record stands")

	n, err := e.s.ExpireTaskIdentities(e.ctx, Epoch.Add(90*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, err = e.s.GetTaskIdentity(e.ctx, "t1")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, e.s.DeleteTaskIdentity(e.ctx, "t2"))
	require.NoError(t, e.s.DeleteTaskIdentity(e.ctx, "t2"), "deleting nothing is no error")
	_, err = e.s.GetTaskIdentity(e.ctx, "t2")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// testRecordAudit checks that an entry with no change (a refusal) is
// listed under the client that was refused, beside its changes.
func testRecordAudit(t *testing.T, open Opener) {
	e := setup(t, open)
	require.NoError(t, e.s.RecordAudit(e.ctx, store.AuditIDToken, "task/0", store.Audit{ClientID: "task-client/x", Action: "refused: InsufficientScopes", At: Epoch}))
	got, _, err := e.s.ListAuditHistory(e.ctx, store.AuditQuery{ByClient: "task-client/x"}, store.Page{})
	require.NoError(t, err)
	require.Equal(t, []store.AuditEntry{{EntityType: store.AuditIDToken, EntityID: "task/0", ClientID: "task-client/x",
		Action: "refused: InsufficientScopes", Created: Epoch}}, got)
}

// testSigningKeyRace has replicas add the same generations at once: each
// generation is stored once, and every replica lists the same keys.
func testSigningKeyRace(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	const replicasEach, generations = 4, 5
	for gen := int64(1); gen <= generations; gen++ {
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs errorList
		added := 0
		for i, s := range stores {
			for j := range replicasEach {
				wg.Go(func() {
					id := string(rune('a'+i)) + string(rune('0'+j))
					ok, err := s.AddSigningKey(ctx, &store.SigningKey{Generation: gen, KeyID: id + "-" + string(rune('0'+gen)), Algorithm: "RS256",
						Sealed: "x", Created: Epoch, Activates: Epoch})
					errs.add(err)
					if ok {
						mu.Lock()
						added++
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		errs.require(t)
		require.Equal(t, 1, added, "generation %d stored once", gen)
	}
	first, err := stores[0].ListSigningKeys(ctx)
	require.NoError(t, err)
	require.Len(t, first, generations)
	for _, s := range stores[1:] {
		keys, err := s.ListSigningKeys(ctx)
		require.NoError(t, err)
		require.Equal(t, first, keys)
	}
}
