package githubapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/events"
	"github.com/hopper-ci/hopper/internal/forge"
	"github.com/hopper-ci/hopper/internal/github"
	"github.com/hopper-ci/hopper/internal/store"
)

// text is a plain-text reply, as Taskcluster's webhook answers (forges
// show it in their delivery logs).
func text(status int, msg string) *api.Response {
	return &api.Response{Status: status, Header: http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, RawBody: []byte(msg)}
}

// header returns the first of the named headers that is set.
func header(h http.Header, names ...string) string {
	for _, n := range names {
		if v := h.Get(n); v != "" {
			return v
		}
	}
	return ""
}

// webhook is githubWebHookConsumer: it checks the delivery's headers and
// signature, decides what the event leads to, and stores the delivery
// before answering 204.
func (s *Service) webhook(c *api.Call) (any, error) {
	h := c.R.Header
	name := header(h, "X-GitHub-Event", "X-Gitea-Event", "X-Forgejo-Event")
	if name == "" {
		return text(http.StatusBadRequest, "Missing X-GitHub-Event"), nil
	}
	if len(c.Body) == 0 {
		return text(http.StatusBadRequest, "Request missing a body"), nil
	}
	sig, ok := github.ReadSignature(h)
	if !ok {
		return text(http.StatusBadRequest, "Request missing a secret"), nil
	}
	f := s.signedBy(sig, c.Body)
	if f == nil {
		s.Log.Warn("webhook delivery refused: its signature matches no configured secret",
			"event", name, "delivery", header(h, "X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery"))
		return text(http.StatusForbidden, "X-hub-signature does not match; bad webhook secret?"), nil
	}
	deliveryID := header(h, "X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery")
	if deliveryID == "" || len(deliveryID) > 200 {
		return text(http.StatusBadRequest, "Missing X-GitHub-Delivery"), nil
	}
	d := github.Delivery{Forge: f.Kind, Host: f.Host, ID: deliveryID, Name: name, Body: c.Body}
	dec, err := github.Classify(d)
	if err != nil {
		return text(http.StatusBadRequest, "Malformed "+name+" event: "+err.Error()), nil
	}
	switch {
	case dec.Installation != nil:
		if err := s.Store.PutGithubInstallation(c.Context(), f.Host, dec.Installation.Owner, dec.Installation.ID); err != nil {
			return nil, err
		}
		return text(http.StatusOK, dec.Reply), nil
	case dec.Event == nil:
		return text(http.StatusOK, dec.Reply), nil
	}
	// A forge's replay (Gitea's Replay and Test delivery) sends the same
	// body under a new delivery id, and so does a second webhook of the
	// same forge for one event: the digest of the event and its body makes
	// them one delivery.
	sum := sha256.Sum256(append([]byte(name+"\x00"), c.Body...))
	stored := &store.GithubDelivery{Host: f.Host, DeliveryID: deliveryID, Forge: f.Kind, Event: name, Body: c.Body, Received: c.Now,
		Digest: hex.EncodeToString(sum[:])}
	added, err := s.Store.AddGithubDelivery(c.Context(), stored)
	if err != nil {
		return nil, err
	}
	if !added && stored.ReplayOf != "" {
		s.Log.Info("a delivery replays an earlier one; nothing is done again", "host", f.Host, "delivery", deliveryID, "replayOf", stored.ReplayOf)
		return text(http.StatusOK, "Delivery "+deliveryID+" replays delivery "+stored.ReplayOf+": nothing is done again"), nil
	}
	if !added {
		return text(http.StatusOK, "Delivery "+deliveryID+" was already received"), nil
	}
	s.kick()
	s.publishEvent(c, dec.Event)
	return &api.Response{Status: http.StatusNoContent}, nil
}

// signedBy returns the forge one of whose secrets signed the body, nil if
// none did. Every secret of every forge is tried, so the time taken does
// not say which one matched.
func (s *Service) signedBy(sig github.Signature, body []byte) *forge.Forge {
	hosts := make([]string, 0, len(s.Forges))
	for h := range s.Forges {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	var match *forge.Forge
	for _, h := range hosts {
		f := s.Forges[h]
		for _, secret := range f.WebhookSecrets {
			if sig.Matches(secret, body) && match == nil {
				match = f
			}
		}
	}
	return match
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9-_.]`)

// routingName is Taskcluster's sanitised organization or repository name
// in routing keys: characters outside [a-zA-Z0-9-_.] are dropped and
// dots become %.
func routingName(s string) string {
	return strings.ReplaceAll(unsafeName.ReplaceAllString(s, ""), ".", "%")
}

// publishEvent announces an accepted delivery on the GithubEvents
// exchanges (push, pull-request, release, rerun), as Taskcluster does.
// A broker that does not take it loses nothing: the delivery is stored.
func (s *Service) publishEvent(c *api.Call, e *github.Event) {
	if s.Events == nil || e.Kind == github.KindMergeGroup {
		return // Taskcluster has no exchange for merge groups
	}
	org, repo := routingName(e.Organization), routingName(e.Repository)
	key := "primary." + org + "." + repo
	msg := map[string]any{"version": 1, "organization": org, "repository": repo, "installationId": e.InstallationID,
		"eventId": e.DeliveryID, "body": e.Body, "tasks_for": e.TasksFor, "branch": e.Branch}
	if e.Kind == github.KindPullRequest {
		key += "." + routingName(e.Action)
		msg["action"] = e.Action
	}
	if e.Kind == github.KindRerun {
		msg["checkRunId"], msg["checkSuiteId"] = e.CheckRunID, e.CheckSuiteID
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return
	}
	if err := s.Events.Publish(c.Context(), events.Message{Exchange: e.Kind, RoutingKey: key, Body: body}); err != nil {
		s.Log.Warn("publishing a GithubEvents message failed", "exchange", e.Kind, "delivery", e.DeliveryID, "error", err)
	}
}
