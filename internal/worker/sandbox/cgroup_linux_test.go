package sandbox

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCgroupLayouts reads the two layouts the sandbox meets: pure cgroup
// v2 (systemd's default, the worker in a service's cgroup) and a hybrid
// machine whose memory and pids controllers live in v1 hierarchies.
func TestCgroupLayouts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		mountinfo string
		cgroup    string
		want      map[string]string // hierarchy ("" = v2, else a v1 controller) → own dir
	}{
		{
			name: "pure v2",
			mountinfo: `22 1 0:21 / /proc rw,nosuid - proc proc rw
35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
`,
			cgroup: "0::/system.slice/hopper-worker.service\n",
			want:   map[string]string{"": "/sys/fs/cgroup/system.slice/hopper-worker.service"},
		},
		{
			name: "hybrid",
			mountinfo: `30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
`,
			cgroup: "5:pids:/\n4:memory:/process_api/abc\n3:cpu,cpuacct:/\n0::/\n",
			want: map[string]string{"": "/sys/fs/cgroup/unified", "memory": "/sys/fs/cgroup/memory/process_api/abc",
				"pids": "/sys/fs/cgroup/pids", "cpuacct": "/sys/fs/cgroup/cpu,cpuacct"},
		},
		{
			name: "v1 bind-mounted below the root (container without a cgroup namespace)",
			mountinfo: `40 25 0:27 /docker/abc /sys/fs/cgroup/memory ro,nosuid - cgroup cgroup rw,memory
`,
			cgroup: "4:memory:/docker/abc\n",
			want:   map[string]string{"memory": "/sys/fs/cgroup/memory"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mounts, err := parseCgroupMounts(strings.NewReader(tt.mountinfo))
			require.NoError(t, err)
			own := parseOwnCgroups(tt.cgroup)
			got := map[string]string{}
			for _, m := range mounts {
				if m.v2 {
					got[""] = ownDir(m, own[""])
					continue
				}
				for c := range m.controllers {
					if c == "memory" || c == "pids" || c == "cpuacct" {
						got[c] = ownDir(m, own[c])
					}
				}
			}
			require.Equal(t, tt.want, got)
		})
	}
}
