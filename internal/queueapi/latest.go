package queueapi

import "github.com/hopper-ci/hopper/internal/api"

// RedirectToLatestArtifact answers as getLatestArtifact would for the
// artifact name of taskId's last run: a 303 to its data (following links,
// each name's queue:get-artifact scope checked), 424 for an error
// artifact. Another service's route uses it (the
// index's findArtifactFromTask); that route's Scopes must be the
// get-artifact template, {"AllOf":[{"for":"name","in":"names","each":
// "queue:get-artifact:<name>"}]}, which is checked here for every name.
func (s *Server) RedirectToLatestArtifact(c *api.Call, taskID, name string) (any, error) {
	params := c.Params
	c.Params = map[string]string{"taskId": taskID, "name": name}
	defer func() { c.Params = params }()
	return s.redirectToArtifact(c, true)
}
