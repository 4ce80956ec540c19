package github

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// fakeEvents are complete example deliveries of each event that can start
// tasks: GitHub's webhook payloads as published (every property a real
// delivery has), with the names, owners, commits and numbers
// Taskcluster's own preview uses, so that a template renders in the
// preview as it does on a real event and as it does in Taskcluster's
// preview. $ORGANIZATION, $REPOSITORY and $BRANCH are filled in.
//
//go:embed fakeevents/*.json
var fakeEvents embed.FS

// fakeEventFiles maps a tasks_for to its example and X-GitHub-Event name.
var fakeEventFiles = map[string]string{
	TasksForPush:                 "push",
	TasksForPullRequest:          "pull_request",
	TasksForPullRequestUntrusted: "pull_request",
	TasksForRelease:              "release",
	TasksForIssueComment:         "issue_comment",
}

// FakeBranch is the mocked event's branch unless the overrides name
// another (overrides.branch), as in Taskcluster's preview.
const FakeBranch = "main"

// FakeEvent builds the event of a tasks_for kind for rendering a
// `.taskcluster.yml` without a forge (renderTaskclusterYml, `hopper
// github render`): the complete example delivery, its action set to
// action (when given) and its top-level properties replaced by
// overrides. A branch outside printable ASCII is refused as Taskcluster
// refuses it.
func FakeEvent(tasksFor, action, org, repo string, overrides map[string]any) (*Event, error) {
	name, ok := fakeEventFiles[tasksFor]
	if !ok {
		return nil, fmt.Errorf("unknown event type %q", tasksFor)
	}
	branch := FakeBranch
	if b, ok := overrides["branch"].(string); ok && b != "" {
		branch = b
	}
	if !printable(branch) {
		return nil, errors.New("Must have only ascii-printable chars in branch names!")
	}
	body, err := fakeBody(name, org, repo, branch)
	if err != nil {
		return nil, err
	}
	if action != "" {
		body["action"] = action
	}
	for k, v := range overrides {
		body[k] = v
	}
	if tasksFor == TasksForIssueComment {
		if commandPattern.FindStringSubmatch(str(body, "comment", "body")) == nil {
			return nil, errors.New("No taskcluster command found")
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	dec, err := Classify(Delivery{Forge: KindGitHub, Host: "github.com", ID: "fake", Name: name, Body: raw})
	if err != nil {
		return nil, err
	}
	if dec.Event == nil {
		return nil, fmt.Errorf("the mocked event is skipped: %s", dec.Reply)
	}
	e := dec.Event
	switch tasksFor {
	case TasksForIssueComment:
		// The service loads the comment's pull request into the event
		// before rendering; the preview gives the example one.
		pr, err := fakeBody("pull_request", org, repo, branch)
		if err != nil {
			return nil, err
		}
		pull, _ := pr["pull_request"].(map[string]any)
		e.Body["pull_request"], e.Body["taskcluster_comment"] = pull, e.Command
		e.SHA, e.Branch = str(pull, "head", "sha"), str(pull, "head", "ref")
	case TasksForRelease:
		push, err := fakeBody("push", org, repo, branch)
		if err != nil {
			return nil, err
		}
		e.SHA = str(push, "after")
	}
	return e, nil
}

// fakeBody is the example delivery of an event, names filled in.
func fakeBody(name, org, repo, branch string) (map[string]any, error) {
	text, err := fakeEvents.ReadFile("fakeevents/" + name + ".json")
	if err != nil {
		return nil, err
	}
	r := strings.NewReplacer("$ORGANIZATION", jsonString(org), "$REPOSITORY", jsonString(repo), "$BRANCH", jsonString(encodeURI(branch)))
	var body map[string]any
	dec := json.NewDecoder(strings.NewReader(r.Replace(string(text))))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil {
		return nil, fmt.Errorf("the %s example: %w", name, err)
	}
	return body, nil
}

// jsonString is s as it appears inside a JSON string literal.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(strings.TrimSuffix(b.String(), "\n"), `"`)[1:]
}

// encodeURI escapes a printable-ASCII branch as JavaScript's encodeURI
// does (Taskcluster's preview puts it in the ref so).
func encodeURI(s string) string {
	const keep = "-_.!~*'();/?:@&=+$,#"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(keep, c) >= 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
