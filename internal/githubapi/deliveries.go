package githubapi

import (
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
	}
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
	return map[string]any{"host": d.Host, "deliveryId": d.DeliveryID, "forge": d.Forge, "event": d.Event,
		"received": queue.NewTime(d.Received).String(), "state": d.State, "attempts": d.Attempts,
		"outcome": d.Outcome, "error": d.Error}, nil
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
