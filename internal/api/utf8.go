package api

import (
	"unicode/utf8"
)

// Request bodies are JSON, and JSON is Unicode text: a body whose strings
// hold bytes that are not UTF-8 is taken with each such byte replaced by
// U+FFFD, in every field, before validation and storage. That is what
// Taskcluster does (its server decodes the body as UTF-8 before parsing
// it), what hopper already did for the fields it decodes into Go strings
// (metadata.name), and it gives one answer on every store: SQLite would
// otherwise keep the bytes and serve JSON that is not UTF-8, and
// PostgreSQL would refuse them with a 500. The Hawk payload hash is
// checked against the body as sent, never the repaired one.

// validUTF8 returns b with every byte that is not part of a valid UTF-8
// sequence replaced by U+FFFD; b itself when it is valid (the usual case,
// checked without allocating).
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size <= 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
			b = b[1:]
			continue
		}
		out = append(out, b[:size]...)
		b = b[size:]
	}
	return out
}
