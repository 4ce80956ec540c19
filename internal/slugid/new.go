package slugid

import (
	"encoding/base64"

	"github.com/google/uuid"
)

// New returns a fresh v4 slugid whose first character is a letter or digit
// (Taskcluster's "nice" slugids), so it never looks like a command-line
// option.
func New() string {
	u := uuid.New()
	u[0] &= 0x7f
	return base64.RawURLEncoding.EncodeToString(u[:])
}
