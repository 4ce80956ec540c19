package github

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Forge kinds. GitHub Enterprise is KindGitHub with another API URL;
// Forgejo speaks Gitea's API and webhooks, and is KindGitea.
const (
	KindGitHub = "github"
	KindGitea  = "gitea"
)

// tasks_for values, as Taskcluster names them.
const (
	TasksForPush                 = "github-push"
	TasksForPullRequest          = "github-pull-request"
	TasksForPullRequestUntrusted = "github-pull-request-untrusted"
	TasksForRelease              = "github-release"
	TasksForIssueComment         = "github-issue-comment"
	// TasksForMergeGroup is hopper's own: a merge queue's group of pull
	// requests to check before they merge (Taskcluster has none).
	TasksForMergeGroup = "github-merge-group"
)

// Event kinds an Event can have (the exchange it is published on).
const (
	KindPush        = "push"
	KindPullRequest = "pull-request"
	KindRelease     = "release"
	KindRerun       = "rerun"
	// KindMergeGroup is published on no exchange (Taskcluster has none).
	KindMergeGroup = "merge-group"
)

// Event is a webhook delivery that may lead to tasks, in the one form the
// rest of the service sees whatever forge sent it.
type Event struct {
	// Forge is KindGitHub or KindGitea; Host is the forge's host as
	// configured (github.com for GitHub), which roles are named after.
	Forge, Host string
	// DeliveryID is the forge's delivery id (X-GitHub-Delivery).
	DeliveryID string
	// Kind is one of the Kind* constants; TasksFor the template's
	// tasks_for.
	Kind, TasksFor string
	// Type is Taskcluster's event type: "push", "tag", "release",
	// "pull_request.<action>" or "issue_comment.<action>".
	Type string
	// Action is the delivery's action as GitHub spells it ("" for push).
	Action string
	// Organization and Repository name the repository.
	Organization, Repository string
	// SHA is the commit; empty for releases and comments until resolved.
	SHA string
	// Branch is the pushed branch or the pull request's head branch;
	// Tag the pushed tag.
	Branch, Tag string
	// PullNumber is the pull request's number (0 if none).
	PullNumber int
	// InstallationID is the GitHub App installation (0 for token forges).
	InstallationID int64
	// Opener, HeadOwner and BaseOwner decide a pull request's trust.
	Opener, HeadOwner, BaseOwner string
	// Command is the `/taskcluster <cmd>` of a comment, Commenter who
	// wrote it, CommentID its id.
	Command, Commenter string
	CommentID          int64
	// ReleaseTarget is a release's target_commitish.
	ReleaseTarget string
	// CheckRunID and CheckSuiteID are set for reruns.
	CheckRunID, CheckSuiteID int64
	// Body is the event the template sees (normalised for Gitea).
	Body map[string]any
}

// Role is the role prefix of the event's repository:
// repo:<host>/<organization>/<repository>.
func (e *Event) Role() string {
	return "repo:" + e.Host + "/" + e.Organization + "/" + e.Repository
}

// Decision is what the webhook does with a verified delivery.
type Decision struct {
	// Event is set when the delivery is to be stored and processed.
	Event *Event
	// Reply is the text answered with 200 when there is no Event.
	Reply string
	// Installation is set for installation deliveries: the account's
	// login and its installation id (0 when deleted).
	Installation *Installation
}

// Installation records where a GitHub App is installed.
type Installation struct {
	Owner string
	ID    int64
}

var (
	skipCIPattern  = regexp.MustCompile(`(?i)\[(skip ci|ci skip)\]`)
	commandPattern = regexp.MustCompile(`(?m)^\s*/taskcluster\s+(.+)$`)
)

// Delivery is a webhook as received, after its signature was checked.
type Delivery struct {
	Forge, Host string
	ID          string
	// Name is the coarse event name (X-GitHub-Event, which Gitea and
	// Forgejo send too).
	Name string
	Body []byte
}

// Classify decides what a delivery leads to. An error means the body is
// not the event its name says (the webhook answers 400).
func Classify(d Delivery) (*Decision, error) {
	var body map[string]any
	dec := json.NewDecoder(bytes.NewReader(d.Body))
	dec.UseNumber()
	if err := dec.Decode(&body); err != nil || body == nil {
		return nil, fmt.Errorf("the body is not a JSON object")
	}
	if d.Forge == KindGitea {
		normaliseGitea(d.Name, d.Host, body)
	}
	e := &Event{Forge: d.Forge, Host: d.Host, DeliveryID: d.ID, Body: body, InstallationID: num(body, "installation", "id")}
	e.Action = str(body, "action")
	e.Repository = str(body, "repository", "name")
	switch d.Name {
	case "ping":
		return &Decision{Reply: "Received ping event!"}, nil
	case "installation":
		owner := str(body, "installation", "account", "login")
		if owner == "" {
			return nil, fmt.Errorf("installation event without installation.account.login")
		}
		id := e.InstallationID
		if e.Action == "deleted" {
			id = 0
		}
		return &Decision{Installation: &Installation{Owner: owner, ID: id}, Reply: "Created table row!"}, nil
	}
	read, ok := eventReaders[d.Name]
	if !ok {
		return &Decision{Reply: "No publisher available for X-GitHub-Event: " + d.Name}, nil
	}
	if skip := read(e, body); skip != "" {
		return &Decision{Reply: skip}, nil
	}
	if e.Organization == "" || e.Repository == "" {
		return nil, fmt.Errorf("%s event without repository owner and name", d.Name)
	}
	if !printable(e.Branch) || !printable(e.Tag) {
		return nil, fmt.Errorf("branch and tag names must be printable ASCII")
	}
	// Commit ids and repository names are used in URLs and stored as
	// text: a NUL or control character in one is the sender's mistake,
	// refused here rather than retried as if the forge were down.
	if !printable(e.SHA) || !printable(e.Organization) || !printable(e.Repository) {
		return nil, fmt.Errorf("commit ids and repository owners and names must be printable ASCII")
	}
	return &Decision{Event: e}, nil
}

// eventReaders fill an Event from the body of a delivery that can start
// tasks, by its X-GitHub-Event name. A reader that returns a reply
// skips the delivery with it.
var eventReaders = map[string]func(e *Event, body map[string]any) (skip string){
	"push":          readPush,
	"pull_request":  readPullRequest,
	"issue_comment": readIssueComment,
	"release":       readRelease,
	"check_run":     readCheckRun,
	"merge_group":   readMergeGroup,
}

func readPush(e *Event, body map[string]any) string {
	if skipPush(body) {
		return "Skipping push event"
	}
	ref := str(body, "ref")
	e.Kind, e.TasksFor, e.Type = KindPush, TasksForPush, "push"
	e.Organization = str(body, "repository", "owner", "name")
	e.SHA = str(body, "after")
	e.Opener = str(body, "sender", "login")
	switch {
	case strings.HasPrefix(ref, "refs/tags/"):
		e.Type, e.Tag = "tag", strings.TrimPrefix(ref, "refs/tags/")
	case strings.HasPrefix(ref, "refs/heads/"):
		e.Branch = strings.TrimPrefix(ref, "refs/heads/")
	default:
		e.Branch = strings.Join(splitAfter(ref, 2), "/")
	}
	if isZeroSHA(e.SHA) {
		return "Skipping push event: the ref was deleted"
	}
	if before := str(body, "before"); before == e.SHA && e.SHA != "" {
		// No push moves a ref to where it was: this is a forge's test
		// delivery (Gitea's and Forgejo's Test delivery send the
		// branch's head so), which must not start a second build.
		return "Skipping push event: before and after are the same commit (a test delivery)"
	}
	return ""
}

func readPullRequest(e *Event, body map[string]any) string {
	if skipCIPattern.MatchString(str(body, "pull_request", "title")) {
		return "Skipping pull_request event"
	}
	e.Kind, e.TasksFor, e.Type = KindPullRequest, TasksForPullRequest, "pull_request."+e.Action
	e.Organization = str(body, "repository", "owner", "login")
	e.SHA = str(body, "pull_request", "head", "sha")
	e.Branch = str(body, "pull_request", "head", "ref")
	e.PullNumber = int(num(body, "pull_request", "number"))
	if e.PullNumber == 0 {
		e.PullNumber = int(num(body, "number"))
	}
	e.Opener = str(body, "pull_request", "user", "login")
	e.HeadOwner = str(body, "pull_request", "head", "user", "login")
	e.BaseOwner = str(body, "pull_request", "base", "user", "login")
	return ""
}

func readIssueComment(e *Event, body map[string]any) string {
	cmd, ok := commentCommand(body)
	if !ok {
		return "Skipping issue_comment event"
	}
	e.Kind, e.TasksFor, e.Type = KindPullRequest, TasksForIssueComment, "issue_comment."+e.Action
	e.Organization = str(body, "repository", "owner", "login")
	e.Command = cmd
	e.Commenter = str(body, "comment", "user", "login")
	e.CommentID = num(body, "comment", "id")
	e.PullNumber = int(num(body, "issue", "number"))
	e.Branch = "unknown"
	return ""
}

func readRelease(e *Event, body map[string]any) string {
	e.Kind, e.TasksFor, e.Type = KindRelease, TasksForRelease, "release"
	e.Organization = str(body, "repository", "owner", "login")
	e.ReleaseTarget = str(body, "release", "target_commitish")
	e.Branch = e.ReleaseTarget
	e.Tag = str(body, "release", "tag_name")
	return ""
}

// readMergeGroup reads a merge queue's request for checks: the group's
// commit (merge_group.head_sha, on a gh-readonly-queue/… branch) is
// checked like a push to the branch the group merges into, with that
// branch's merge-group role; its statuses are the checks the queue waits
// for.
func readMergeGroup(e *Event, body map[string]any) string {
	if e.Action != "checks_requested" {
		return "Only checks_requested for merge_group is supported"
	}
	e.Kind, e.TasksFor, e.Type = KindMergeGroup, TasksForMergeGroup, "merge_group"
	e.Organization = str(body, "repository", "owner", "login")
	e.SHA = str(body, "merge_group", "head_sha")
	e.Branch = strings.TrimPrefix(str(body, "merge_group", "base_ref"), "refs/heads/")
	e.Opener = str(body, "sender", "login")
	if e.SHA == "" {
		return "Skipping merge_group event: no merge_group.head_sha"
	}
	return ""
}

func readCheckRun(e *Event, body map[string]any) string {
	if e.Action != "rerequested" {
		return "Only rerequested for check runs is supported"
	}
	if strings.EqualFold(str(body, "sender", "type"), "bot") {
		return "Skipping rerequested event started by bot"
	}
	e.Kind, e.TasksFor, e.Type = KindRerun, TasksForPush, "check_run."+e.Action
	e.Organization = str(body, "repository", "owner", "login")
	e.SHA = str(body, "check_run", "head_sha")
	e.CheckRunID = num(body, "check_run", "id")
	e.CheckSuiteID = num(body, "check_run", "check_suite", "id")
	return ""
}

// skipPush says whether a push's head commit (or else its last commit)
// asks for no CI.
func skipPush(body map[string]any) bool {
	msg := str(body, "head_commit", "message")
	if msg == "" {
		if commits, ok := body["commits"].([]any); ok && len(commits) > 0 {
			if last, ok := commits[len(commits)-1].(map[string]any); ok {
				msg, _ = last["message"].(string)
			}
		}
	}
	return skipCIPattern.MatchString(msg)
}

// commentCommand returns the `/taskcluster <cmd>` of a comment created or
// edited on an open pull request.
func commentCommand(body map[string]any) (string, bool) {
	action := str(body, "action")
	if action != "created" && action != "edited" {
		return "", false
	}
	issue, _ := body["issue"].(map[string]any)
	if issue == nil || issue["pull_request"] == nil || str(issue, "state") != "open" {
		return "", false
	}
	m := commandPattern.FindStringSubmatch(str(body, "comment", "body"))
	if m == nil {
		return "", false
	}
	return strings.TrimSpace(m[1]), true
}

func isZeroSHA(s string) bool { return s != "" && strings.Trim(s, "0") == "" }

func splitAfter(ref string, n int) []string {
	parts := strings.Split(ref, "/")
	if len(parts) <= n {
		return parts[len(parts)-1:]
	}
	return parts[n:]
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// str reads a string at a path of object keys ("" if absent).
func str(m map[string]any, path ...string) string {
	v := lookup(m, path...)
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	}
	return ""
}

// num reads an integer at a path of object keys (0 if absent).
func num(m map[string]any, path ...string) int64 {
	switch x := lookup(m, path...).(type) {
	case json.Number:
		n, _ := strconv.ParseInt(x.String(), 10, 64)
		return n
	case float64:
		return int64(x)
	}
	return 0
}

func lookup(m map[string]any, path ...string) any {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = obj[k]
	}
	return v
}

// object returns the object at key, creating it when absent.
func object(m map[string]any, key string) map[string]any {
	if o, ok := m[key].(map[string]any); ok {
		return o
	}
	o := map[string]any{}
	m[key] = o
	return o
}
