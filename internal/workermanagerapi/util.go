package workermanagerapi

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/hopper-ci/hopper/internal/api"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

type bounds struct{ start, end int }

// offsetPage pages a list held in memory: the continuation token is the
// offset of the next item, as Taskcluster's listProviders gives it.
func offsetPage(c *api.Call, n int) (bounds, string, error) {
	pg := c.Page()
	start := 0
	if pg.ContinuationToken != "" {
		v, err := strconv.Atoi(pg.ContinuationToken)
		if err != nil || v < 0 {
			return bounds{}, "", inputError("Invalid continuationToken")
		}
		start = min(v, n)
	}
	limit := pg.Limit
	if limit <= 0 {
		limit = 100
	}
	end := min(start+limit, n)
	next := ""
	if end < n {
		next = strconv.Itoa(end)
	}
	return bounds{start, end}, next, nil
}

// Query-string patterns of Taskcluster's Worker Manager.
var (
	boolPattern           = regexp.MustCompile(`^(true|false)$`)
	errorIDPattern        = regexp.MustCompile(`^[a-zA-Z0-9-_]+$`)
	launchConfigPattern   = regexp.MustCompile(`^[a-zA-Z0-9-]{1,38}$`)
	errorStatsPoolPattern = regexp.MustCompile(`^([a-zA-Z0-9/-]+)?$`)
	statePattern          = regexp.MustCompile(`^(requested|running|stopping|stopped|standalone)$`)
	workerStatePattern    = regexp.MustCompile(`^(requested|running|stopping|stopped)$`)
)
