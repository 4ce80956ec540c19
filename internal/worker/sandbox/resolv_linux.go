package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// slirpDNS is slirp4netns's DNS forwarder inside the task's network: it
// forwards queries to the machine's own resolvers, loopback ones included
// (its alias for the machine's loopback, which stays disabled, is another
// address).
const slirpDNS = "10.0.2.3"

// taskResolvConf is the resolver configuration a task with an outbound
// network needs, given the machine's: a resolver on the machine's loopback
// (systemd-resolved's 127.0.0.53, a local dnsmasq) is not on the task's, so
// such nameserver lines give way to slirp4netns's forwarder; the other
// lines (search, options) stay. ok is false when the machine's file serves
// the task as it is.
func taskResolvConf(machine string) (task string, ok bool) {
	var b strings.Builder
	loopback, forwarder := false, false
	sc := bufio.NewScanner(strings.NewReader(machine))
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "nameserver" {
			if ip := net.ParseIP(fields[1]); ip != nil && ip.IsLoopback() {
				loopback = true
				if !forwarder {
					b.WriteString("nameserver " + slirpDNS + "\n")
					forwarder = true
				}
				continue
			}
		}
		b.WriteString(line + "\n")
	}
	return b.String(), loopback
}

// prepareResolvConf writes, when the machine's resolvers are on its
// loopback, the resolver configuration tasks with an outbound network see
// at /etc/resolv.conf (their init mounts it there), and returns its path
// ("" when the machine's file serves).
func prepareResolvConf(dir string) (string, error) {
	machine, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		// No resolver configured: nothing to adapt.
		return "", nil
	}
	task, ok := taskResolvConf(string(machine))
	if !ok {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("writing the tasks' resolv.conf: %w", err)
	}
	path := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(path, []byte(task), 0o644); err != nil {
		return "", fmt.Errorf("writing the tasks' resolv.conf: %w", err)
	}
	return path, os.Chmod(path, 0o644)
}
