package e2e

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/testclock"
)

// AzuriteAccount and AzuriteKey are Azurite's default account and its
// well-known key (public, in Microsoft's documentation).
const (
	AzuriteAccount = "devstoreaccount1"
	AzuriteKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// AzuriteVersion is the npm azurite release the tests run.
const AzuriteVersion = "3.37.0"

// AzuriteBinary is Azure storage's emulator, Azurite, where
// HOPPER_TEST_AZURITE or the user cache
// (~/.cache/hopper-test/azurite-<version>, `npm install --prefix` there)
// has it, or "".
func AzuriteBinary() string {
	if p := os.Getenv("HOPPER_TEST_AZURITE"); p != "" {
		return p
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	p := filepath.Join(home, ".cache", "hopper-test", "azurite-"+AzuriteVersion, "node_modules", ".bin", "azurite")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// StartAzurite runs Azurite's blob and table services on loopback until
// the test ends and returns their endpoints with {account} where the
// account's name goes (hopper's HOPPER_AZURE_*_ENDPOINT form). It skips
// the test, saying so, when Azurite is not installed.
func StartAzurite(t testing.TB) (blob, table string) {
	t.Helper()
	bin := AzuriteBinary()
	if bin == "" {
		t.Skipf("Azurite is not installed: npm install --prefix ~/.cache/hopper-test/azurite-%s azurite@%s (or set HOPPER_TEST_AZURITE)",
			AzuriteVersion, AzuriteVersion)
	}
	blobAddr, tableAddr, queueAddr := FreePort(t), FreePort(t), FreePort(t)
	port := func(a string) string { return a[strings.LastIndex(a, ":")+1:] }
	cmd := exec.Command(bin, "--silent", "--location", t.TempDir(), "--blobHost", "127.0.0.1", "--blobPort", port(blobAddr),
		"--tableHost", "127.0.0.1", "--tablePort", port(tableAddr), "--queueHost", "127.0.0.1", "--queuePort", port(queueAddr))
	logs := &SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting azurite: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("azurite:\n%s", logs.String())
		}
	})
	err := testclock.Poll(context.Background(), time.Minute, func() bool {
		for _, a := range []string{blobAddr, tableAddr} {
			resp, err := http.Get("http://" + a + "/")
			if err != nil {
				return false
			}
			resp.Body.Close()
		}
		return true
	})
	if err != nil {
		t.Fatalf("azurite does not answer: %v\n%s", err, logs.String())
	}
	return "http://" + blobAddr + "/{account}", "http://" + tableAddr + "/{account}"
}
