package dockertest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDaemonEndsWithItsTestBinary starts a daemon in a child test binary,
// kills that binary as go test's -timeout would (no Stop, no deferred
// cleanup), and checks that the daemon stops by itself.
func TestDaemonEndsWithItsTestBinary(t *testing.T) {
	if os.Getenv("HOPPER_DOCKERTEST_CHILD") == "1" {
		d, err := Start()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("dockerd %d %s\n", d.cmd.Process.Pid, d.dir)
		time.Sleep(time.Hour) // killed by the parent
		return
	}
	if m := Missing(); m != "" {
		t.Skip("no test daemon here: " + m)
	}
	child := exec.Command(os.Args[0], "-test.run=^TestDaemonEndsWithItsTestBinary$", "-test.timeout=5m")
	child.Env = append(os.Environ(), "HOPPER_DOCKERTEST_CHILD=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the child's daemon: %v (%q)", err, line)
	}
	fields := strings.Fields(line)
	if len(fields) != 3 || fields[0] != "dockerd" {
		t.Fatalf("the child said %q", line)
	}
	pid, err := strconv.Atoi(fields[1])
	if err != nil {
		t.Fatal(err)
	}
	dir := fields[2]
	// The daemon's directory is the child's to remove, and it cannot:
	// clean it up here once the daemon is gone.
	defer func() { unmountBelow(dir); _ = os.RemoveAll(dir) }()
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	deadline := time.Now().Add(60 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("dockerd %d still runs a minute after its test binary was killed", pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive says whether pid names a process that has not ended (a zombie,
// whose parent has not reaped it yet, has ended).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
