package githubapi

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// hopper's own routes beside Taskcluster's: a delivery's record, which
// the error statuses link to (what processing did, the whole error), and
// its event, for `hopper github render --delivery`.
func deliveryRoutes(s *Service) []api.Route {
	p := func(path string) []string { return []string{BasePath + path} }
	return []api.Route{
		// No scope: the delivery id (a UUID the forge chose) is the
		// capability, and the record says no more than the comment the
		// repository's users were shown.
		{Name: "delivery", Method: http.MethodGet, Paths: p("/deliveries/{host}/{deliveryId}"), Handle: s.delivery},
		{Name: "deliveryEvent", Method: http.MethodGet, Paths: p("/deliveries/{host}/{deliveryId}/event"),
			Scopes: `"github:get-delivery:<host>"`, EarlyScopes: true, Handle: s.deliveryEvent},
		// The deliveries that ended in an error (or wait to be tried
		// again after one), for the console's Builds page: whoever may
		// list the builds may see the events that made none.
		{Name: "failedDeliveries", Method: http.MethodGet, Paths: p("/deliveries"), Query: []string{"host", "continuationToken", "limit"},
			Scopes: scopesListBuilds, EarlyScopes: true, Handle: s.failedDeliveries},
	}
}

func (s *Service) failedDeliveries(c *api.Call) (any, error) {
	list, next, err := s.Store.ListFailedGithubDeliveries(c.Context(), c.R.URL.Query().Get("host"), c.Page())
	if errors.Is(err, store.ErrBadContinuationToken) {
		return nil, inputError("invalid continuationToken")
	}
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	items := make([]any, 0, len(list))
	for i := range list {
		items = append(items, s.deliveryJSON(&list[i]))
	}
	out["deliveries"] = items
	if next != "" {
		out["continuationToken"] = next
	}
	return out, nil
}

// deliveryJSON is a delivery's record: what processing did, the whole
// error, and the repository its event names.
func (s *Service) deliveryJSON(d *store.GithubDelivery) map[string]any {
	var body struct {
		Repository struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	_ = json.Unmarshal(d.Body, &body)
	out := map[string]any{"host": d.Host, "deliveryId": d.DeliveryID, "forge": d.Forge, "event": d.Event,
		"repository": body.Repository.FullName, "received": queue.NewTime(d.Received).String(), "state": d.State,
		"attempts": d.Attempts, "outcome": d.Outcome, "error": d.Error}
	if d.ReplayOf != "" {
		out["replayOf"] = d.ReplayOf
	}
	return out
}

func (s *Service) loadDelivery(c *api.Call) (*store.GithubDelivery, error) {
	d, err := s.Store.GetGithubDelivery(c.Context(), c.Params["host"], c.Params["deliveryId"])
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound("No delivery %s from %s", c.Params["deliveryId"], c.Params["host"])
	}
	return d, err
}

func (s *Service) delivery(c *api.Call) (any, error) {
	d, err := s.loadDelivery(c)
	if err != nil {
		return nil, err
	}
	return s.deliveryJSON(d), nil
}

func (s *Service) deliveryEvent(c *api.Call) (any, error) {
	d, err := s.loadDelivery(c)
	if err != nil {
		return nil, err
	}
	return map[string]any{"host": d.Host, "deliveryId": d.DeliveryID, "forge": d.Forge, "event": d.Event,
		"body": jsonRaw(d.Body)}, nil
}

type jsonRaw []byte

func (j jsonRaw) MarshalJSON() ([]byte, error) { return j, nil }
