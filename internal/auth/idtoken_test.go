package auth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKeyScheduleRotation walks a key's life: the first signs at once; the
// next is made SigningKeyLead before the first's time is up and published
// at once, signs from its activation, and the first stays published until
// MaxIDTokenLifetime after that.
func TestKeyScheduleRotation(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var s KeySchedule
	require.Equal(t, int64(1), s.NextGeneration(t0))
	k1, err := NewSigningKey(1, t0)
	require.NoError(t, err)
	s = append(s, *k1)
	require.Equal(t, k1.KeyID, s.Signing(t0).KeyID, "the first key signs at once")
	require.Zero(t, s.NextGeneration(t0.Add(SigningKeyRotation-SigningKeyLead-time.Second)))

	made := t0.Add(SigningKeyRotation - SigningKeyLead)
	require.Equal(t, int64(2), s.NextGeneration(made))
	k2, err := NewSigningKey(2, made)
	require.NoError(t, err)
	s = append(s, *k2)
	require.Zero(t, s.NextGeneration(made))
	ids := func(keys []SigningKey) []string {
		var out []string
		for _, k := range keys {
			out = append(out, k.KeyID)
		}
		return out
	}
	tests := []struct {
		name      string
		at        time.Time
		signing   string
		published []string
	}{
		{"published before use", made, k1.KeyID, []string{k1.KeyID, k2.KeyID}},
		{"just before the switch", k2.Activates.Add(-time.Second), k1.KeyID, []string{k1.KeyID, k2.KeyID}},
		{"the new key signs", k2.Activates, k2.KeyID, []string{k1.KeyID, k2.KeyID}},
		{"the old key outlives its last token", k2.Activates.Add(MaxIDTokenLifetime), k2.KeyID, []string{k1.KeyID, k2.KeyID}},
		{"then it goes", k2.Activates.Add(MaxIDTokenLifetime + time.Second), k2.KeyID, []string{k2.KeyID}},
	}
	for _, tc := range tests {
		require.Equal(t, tc.signing, s.Signing(tc.at).KeyID, tc.name)
		require.Equal(t, tc.published, ids(s.Published(tc.at)), tc.name)
		require.Len(t, s.JWKS(tc.at).Keys, len(tc.published), tc.name)
	}
}

// TestTokenRequestExpiryAndSubject: a token ends with the claim, never
// after MaxIDTokenLifetime; a forge task's subject is its role.
func TestTokenRequestExpiryAndSubject(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	r := TokenRequest{Now: now, TakenUntil: now.Add(20 * time.Minute), ProjectID: "p", TaskQueueID: "a/b"}
	require.Equal(t, now.Add(20*time.Minute), r.Expiry())
	require.Equal(t, "project:p:task-queue:a/b", r.Subject())
	r.TakenUntil = now.Add(48 * time.Hour)
	require.Equal(t, now.Add(MaxIDTokenLifetime), r.Expiry())
	r.Forge = &ForgeClaims{Role: "repo:github.com/o/r:branch:main"}
	require.Equal(t, "repo:github.com/o/r:branch:main", r.Subject())
	require.Equal(t, "repo:github.com/o/r:branch:main", r.Claims()["sub"])
}

func TestParseRunClientID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in string
		ok bool
	}{
		{"task-client/abc/0/on/wg/w1/until/1700000000.5", true},
		{"task-client/abc/12/on/wg/w1/until/17", true},
		{"task-client/abc/01/on/wg/w1/until/17", false},
		{"task-client/abc/x/on/wg/w1/until/17", false},
		{"task-client/abc/0/at/wg/w1/until/17", false},
		{"task-client/abc/0/on/wg/w1/until/17/more", false},
		{"static/taskcluster/root", false},
	}
	for _, tc := range tests {
		got, ok := ParseRunClientID(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		if ok {
			require.Equal(t, "abc", got.TaskID)
			require.Equal(t, "wg", got.WorkerGroup)
			require.Equal(t, "w1", got.WorkerID)
		}
	}
}

func TestS3SessionPolicy(t *testing.T) {
	t.Parallel()
	p, err := S3SessionPolicy(S3ReadOnly, "b", "cache/")
	require.NoError(t, err)
	require.Contains(t, p, `"arn:aws:s3:::b/cache/*"`)
	require.NotContains(t, p, "s3:PutObject")
	p, err = S3SessionPolicy(S3ReadWrite, "b", "cache/")
	require.NoError(t, err)
	require.Contains(t, p, "s3:PutObject")
	for _, bad := range [][3]string{{"admin", "b", "x"}, {S3ReadOnly, "b", "x*"}, {S3ReadOnly, "b", "${aws:username}"}, {S3ReadOnly, "b/c", "x"}} {
		_, err := S3SessionPolicy(bad[0], bad[1], bad[2])
		require.Error(t, err, "%v", bad)
	}
}

// BenchmarkSignIDToken is the signing alone (RS256 over a task's claims),
// of BenchmarkCreateIDToken's whole call (internal/authapi).
func BenchmarkSignIDToken(b *testing.B) {
	now := time.Now()
	key, err := NewSigningKey(1, now)
	require.NoError(b, err)
	r := TokenRequest{Issuer: "https://hopper.example.com", Audience: "sts.amazonaws.com", TaskID: "fN1SbArXTPSVFNUvaOlinQ", TaskGroupID: "fN1SbArXTPSVFNUvaOlinQ",
		TaskQueueID: "proj/linux", ProjectID: "proj", SchedulerID: "-", WorkerGroup: "wg", WorkerID: "w1", Now: now, TakenUntil: now.Add(20 * time.Minute),
		Forge: &ForgeClaims{Host: "github.com", Repository: "acme/app", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567", Event: "push", Role: "repo:github.com/acme/app:branch:main"}}
	for b.Loop() {
		if _, err := Sign(key, r.Claims()); err != nil {
			b.Fatal(err)
		}
	}
}
