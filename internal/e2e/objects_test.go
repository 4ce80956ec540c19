package e2e_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
)

// TestOfficialClientObjects runs e2e/node/objects.mjs — the Object API
// through the npm client's upload() and download() helpers (inline and
// putUrl uploads, scopes, hashes, unfinished uploads, expiry) and object
// artifacts through createArtifact, finishArtifact and downloadArtifact() —
// against the built-in blob store and against S3 (MinIO).
func TestOfficialClientObjects(t *testing.T) {
	t.Parallel()
	e2e.RequireNode(t)
	for _, b := range blobBackends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			// Expiry runs every second, so the script sees an expired
			// object's data go.
			srv := b.start(t, "--expire-interval", "1s")
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			out := e2e.RunNode(ctx, t, "objects.mjs", append(srv.Env(), "HOPPER_BACKEND="+b.name)...)
			require.Contains(t, out, fmt.Sprintf("objects (%s): all passed", b.name))
			t.Log(out)
		})
	}
}
