package secrets

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/auth"
)

func TestSealOpen(t *testing.T) {
	t.Parallel()
	key, err := auth.GenerateKey()
	require.NoError(t, err)
	s, err := auth.NewSealer(key)
	require.NoError(t, err)
	expires := time.Now().Add(time.Hour)

	sec, err := Seal(s, "proj/db", json.RawMessage(" {\"password\": \"p4ss\"} "), expires)
	require.NoError(t, err)
	require.NotContains(t, sec.Sealed, "p4ss")
	value, err := Open(s, sec)
	require.NoError(t, err)
	require.Equal(t, `{"password":"p4ss"}`, string(value))

	// A sealed value moved to another secret's row does not open.
	moved := *sec
	moved.Name = "proj/other"
	_, err = Open(s, &moved)
	require.Error(t, err)
	require.NotContains(t, err.Error(), "p4ss")

	for _, bad := range []string{`"text"`, `[1]`, `{`, ``, `null`} {
		_, err := Seal(s, "x", json.RawMessage(bad), expires)
		require.ErrorIs(t, err, ErrNotObject, bad)
	}
}

func TestReadable(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.True(t, Readable(now.Add(time.Millisecond), now))
	require.True(t, Readable(now, now), "readable up to its expiry instant")
	require.False(t, Readable(now.Add(-time.Millisecond), now))
}
