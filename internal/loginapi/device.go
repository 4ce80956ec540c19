package loginapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/login"
)

// The provider's device flow (RFC 8628) for a command on a machine
// without a browser (`hopper login --device`): hopper, the provider's
// confidential client, asks for the device code and polls the token
// endpoint on the command's behalf, so the command holds no provider
// secret. Each call of the command makes at most one request to the
// provider; the provider's interval and slow_down bound the polling.

func (s *Server) deviceRoutes() []api.Route {
	return []api.Route{
		{Name: "loginDevice", Method: http.MethodPost, Paths: []string{BasePath + "/{provider}/device"}, Handle: s.deviceStart},
		{Name: "loginDeviceToken", Method: http.MethodPost, Paths: []string{BasePath + "/{provider}/device/token"},
			Input: "login-device-token-request", Handle: s.deviceToken, CleanPayloadFunc: omitPayload},
	}
}

// providerAnswerLimit bounds what hopper reads of a provider's answer.
const providerAnswerLimit = 1 << 20

// deviceAuthorization is RFC 8628 §3.2's answer, as the command receives
// it (camelCase, as hopper's other answers).
type deviceAuthorization struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	ExpiresIn               int    `json:"expiresIn"`
	Interval                int    `json:"interval"`
}

// deviceEndpoint is the provider's device authorization endpoint, or an
// error saying it has none.
func (s *Server) deviceEndpoint(ctx context.Context, p *login.Provider) (*oidc.Provider, string, error) {
	if p.Kind == login.KindGitHub {
		// GitHub's device flow answers no ID token and needs the OAuth
		// App's "Enable Device Flow"; hopper does not ask it (yet).
		return nil, "", api.Errorf(api.CodeInputError,
			"signing in to %s with a device code is not supported: sign in through the browser instead", p.DisplayName)
	}
	op, err := s.discover(ctx, p)
	if err != nil {
		s.d.Logger.Warn("login: the provider cannot be reached", "provider", p.Name, "error", err)
		return nil, "", api.Errorf(api.CodeServiceUnavailable, "the sign-in provider %s cannot be reached; try again later", p.DisplayName)
	}
	var meta struct {
		DeviceAuthorizationEndpoint string `json:"device_authorization_endpoint"`
	}
	if err := op.Claims(&meta); err != nil || meta.DeviceAuthorizationEndpoint == "" {
		return nil, "", api.Errorf(api.CodeInputError,
			"the sign-in provider %s has no device flow (its discovery document names no device_authorization_endpoint): sign in through the browser instead", p.DisplayName)
	}
	return op, meta.DeviceAuthorizationEndpoint, nil
}

// deviceStart asks the provider for a device code and user code.
func (s *Server) deviceStart(c *api.Call) (any, error) {
	p, ok := s.d.Config.Provider(c.Params["provider"])
	if !ok {
		return nil, api.NotFoundf("this deployment has no sign-in provider %q", c.Params["provider"])
	}
	_, endpoint, err := s.deviceEndpoint(c.Context(), p)
	if err != nil {
		return nil, err
	}
	var out struct {
		DeviceCode              string `json:"device_code"`
		UserCode                string `json:"user_code"`
		VerificationURI         string `json:"verification_uri"`
		VerificationURIComplete string `json:"verification_uri_complete"`
		ExpiresIn               int    `json:"expires_in"`
		Interval                int    `json:"interval"`
	}
	form := url.Values{"scope": {strings.Join(append([]string{oidc.ScopeOpenID}, p.Scopes...), " ")}}
	status, perr, err := s.providerPost(c.Context(), p, endpoint, form, &out)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, api.Errorf(api.CodeInputError, "the sign-in provider %s refused a device code (%s)", p.DisplayName, perr)
	}
	if out.DeviceCode == "" || out.UserCode == "" || out.VerificationURI == "" {
		return nil, api.Errorf(api.CodeServiceUnavailable, "the sign-in provider %s answered no device code", p.DisplayName)
	}
	if out.Interval <= 0 {
		out.Interval = 5 // RFC 8628 §3.2's default
	}
	return deviceAuthorization{DeviceCode: out.DeviceCode, UserCode: out.UserCode, VerificationURI: out.VerificationURI,
		VerificationURIComplete: out.VerificationURIComplete, ExpiresIn: out.ExpiresIn, Interval: out.Interval}, nil
}

type deviceTokenRequest struct {
	DeviceCode string `json:"deviceCode"`
}

// devicePending is the answer while the person has not yet decided:
// "pending", or "slow_down" when the command polls too often (it adds 5
// seconds to its interval, RFC 8628 §3.5).
type devicePending struct {
	Status string `json:"status"`
}

// deviceToken polls the provider's token endpoint once for the device
// code; once the person has signed in, it checks the ID token and answers
// their temporary credentials.
func (s *Server) deviceToken(c *api.Call) (any, error) {
	p, ok := s.d.Config.Provider(c.Params["provider"])
	if !ok {
		return nil, api.NotFoundf("this deployment has no sign-in provider %q", c.Params["provider"])
	}
	var in deviceTokenRequest
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	op, _, err := s.deviceEndpoint(c.Context(), p)
	if err != nil {
		return nil, err
	}
	var tok struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		IDToken      string `json:"id_token"`
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "device_code": {in.DeviceCode}}
	status, perr, err := s.providerPost(c.Context(), p, op.Endpoint().TokenURL, form, &tok)
	if err != nil {
		return nil, err
	}
	switch {
	case status == http.StatusOK:
	case perr == "authorization_pending", perr == "slow_down":
		return devicePending{Status: map[string]string{"authorization_pending": "pending", "slow_down": "slow_down"}[perr]}, nil
	case perr == "access_denied":
		return nil, api.Errorf(api.CodeInsufficientScopes, "the sign-in was denied at %s: nothing was granted", p.DisplayName)
	case perr == "expired_token":
		return nil, api.Errorf(api.CodeResourceExpired, "the device code expired before the sign-in finished at %s: start again", p.DisplayName)
	default:
		return nil, api.Errorf(api.CodeInputError, "the sign-in provider %s refused the device code (%s): start again", p.DisplayName, perr)
	}
	if tok.IDToken == "" {
		return nil, api.Errorf(api.CodeServiceUnavailable, "the sign-in provider %s sent no ID token", p.DisplayName)
	}
	// The device flow has no nonce (RFC 8628 has no authorization
	// request the command could put one in); the token endpoint answered
	// hopper itself, over TLS in production, for a code only it can
	// redeem with its client secret.
	who, r := s.verify(oidc.ClientContext(c.Context(), s.d.HTTPClient), p, op, tok.IDToken, "")
	if r != nil {
		return nil, api.Errorf(api.CodeInputError, "%s: %s", r.title, r.detail)
	}
	identity, err := p.Identity(who)
	if err != nil {
		return nil, api.Errorf(api.CodeInputError, "sign-in refused: %v", err)
	}
	roles := p.Roles(who)
	// The credential scanner asks about the person again (with the
	// refresh token, where the provider gave one).
	err = s.remember(c.Context(), p, identity, roles, &oauth2.Token{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken}, c.Now)
	if err != nil {
		return nil, err
	}
	s.d.Logger.Info("login: signed in with a device code", "provider", p.Name, "identity", identity)
	return s.issueReply(c, p.Name, identity, roles, c.Now.Add(s.lifetime))
}

// providerPost posts form to one of the provider's endpoints with the
// client's credentials (client_secret_basic, RFC 6749 §2.3.1) and decodes
// a 200 answer into out. Other answers give the OAuth2 error code.
func (s *Server) providerPost(ctx context.Context, p *login.Provider, endpoint string, form url.Values, out any) (int, string, error) {
	unreachable := api.Errorf(api.CodeServiceUnavailable, "the sign-in provider %s cannot be reached; try again later", p.DisplayName)
	if p.ClientSecret == "" {
		form.Set("client_id", p.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, "", fmt.Errorf("asking %s: %w", p.Name, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if p.ClientSecret != "" {
		req.SetBasicAuth(url.QueryEscape(p.ClientID), url.QueryEscape(p.ClientSecret))
	}
	resp, err := s.d.HTTPClient.Do(req)
	if err != nil {
		// The error names the endpoint, never the form (device code).
		s.d.Logger.Warn("login: the provider cannot be reached", "provider", p.Name, "error", err)
		return 0, "", unreachable
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, providerAnswerLimit))
	if err != nil {
		return 0, "", unreachable
	}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, out); err != nil {
			return 0, "", api.Errorf(api.CodeServiceUnavailable, "the sign-in provider %s answered something other than JSON", p.DisplayName)
		}
		return resp.StatusCode, "", nil
	}
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		if resp.StatusCode >= 500 {
			return 0, "", unreachable
		}
		e.Error = resp.Status
	}
	return resp.StatusCode, printable(e.Error), nil
}

// printable keeps a provider's error code to what a message may quote.
func printable(s string) string {
	if len(s) > 100 {
		s = s[:100]
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return '?'
		}
		return r
	}, s)
}
