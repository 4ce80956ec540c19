package store

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/hopper-ci/hopper/internal/queue"
)

// listPage reads one page of a keyset-paginated listing: every list method
// of the store goes through it. build returns the SELECT for the rows after
// cursor (the decoded continuation token, "" for the first page) and its
// arguments; the SELECT must end with "LIMIT ?", whose value listPage
// appends. One row more than the page holds is asked for, so the token is
// given only when another page follows; it is cursorOf the page's last item.
func listPage[T any](ctx context.Context, db *DB, page Page,
	build func(cursor string) (string, []any, error),
	read func(rowScanner) (T, error),
	cursorOf func(T) string) ([]T, string, error) {
	cursor, err := decodeToken(page.ContinuationToken)
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
func encodeToken(cursor string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursor))
}

func decodeToken(token string) (string, error) {
	if token == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(b) == 0 {
		return "", ErrBadContinuationToken
	}
	return string(b), nil
}
