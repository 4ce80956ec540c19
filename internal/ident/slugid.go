package ident

import (
	"encoding/base64"
	"regexp"

	"github.com/google/uuid"
)

// slugID is the queue's taskId parameter pattern: 22 characters of
// URL-safe base64 encoding a v4 UUID. The version nibble fixes the 9th
// character, the variant bits the 11th, and the padding bits the last.
var slugID = regexp.MustCompile(`^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$`)

// SlugID is the pattern of a taskId or taskGroupId (a v4 slugid), for
// tables of parameter patterns. Callers must not modify it.
func SlugID() *regexp.Regexp { return slugID }

// ValidSlugID reports whether id is a well-formed v4 slugid.
func ValidSlugID(id string) bool { return slugID.MatchString(id) }

// NewSlugID returns a fresh v4 slugid whose first character is a letter or
// digit (Taskcluster's "nice" slugids), so it never looks like a
// command-line option.
func NewSlugID() string {
	u := uuid.New()
	u[0] &= 0x7f
	return base64.RawURLEncoding.EncodeToString(u[:])
}
