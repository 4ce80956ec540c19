package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/queue"
)

// listPage reads one page of a keyset-paginated listing: every list method
// of the store goes through it (or through listPageFields). build returns
// the SELECT for the rows after cursor (the decoded continuation token, ""
// for the first page, never a NUL in it) and its
// arguments; the SELECT must end with "LIMIT ?", whose value listPage
// appends. One row more than the page holds is asked for, so the token is
// given only when another page follows; it is cursorOf the page's last item.
func listPage[T any](ctx context.Context, db *DB, page Page,
	build func(cursor string) (string, []any, error),
	read func(rowScanner) (T, error),
	cursorOf func(T) string) ([]T, string, error) {
	return listPageFields(ctx, db, page, 1, build, read, cursorOf)
}

// listPageFields is listPage for a listing whose cursors have fields
// non-empty parts separated by NUL ("<workerGroup>\x00<workerId>").
func listPageFields[T any](ctx context.Context, db *DB, page Page, fields int,
	build func(cursor string) (string, []any, error),
	read func(rowScanner) (T, error),
	cursorOf func(T) string) ([]T, string, error) {
	cursor, err := decodeToken(page.ContinuationToken, fields)
	if err != nil {
		return nil, "", err
	}
	query, args, err := build(cursor)
	if err != nil {
		return nil, "", err
	}
	limit := page.size()
	rows, err := db.query(ctx, query, append(args, limit+1)...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		item, err := read(rows)
		if err != nil {
			return nil, "", err
		}
		out = append(out, item)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = encodeToken(cursorOf(out[limit-1]))
	}
	return out, next, nil
}

// taskIDCursor is the cursor of listings ordered by taskId.
func taskIDCursor(t *queue.TaskState) string { return t.TaskID }

// timeCursor and splitCursor are the cursor of listings ordered by a time
// then taskId: "<ms>|<taskId>".
func timeCursor(at int64, taskID string) string {
	return strconv.FormatInt(at, 10) + "|" + taskID
}

func splitCursor(c string) (int64, string, error) {
	if c == "" {
		return -1 << 62, "", nil
	}
	msPart, id, ok := strings.Cut(c, "|")
	v, err := strconv.ParseInt(msPart, 10, 64)
	if !ok || err != nil {
		return 0, "", ErrBadContinuationToken
	}
	return v, id, nil
}

// Continuation tokens are opaque to callers: base64url of a cursor string.
//
// They carry no MAC: a cursor only names a position in a listing its
// caller may read from the start anyway, and reaches SQL as a bound
// parameter, so a forged one grants nothing a genuine one does not. What a
// token may decode to is checked instead (decodeToken).
func encodeToken(cursor string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursor))
}

// maxCursorBytes bounds a decoded cursor: the longest hopper writes is a
// timestamp and a taskId, or a name of the listings keyed by one (an index
// namespace of 255 characters of up to 4 bytes each).
const maxCursorBytes = 2048

// decodeToken returns the cursor a token encodes. Every cursor hopper
// writes is UTF-8 text of fields non-empty parts separated by NUL (the
// workers' "<workerGroup>\x00<workerId>", the purge requests'
// "<workerPoolId>\x00<cacheName>"); anything else was never issued, and
// PostgreSQL refuses NUL and bytes that are not UTF-8 as a text parameter
// (the cursor's parts reach a query), so it is refused here, the same on
// both drivers.
func decodeToken(token string, fields int) (string, error) {
	if token == "" {
		return "", nil
	}
	if len(token) > base64.RawURLEncoding.EncodedLen(maxCursorBytes) {
		return "", ErrBadContinuationToken
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || len(b) == 0 || !utf8.Valid(b) {
		return "", ErrBadContinuationToken
	}
	parts := bytes.Split(b, []byte{0})
	if len(parts) > fields || len(parts) > 1 && slices.ContainsFunc(parts, func(p []byte) bool { return len(p) == 0 }) {
		return "", ErrBadContinuationToken
	}
	return string(b), nil
}
