package loginapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/login"
)

// GitHub is not an OpenID provider: hopper is an OAuth App, and reads the
// person from GitHub's REST API with the token the web flow gives (as
// Taskcluster's github strategy): who they are (GET /user), their teams
// (GET /user/teams) and the organizations they administer (GET
// /user/memberships/orgs). The same calls, with the kept token, tell the
// credential scanner what they may do now.

// githubConfig is the OAuth App's web flow at the provider's base URL
// (github.com or a GitHub Enterprise Server).
func (s *Server) githubConfig(p *login.Provider) *oauth2.Config {
	return &oauth2.Config{
		ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		Endpoint: oauth2.Endpoint{AuthURL: p.BaseURL + "/login/oauth/authorize", TokenURL: p.BaseURL + "/login/oauth/access_token",
			AuthStyle: oauth2.AuthStyleInParams},
		RedirectURL: s.d.RootURL + BasePath + "/" + p.Name + "/callback",
		Scopes:      p.Scopes,
	}
}

// errGone says the provider no longer knows the person, or no longer
// lets hopper ask about them (the account was deleted, or they revoked
// hopper's authorization).
var errGone = errors.New("the provider no longer knows this person")

// githubMaxPages bounds the pages of one listing hopper reads (100 a
// page): a person in more than 2,000 teams gets the first 2,000.
const githubMaxPages = 20

// githubPerson reads the person a token belongs to: their id and login,
// their teams as "<org>:<team>" and the organizations they administer as
// "<org>" (login.Provider.Roles turns these into roles).
func (s *Server) githubPerson(ctx context.Context, p *login.Provider, ts oauth2.TokenSource) (login.Person, error) {
	var user struct {
		ID    int64  `json:"id"`
		Login string `json:"login"`
	}
	if err := s.githubGet(ctx, p, ts, "/user", &user); err != nil {
		return login.Person{}, err
	}
	if user.ID == 0 || user.Login == "" {
		return login.Person{}, fmt.Errorf("GitHub's /user named no id and login")
	}
	who := login.Person{Subject: strconv.FormatInt(user.ID, 10), Username: user.Login}
	for page := 1; page <= githubMaxPages; page++ {
		var teams []struct {
			Slug         string `json:"slug"`
			Organization struct {
				Login string `json:"login"`
			} `json:"organization"`
		}
		if err := s.githubGet(ctx, p, ts, "/user/teams?per_page=100&page="+strconv.Itoa(page), &teams); err != nil {
			return login.Person{}, err
		}
		for _, t := range teams {
			who.Groups = append(who.Groups, t.Organization.Login+":"+t.Slug)
		}
		if len(teams) < 100 {
			break
		}
	}
	for page := 1; page <= githubMaxPages; page++ {
		var orgs []struct {
			State        string `json:"state"`
			Role         string `json:"role"`
			Organization struct {
				Login string `json:"login"`
			} `json:"organization"`
		}
		if err := s.githubGet(ctx, p, ts, "/user/memberships/orgs?state=active&per_page=100&page="+strconv.Itoa(page), &orgs); err != nil {
			return login.Person{}, err
		}
		for _, o := range orgs {
			if o.State == "active" && o.Role == "admin" {
				who.Groups = append(who.Groups, o.Organization.Login)
			}
		}
		if len(orgs) < 100 {
			break
		}
	}
	return who, nil
}

// githubVerified says whether the person's primary e-mail address is
// verified (GET /user/emails, the user:email scope).
func (s *Server) githubVerified(ctx context.Context, p *login.Provider, ts oauth2.TokenSource) (bool, error) {
	var emails []struct {
		Primary  bool `json:"primary"`
		Verified bool `json:"verified"`
	}
	if err := s.githubGet(ctx, p, ts, "/user/emails", &emails); err != nil {
		return false, err
	}
	for _, e := range emails {
		if e.Primary {
			return e.Verified, nil
		}
	}
	return false, nil
}

// githubGet reads one API resource. 401 (the token was revoked, or its
// account deleted) and 404 are errGone; anything else unexpected is an
// error that says the provider could not answer, never the token.
func (s *Server) githubGet(ctx context.Context, p *login.Provider, ts oauth2.TokenSource, path string, into any) error {
	tok, err := ts.Token()
	if err != nil {
		if refusedGrant(err) {
			return errGone
		}
		return fmt.Errorf("renewing the GitHub token: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.APIURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	req.Header.Set("User-Agent", "hopper-login")
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := s.d.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking GitHub for %s: %w", trimQuery(path), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	switch {
	case resp.StatusCode == http.StatusUnauthorized, resp.StatusCode == http.StatusNotFound:
		return errGone
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GitHub answered %s to %s", resp.Status, trimQuery(path))
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("reading GitHub's %s: %w", trimQuery(path), err)
	}
	return nil
}

func trimQuery(path string) string {
	u, err := url.Parse(path)
	if err != nil {
		return "a resource"
	}
	return u.Path
}
