package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// selfSigned writes a certificate for ips (127.0.0.1 when none) and its
// key as PEM files.
func selfSigned(t *testing.T, dir string, ips ...net.IP) (certFile, keyFile string) {
	t.Helper()
	if len(ips) == 0 {
		ips = []net.IP{net.ParseIP("127.0.0.1")}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "hopper test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

// TestServeTLS: `hopper serve --tls-cert --tls-key` serves HTTPS itself;
// a worker trusting the certificate long-polls (its claimWork calls park
// on TLS connections), runs a task and uploads its log, all signed with
// Hawk over https.
func TestServeTLS(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir)
	addr := e2e.FreePort(t)
	// The production guide's command, as written, on a free port with the
	// test's certificate.
	e2e.DocShell{Dir: dir, Env: []string{"HOPPER_ROOT_ACCESS_TOKEN=" + e2e.RootAccessToken}, Replace: []string{
		"0.0.0.0:443", addr, "https://hopper.example.com", "https://" + addr,
		"/etc/hopper/tls/fullchain.pem", certFile, "/etc/hopper/tls/privkey.pem", keyFile}}.
		Start(t, e2e.DocExample(t, "production-serve-tls"))

	pool := x509.NewCertPool()
	pemBytes, err := os.ReadFile(certFile)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	httpClient := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	rootURL := "https://" + addr
	require.Eventually(t, func() bool {
		resp, err := httpClient.Get(rootURL + "/api/queue/v1/ping")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "hopper serves https")
	plain, err := http.Get("http://" + addr + "/api/queue/v1/ping")
	if err == nil {
		plain.Body.Close()
		require.NotEqual(t, http.StatusOK, plain.StatusCode, "no plain HTTP beside TLS")
	}

	srv := &e2e.Server{RootURL: rootURL, ClientID: "static/taskcluster/root", Token: e2e.RootAccessToken}
	w := e2e.StartWorker(t, srv, e2e.WorkerOptions{TaskQueueID: "tls/test", Env: []string{"SSL_CERT_FILE=" + certFile}})
	q := &tcclient.Client{RootURL: rootURL, HTTPClient: httpClient, Credentials: &tcclient.Credentials{ClientID: srv.ClientID, AccessToken: srv.Token}}
	ctx := context.Background()
	w.WaitPolling(t, q) // the task is created while the worker's claimWork waits
	taskID := tcclient.NewTaskID()
	def := backupTaskDef("tls/test")
	def.Payload = json.RawMessage(`{"command": [["sh", "-c", "echo over tls"]], "maxRunTime": 60}`)
	_, err = q.CreateTask(ctx, taskID, def)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		st, err := q.Status(ctx, taskID)
		return err == nil && st.State == tcclient.StateCompleted
	}, 60*time.Second, 100*time.Millisecond, "the worker runs the task over https")
	_, err = q.GetLatestArtifact(ctx, taskID, "public/logs/live_backing.log")
	require.NoError(t, err)
}
