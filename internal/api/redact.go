package api

import (
	"strings"
)

// Secrets in URL paths (a hook's trigger token) never reach a log line,
// whether the request matched its route or not: a browser's GET of a
// POST-only URL, a trailing or doubled slash, a segment in another case or
// one segment too few all miss the route and were logged verbatim. The
// query string, which carries bewits and blob URLs' signatures, and the
// headers, which carry Hawk MACs and webhook signatures, are never logged
// at all.

// secretPath recognises the paths of one route template with a secret
// parameter, loosely: the template's leading literal segments (the
// service's prefix, as "api/hooks/v1/hooks"), then anywhere after them the
// literal segment just before the secret ("trigger"); everything from
// the segment after it on is the secret's place. Where no literal
// precedes the secret, its position in the template is.
type secretPath struct {
	prefix []string
	anchor string // "" when the secret follows a parameter
	pos    int    // the secret's segment index when anchor is ""
}

// newSecretPath describes template's secret parameter, if it has one of
// secrets.
func newSecretPath(template string, secrets []string) (secretPath, bool) {
	segs := strings.Split(strings.Trim(template, "/"), "/")
	var sp secretPath
	literalRun := true
	for i, seg := range segs {
		name, isParam := strings.CutPrefix(seg, "{")
		name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
		if !isParam {
			if literalRun {
				sp.prefix = append(sp.prefix, seg)
			}
			continue
		}
		literalRun = false
		for _, s := range secrets {
			if s != name {
				continue
			}
			if i > 0 && !strings.HasPrefix(segs[i-1], "{") {
				sp.anchor = segs[i-1]
			} else {
				sp.pos = i
			}
			return sp, true
		}
	}
	return secretPath{}, false
}

// redact returns segs with the secret's place (and all after it) replaced,
// and whether it found the template's shape in segs.
func (sp secretPath) redact(segs []string) bool {
	if len(segs) < len(sp.prefix) {
		return false
	}
	for i, want := range sp.prefix {
		if !strings.EqualFold(segs[i], want) {
			return false
		}
	}
	from := -1
	if sp.anchor == "" {
		if sp.pos < len(segs) {
			from = sp.pos
		}
	} else {
		for i := len(sp.prefix); i < len(segs); i++ {
			if strings.EqualFold(segs[i], sp.anchor) && i+1 < len(segs) {
				from = i + 1
				break
			}
		}
	}
	if from < 0 {
		return false
	}
	for i := from; i < len(segs); i++ {
		if segs[i] != "" {
			segs[i] = "<redacted>"
		}
	}
	return true
}

// redactPath returns path with every route's secret replaced, whatever
// route the request reached.
func (s *Server) redactPath(path string) string {
	if len(s.secretPaths) == 0 {
		return path
	}
	// Empty segments ("//", a trailing slash) are skipped for matching
	// and kept in what is logged.
	all := strings.Split(path, "/")
	var idx []int
	var segs []string
	for i, seg := range all {
		if seg != "" {
			idx = append(idx, i)
			segs = append(segs, seg)
		}
	}
	changed := false
	for _, sp := range s.secretPaths {
		if sp.redact(segs) {
			changed = true
		}
	}
	if !changed {
		return path
	}
	for j, i := range idx {
		all[i] = segs[j]
	}
	return strings.Join(all, "/")
}
