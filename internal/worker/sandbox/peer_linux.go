package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
)

// PeerUID returns the user owning the client end of a loopback TCP
// connection that a server accepted, seen from the server as local (its
// own address) and remote (the client's). TCP carries no credentials, but
// the kernel lists every socket with its owner in /proc/net/tcp{,6}: the
// client's socket is the one whose local port is remote's and whose remote
// port is local's. A task's taskcluster proxy uses it to serve its own
// task user only, not other tasks on the machine.
func PeerUID(local, remote net.Addr) (int, error) {
	l, lok := local.(*net.TCPAddr)
	r, rok := remote.(*net.TCPAddr)
	if !lok || !rok {
		return -1, fmt.Errorf("not a TCP connection: %s ← %s", local, remote)
	}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		uid, found, err := findSocketOwner(table, r.Port, l.Port)
		if err != nil {
			return -1, err
		}
		if found {
			return uid, nil
		}
	}
	return -1, fmt.Errorf("no socket from port %d to port %d", r.Port, l.Port)
}

// findSocketOwner scans a /proc/net/tcp table for an established socket
// from port to port and returns its uid.
func findSocketOwner(table string, fromPort, toPort int) (int, bool, error) {
	f, err := os.Open(table)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", table, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local rem st tx:rx tr:when retrnsmt uid …
		if len(fields) < 8 || fields[3] != "01" {
			continue
		}
		if hexPort(fields[1]) != fromPort || hexPort(fields[2]) != toPort {
			continue
		}
		uid, err := strconv.Atoi(fields[7])
		if err != nil {
			return 0, false, fmt.Errorf("reading %s: bad uid %q", table, fields[7])
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// hexPort reads the port of an "ADDR:PORT" entry (both in hex).
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	n, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(n)
}
