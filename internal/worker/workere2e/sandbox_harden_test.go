package workere2e

import (
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// TestSandboxCrashedRunLeavesNothing: a worker killed outright leaves its
// running task's directory behind; the next worker on the same work dir
// removes it before its first claim, so the next task of the same slot
// user cannot read what the crashed one wrote. A directory kept after its
// run (cleanUpTaskDirs false) is taken back from the slot's user, so the
// next task of that user cannot read it either.
func TestSandboxCrashedRunLeavesNothing(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	queue := uniqueQueue("crashdir")
	hb := heartbeatDir(t)
	victim := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo "the crashed run's secret" > secret.txt
echo "$TASK_WORKDIR" > "$HB/victim-dir"; sleep 300`}},
		"env": map[string]string{"HB": hb}, "maxRunTime": 600,
	}, func(d *tcclient.TaskDefinition) { d.Retries = new(0) })
	a := strictWorker(t, queue, "crashdir-a", 0, nil)
	dirFile := filepath.Join(hb, "victim-dir")
	// The shell's redirection creates the file before echo writes to it:
	// the name is read once its line is whole, never an empty name.
	var victimDir string
	require.Eventually(t, func() bool {
		raw, err := os.ReadFile(dirFile)
		if err != nil || !strings.HasSuffix(string(raw), "\n") {
			return false
		}
		victimDir = strings.TrimSpace(string(raw))
		return victimDir != ""
	}, 30*time.Second, 50*time.Millisecond)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGKILL))
	<-a.done
	require.FileExists(t, filepath.Join(victimDir, "secret.txt"), "the crash left the task directory")
	require.Eventually(t, func() bool { return status(t, victim).State == tcclient.StateException }, 20*time.Second, 100*time.Millisecond)

	snoop := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `echo "snooping on $D as $(id -un)"
if cat "$D/secret.txt"; then echo READ""-CRASHED-RUN; else echo "crashed run's file: gone"; fi
echo "the kept run's secret" > secret.txt; echo "$TASK_WORKDIR" > "$HB/kept-dir"`}},
		"env": map[string]string{"D": victimDir, "HB": hb}, "maxRunTime": 60,
	}, nil)
	next := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `if cat "$(cat "$HB/kept-dir")/secret.txt"; then echo READ""-KEPT-RUN; else echo "kept run's file: unreadable"; fi`}},
		"env":     map[string]string{"HB": hb}, "maxRunTime": 60,
	}, nil)
	workDir := filepath.Join(filepath.Dir(a.configFile), "work")
	b := strictWorker(t, queue, "crashdir-b", 2, map[string]any{"workDir": workDir, "cleanUpTaskDirs": false})
	require.Equal(t, 0, b.wait(t, 60*time.Second))
	require.Equal(t, tcclient.StateCompleted, status(t, next).State)
	nextLog := backingLog(t, next, 0)
	require.Contains(t, nextLog, "kept run's file: unreadable")
	require.NotContains(t, nextLog, "READ-KEPT-RUN")
	require.Equal(t, tcclient.StateCompleted, status(t, snoop).State)
	log := backingLog(t, snoop, 0)
	require.Contains(t, log, "snooping on "+victimDir+" as hopper-task-1")
	require.Contains(t, log, "crashed run's file: gone")
	require.NotContains(t, log, "READ-CRASHED-RUN")
	require.NoDirExists(t, victimDir)
}

// TestSandboxIPCPrivilegesAndVarTmp: a task's SysV shared memory and
// message queues are the task's own (its commands share them; the next
// task, of another slot user, and the machine never see them), its
// commands run with no-new-privileges, cannot make user namespaces, and
// have a /var/tmp of their own.
func TestSandboxIPCPrivilegesAndVarTmp(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	for _, tool := range []string{"ipcmk", "ipcs", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (util-linux)", tool)
		}
	}
	queue := uniqueQueue("ipc")
	hb := heartbeatDir(t)
	marker := "hopper-e2e-" + queue[len(queue)-10:]
	// A size of this run's own, so that no other segment can pass for it.
	size := strconv.Itoa(6000000 + mrand.IntN(999999))
	first := createTaskWith(t, queue, map[string]any{
		"command": [][]string{
			{"sh", "-c", `ipcmk -M ` + size + ` -p 0644; ipcmk -Q -p 0604; echo "the first task's secret" > /var/tmp/` + marker + `
grep NoNewPrivs /proc/self/status
if unshare -U true 2>/dev/null; then echo USERNS""-MADE; else echo "user namespace: refused"; fi
if unshare -U -r true 2>/dev/null; then echo USERNS""-ROOT-MADE; else echo "user namespace as root: refused"; fi`},
			{"sh", "-c", `echo "segments seen by the next command: $(ipcs -m | grep -c ` + size + `)"; touch "$HB/first-done"`},
		},
		"env": map[string]string{"HB": hb}, "maxRunTime": 60,
	}, nil)
	second := createTaskWith(t, queue, map[string]any{
		"command": [][]string{{"sh", "-c", `while [ ! -f "$HB/first-done" ]; do sleep 0.05; done
echo "segments seen by another task: $(ipcs -m | grep -c ` + size + `)"; echo "queues seen by another task: $(ipcs -q | grep -c ' 604 ')"
if cat /var/tmp/` + marker + ` 2>/dev/null; then echo READ""-OTHER-VARTMP; else echo "other task's /var/tmp file: not there"; fi`}},
		"env": map[string]string{"HB": hb}, "maxRunTime": 60,
	}, nil)
	w := strictWorker(t, queue, "ipc", 2, map[string]any{"capacity": 2})
	require.Equal(t, 0, w.wait(t, 60*time.Second))
	log := backingLog(t, first, 0)
	require.Equal(t, tcclient.StateCompleted, status(t, first).State, log)
	require.Contains(t, log, "Shared memory id:")
	require.Contains(t, log, "segments seen by the next command: 1", "a task's commands share its IPC namespace")
	require.Regexp(t, `NoNewPrivs:\s+1`, log)
	require.Contains(t, log, "user namespace: refused")
	require.Contains(t, log, "user namespace as root: refused")
	require.NotContains(t, log, "USERNS-MADE")
	require.NotContains(t, log, "USERNS-ROOT-MADE")
	require.Contains(t, log, "no new privileges, no user namespaces")
	log = backingLog(t, second, 0)
	require.Equal(t, tcclient.StateCompleted, status(t, second).State, log)
	require.Contains(t, log, "segments seen by another task: 0")
	require.Contains(t, log, "queues seen by another task: 0")
	require.Contains(t, log, "other task's /var/tmp file: not there")
	require.NotContains(t, log, "the first task's secret")
	out, err := exec.Command("ipcs", "-m").CombinedOutput()
	require.NoError(t, err)
	require.NotContains(t, string(out), " "+size+" ", "the task's segment outlived it on the machine")
	require.NoFileExists(t, "/var/tmp/"+marker)
}

// TestSandboxNetwork: a strict task has a network namespace of its own.
// A service on the machine's loopback (as PostgreSQL trusting loopback
// connections) is out of its reach, directly and through slirp4netns's
// alias for the machine's loopback; with taskNetwork outbound it reaches
// a service on the machine's own (non-loopback) address, with none it
// does not; its taskcluster proxy works in both. Only addresses of this
// machine are ever connected to.
func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	needStrictSandbox(t)
	loopback := serveHello(t, "127.0.0.1:0", "LOOPBACK-SERVICE")
	outbound := ""
	if addr := machineAddress(t); addr != "" {
		outbound = serveHello(t, net.JoinHostPort(addr, "0"), "OUTBOUND-SERVICE")
	} else {
		t.Log("this machine has no non-loopback IPv4 address: outbound reach is not checked")
	}
	_, loopPort, _ := net.SplitHostPort(loopback)
	script := proxyPing + `probe() { out=$(timeout 10 bash -c 'exec 3<>"/dev/tcp/$1/$2" && head -1 <&3' _ "$1" "$2" 2>&1); echo "$3: [$out]"; }
probe 127.0.0.1 ` + loopPort + ` loopback
probe 10.0.2.2 ` + loopPort + ` slirp-host-alias
if [ -n "$OUTBOUND" ]; then probe "${OUTBOUND%:*}" "${OUTBOUND##*:}" outbound; fi
echo "proxy: $(ping_proxy "$TASKCLUSTER_PROXY_URL")"`
	payload := map[string]any{
		"command":  [][]string{{"bash", "-c", script}},
		"features": map[string]any{"taskclusterProxy": true},
		"env":      map[string]string{"OUTBOUND": outbound}, "maxRunTime": 60,
	}
	for _, network := range []string{"outbound", "none"} {
		t.Run(network, func(t *testing.T) {
			t.Parallel()
			queue := uniqueQueue("net-" + network)
			id := createTaskWith(t, queue, payload, nil)
			w := strictWorker(t, queue, "net-"+network, 1, map[string]any{"taskNetwork": network})
			require.Equal(t, 0, w.wait(t, 60*time.Second))
			log := backingLog(t, id, 0)
			require.Equal(t, tcclient.StateCompleted, status(t, id).State, log)
			require.Contains(t, log, "own IPC and network namespaces (network: "+network+")")
			require.NotContains(t, log, "LOOPBACK-SERVICE", "the task reached the machine's loopback")
			require.Contains(t, log, "loopback: [")
			require.Regexp(t, `proxy: HTTP/1\.[01] 200`, log)
			if outbound == "" {
				return
			}
			if network == "outbound" {
				require.Contains(t, log, "outbound: [OUTBOUND-SERVICE]")
			} else {
				require.Contains(t, log, "outbound: [")
				require.NotContains(t, log, "OUTBOUND-SERVICE")
			}
		})
	}
}

// serveHello listens on addr and writes message to every connection until
// the test ends; it returns the address.
func serveHello(t *testing.T, addr, message string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(message + "\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// machineAddress is a global IPv4 address of one of this machine's up
// interfaces ("" if it has none): traffic to it stays on the machine.
func machineAddress(t *testing.T) string {
	t.Helper()
	ifaces, err := net.Interfaces()
	require.NoError(t, err)
	for _, ifc := range ifaces {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	return ""
}
