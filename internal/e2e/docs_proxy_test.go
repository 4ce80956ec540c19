package e2e_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

// The production guide's reverse proxies, run as written: Caddy's and
// nginx's own checks accept the guide's files, then a Hawk-signed request
// goes through each proxy to hopper. The proxy must listen on port 443:
// behind "X-Forwarded-Proto: https" hopper verifies the port the client
// signed as 443, which is the point of the guide's settings. So that
// parallel tests (and the machine's own services) do not collide on 443,
// each proxy binds one random address of the loopback network 127.0.0.0/8,
// which Linux routes to lo without configuration.

// proxyHost picks a loopback address whose port 443 is free.
func proxyHost(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("binding port 443 needs root (the proxy examples run as root, as in CI)")
	}
	for range 20 {
		ip := fmt.Sprintf("127.%d.%d.%d", 1+mrand.IntN(250), mrand.IntN(256), 1+mrand.IntN(250))
		l, err := net.Listen("tcp", ip+":443")
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return ip
	}
	t.Fatal("no free port 443 on 20 loopback addresses")
	return ""
}

// signedThrough creates a task through the proxy at rootURL, trusting
// the CA in caFile, and reads its status back: both requests are signed
// with Hawk for the proxy's host and port 443.
func signedThrough(t *testing.T, rootURL, caFile string) {
	t.Helper()
	pemBytes, err := os.ReadFile(caFile)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemBytes))
	q := &tcclient.Client{RootURL: rootURL,
		HTTPClient:  &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		Credentials: &tcclient.Credentials{ClientID: "static/taskcluster/root", AccessToken: e2e.RootAccessToken}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	taskID := tcclient.NewTaskID()
	def := backupTaskDef("proxy/test")
	def.Payload = json.RawMessage(`{"command": [["true"]], "maxRunTime": 60}`)
	_, err = q.CreateTask(ctx, taskID, def)
	require.NoError(t, err, "a Hawk-signed createTask through the proxy")
	st, err := q.Status(ctx, taskID)
	require.NoError(t, err)
	require.Equal(t, tcclient.StatePending, st.State)
}

// startProxy runs a proxy until the test ends and returns its logs.
func startProxy(t *testing.T, name string, args ...string) *e2e.SyncBuffer {
	t.Helper()
	cmd := exec.Command(name, args...)
	logs := &e2e.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	require.NoError(t, cmd.Start(), "starting %s", name)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	return logs
}

// waitTLS waits until something accepts TLS handshakes at host:443.
func waitTLS(t *testing.T, host string, logs *e2e.SyncBuffer) {
	t.Helper()
	require.Eventually(t, func() bool {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", host+":443", &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}, 60*time.Second, 100*time.Millisecond, "the proxy serves TLS on %s:443; its logs:\n%s", host, logs)
}

func TestProductionCaddy(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	if _, err := exec.LookPath("caddy"); err != nil {
		t.Skip("caddy is not installed: apt-get install caddy (Debian's package, as .ci/run does)")
	}
	block := e2e.DocExample(t, "production-caddy")
	dir := t.TempDir()
	asWritten := filepath.Join(dir, "Caddyfile")
	require.NoError(t, os.WriteFile(asWritten, []byte(block.Text), 0o600))
	cmd := exec.Command("caddy", "validate", "--adapter", "caddyfile", "--config", asWritten)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "caddy validate of the guide's Caddyfile:\n%s", out)

	host := proxyHost(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--root-url", "https://" + host}})
	// The guide's site, for this address and this hopper; the global
	// options keep Caddy to the test's address, its own storage, no admin
	// endpoint and out of the machine's trust store. Caddy certifies an
	// IP address with its own local CA.
	storage := filepath.Join(dir, "storage")
	global := fmt.Sprintf("{\n\tadmin off\n\tskip_install_trust\n\tdefault_bind %s\n\thttp_port %s\n\tstorage file_system %s\n}\n",
		host, portOf(t, e2e.FreePort(t)), storage)
	site := block.Replace(t, "hopper.example.com", host, "127.0.0.1:8080", hostOf(srv.RootURL))
	run := filepath.Join(dir, "Caddyfile.run")
	require.NoError(t, os.WriteFile(run, []byte(global+site), 0o600))
	logs := startProxy(t, "caddy", "run", "--adapter", "caddyfile", "--config", run)
	waitTLS(t, host, logs)
	signedThrough(t, "https://"+host, filepath.Join(storage, "pki", "authorities", "local", "root.crt"))
}

func TestProductionNginx(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("-short: skips running the hopper binary")
	}
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed: apt-get install nginx-light (Debian's package, as .ci/run does)")
	}
	host := proxyHost(t)
	srv := e2e.StartServer(t, e2e.ServerOptions{Args: []string{"--root-url", "https://" + host}})
	dir := t.TempDir()
	certFile, keyFile := selfSigned(t, dir, net.ParseIP(host))
	server := e2e.DocExample(t, "production-nginx").Replace(t,
		"listen 443 ssl;", "listen "+host+":443 ssl;",
		"/etc/ssl/hopper.example.com.pem", certFile, "/etc/ssl/hopper.example.com.key", keyFile,
		"127.0.0.1:8080", hostOf(srv.RootURL))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hopper.conf"), []byte(server), 0o600))
	// The guide's block is a server of nginx's http context, included as
	// Debian's nginx.conf includes sites-enabled/*; everything nginx
	// writes stays in the test's directory.
	main := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log stderr;
user root;
events {}
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/hopper.conf;
}
`, dir)
	conf := filepath.Join(dir, "nginx.conf")
	require.NoError(t, os.WriteFile(conf, []byte(main), 0o600))
	out, err := exec.Command("nginx", "-t", "-p", dir, "-c", conf).CombinedOutput()
	require.NoError(t, err, "nginx -t of the guide's server block:\n%s", out)
	logs := startProxy(t, "nginx", "-p", dir, "-c", conf)
	waitTLS(t, host, logs)
	signedThrough(t, "https://"+host, certFile)
}

// hostOf returns host:port of an http:// root URL.
func hostOf(rootURL string) string { return rootURL[len("http://"):] }

// portOf returns the port of host:port.
func portOf(t *testing.T, addr string) string {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	return port
}
