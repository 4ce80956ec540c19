package superseding

import "encoding/json"

// queueFlowKey names the flow key a task is under on the queue's side
// (README "Flow control": extra.flow with a limit, supersede or
// cancelInProgress; the key itself may come from a coalesce.v1.<key>
// route), or "" when it is not. The queue then decides which of the key's
// tasks runs and supersedes the others itself: superseding such a task
// here too would claim around the key's limit and resolve tasks the queue
// may be handing out.
func queueFlowKey(extra json.RawMessage) (string, bool) {
	var loose struct {
		Flow *struct {
			Key              string `json:"key"`
			Limit            int    `json:"limit"`
			Supersede        bool   `json:"supersede"`
			CancelInProgress bool   `json:"cancelInProgress"`
		} `json:"flow"`
	}
	if len(extra) == 0 || json.Unmarshal(extra, &loose) != nil || loose.Flow == nil {
		return "", false
	}
	f := loose.Flow
	return f.Key, f.Limit > 0 || f.Supersede || f.CancelInProgress
}
