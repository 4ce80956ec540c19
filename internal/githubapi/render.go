package githubapi

import (
	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/ident"
)

// renderTaskclusterYml renders a `.taskcluster.yml` against a mocked
// event, for users to see the tasks and scopes an event would give.
func (s *Service) renderTaskclusterYml(c *api.Call) (any, error) {
	var in struct {
		Body         string `json:"body"`
		Organization string `json:"organization"`
		Repository   string `json:"repository"`
		FakeEvent    struct {
			Type      string         `json:"type"`
			Action    string         `json:"action"`
			Overrides map[string]any `json:"overrides"`
		} `json:"fakeEvent"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	// The route needs no credentials, as Taskcluster's: each render is
	// bounded (jsone.DefaultLimits), and at most renderSlots run at once
	// in a replica, so anonymous callers cannot take more than that.
	select {
	case s.renders <- struct{}{}:
		defer func() { <-s.renders }()
	case <-c.Context().Done():
		return nil, c.Context().Err()
	}
	if in.Organization == "" {
		in.Organization = "taskcluster"
	}
	if in.Repository == "" {
		in.Repository = "testing"
	}
	e, err := github.FakeEvent(in.FakeEvent.Type, in.FakeEvent.Action, in.Organization, in.Repository, in.FakeEvent.Overrides)
	if err != nil {
		return nil, inputError("%v", err)
	}
	e.Host = "github.com"
	cfg, err := github.ParseConfig(s.Schemas, []byte(in.Body))
	if err != nil {
		return nil, inputError("%v", err)
	}
	ids := map[string]string{}
	r, err := cfg.Render(github.RenderParams{Event: e, TasksFor: in.FakeEvent.Type, RootURL: s.RootURL, Now: c.Now,
		ID: func(label string) string {
			if id, ok := ids[label]; ok {
				return id
			}
			ids[label] = ident.NewSlugID()
			return ids[label]
		}})
	if err != nil {
		return nil, inputError("%v", err)
	}
	tasks := make([]any, 0, len(r.Tasks))
	for _, t := range r.Tasks {
		tasks = append(tasks, map[string]any{"taskId": t.TaskID, "task": t.Definition})
	}
	return map[string]any{"tasks": tasks, "scopes": r.Scopes}, nil
}
