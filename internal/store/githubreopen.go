package store

import (
	"context"
	"fmt"
	"time"
)

// ListReopenableGithubBuilds implements GithubStore: builds that resolved
// (success or failure) and were created at or after since, whose task
// group has a task unresolved again (a rerun), newest first, at most
// limit. The reporter looks at these besides the pending builds, so a
// rerun from the console or the CLI moves its build back to pending.
func (db *DB) ListReopenableGithubBuilds(ctx context.Context, since time.Time, limit int) ([]GithubBuild, error) {
	rows, err := db.query(ctx, "SELECT "+githubBuildColumns+` FROM github_builds b
		WHERE b.state IN ('success', 'failure') AND b.created >= ?
		AND EXISTS (SELECT 1 FROM tasks t WHERE t.task_group_id = b.task_group_id AND t.unresolved = 1)
		ORDER BY b.seq DESC LIMIT ?`, ms(since), limit)
	if err != nil {
		return nil, fmt.Errorf("listing builds with a rerun: %w", err)
	}
	defer rows.Close()
	var out []GithubBuild
	for rows.Next() {
		b, err := scanGithubBuild(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
