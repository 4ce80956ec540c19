// Package buildinfo says which build of hopper is running: the module
// version `go install …@version` records, else the commit `go build` stamps
// from the checkout it ran in, so `hopper --version`, the services'
// __version__ endpoints and a bug report name the code that ran.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Info is what a binary knows about its own build.
type Info struct {
	// Version is the module's version (v1.2.3, or a pseudo-version), or
	// "devel" when the build recorded none.
	Version string
	// Revision is the VCS commit the build was made from, and Time its
	// commit time (RFC 3339); both empty when the build was not stamped
	// (go run, -buildvcs=false, a tree outside version control).
	Revision, Time string
	// Modified is true when the checkout had uncommitted changes.
	Modified bool
	// GoVersion is the toolchain that built the binary.
	GoVersion string
}

// Read returns the running binary's build information. override, when not
// empty, is a version set at link time (-ldflags "-X main.version=…") and
// wins over the module version.
func Read(override string) Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: orDevel(override), GoVersion: runtime.Version()}
	}
	return FromBuildInfo(bi, override)
}

// FromBuildInfo is Read over a given build record.
func FromBuildInfo(bi *debug.BuildInfo, override string) Info {
	info := Info{Version: override, GoVersion: bi.GoVersion}
	if info.Version == "" && bi.Main.Version != "(devel)" {
		// Go records "+dirty" on a pseudo-version of a modified tree;
		// Modified says it once.
		info.Version = strings.TrimSuffix(bi.Main.Version, "+dirty")
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	info.Version = orDevel(info.Version)
	return info
}

func orDevel(v string) string {
	if v == "" {
		return "devel"
	}
	return v
}

// Short is the version as one token for __version__ endpoints and logs:
// the version, and for a development build the commit it was made from
// ("devel-1e64542abcde", with "-dirty" after a modified checkout).
func (i Info) Short() string {
	v := i.Version
	if v == "devel" && i.Revision != "" {
		v += "-" + abbreviate(i.Revision)
	}
	if i.Modified {
		v += "-dirty"
	}
	return v
}

// String is the line `hopper --version` prints after "hopper version ":
// the short version, then the commit, its time and the toolchain.
func (i Info) String() string {
	var details []string
	if i.Revision != "" && !strings.Contains(i.Short(), abbreviate(i.Revision)) {
		details = append(details, "commit "+abbreviate(i.Revision))
	}
	if i.Time != "" {
		details = append(details, "committed "+i.Time)
	}
	if i.GoVersion != "" {
		details = append(details, "built with "+i.GoVersion)
	}
	if len(details) == 0 {
		return i.Short()
	}
	return i.Short() + " (" + strings.Join(details, ", ") + ")"
}

func abbreviate(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
