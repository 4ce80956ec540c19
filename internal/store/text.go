package store

import (
	"database/sql"
	"errors"
	"strings"
)

// ErrTextNUL is why a statement with a NUL (U+0000) in a text value was not
// sent. PostgreSQL's text cannot hold a NUL (it fails the statement), so
// no store keeps one in a text column, whatever the driver: the API
// answers 400, and a value that must keep its NULs is stored as JSON,
// where a NUL is the escape \u0000. Checking every argument here, for
// both drivers, is what keeps a NUL from ever reaching PostgreSQL as a
// 500 and keeps SQLite from storing what PostgreSQL would refuse.
var ErrTextNUL = errors.New("a text value holds a NUL character (\\u0000), which hopper does not store")

// reportText is a text hopper records that came from elsewhere (the
// error a forge, a mail server or a Docker daemon answered, a summary
// quoting it): a NUL or bytes that are not UTF-8 in it become U+FFFD, so
// that recording what went wrong cannot itself fail.
func reportText(s string) string {
	return strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
}

// checkText returns ErrTextNUL if a text argument holds a NUL.
func checkText(args []any) error {
	for _, a := range args {
		switch v := a.(type) {
		case string:
			if strings.IndexByte(v, 0) >= 0 {
				return ErrTextNUL
			}
		case []string:
			for _, s := range v {
				if strings.IndexByte(s, 0) >= 0 {
					return ErrTextNUL
				}
			}
		case sql.NullString:
			if strings.IndexByte(v.String, 0) >= 0 {
				return ErrTextNUL
			}
		case *string:
			if v != nil && strings.IndexByte(*v, 0) >= 0 {
				return ErrTextNUL
			}
		}
	}
	return nil
}
