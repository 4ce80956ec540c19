package cli

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// deviceStart is the server's answer when a device sign-in starts (the
// provider's RFC 8628 §3.2 answer).
type deviceStart struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete"`
	ExpiresIn               int    `json:"expiresIn"`
	Interval                int    `json:"interval"`
}

// loginDevice signs in with the provider's device flow through the
// server (which holds the provider's client secret): it prints where to
// go and the code to enter, then asks the server at the provider's
// interval until the person has signed in, refused, or the code expired.
func loginDevice(ctx context.Context, env *Env, l *loginClient, provider string) (*loginReply, error) {
	base := "/login/" + url.PathEscape(provider) + "/device"
	var start deviceStart
	if err := l.call(ctx, http.MethodPost, base, nil, &start); err != nil {
		return nil, loginFailure("starting a device sign-in", err)
	}
	fmt.Fprintf(env.Stderr, "On any device, open\n\n  %s\n\nand enter the code %s", start.VerificationURI, start.UserCode)
	if start.VerificationURIComplete != "" {
		fmt.Fprintf(env.Stderr, " (or open %s)", start.VerificationURIComplete)
	}
	fmt.Fprintln(env.Stderr, ".\nWaiting for the sign-in…")
	interval := time.Duration(start.Interval) * time.Second
	if interval <= 0 {
		interval = 5 * time.Second
	}
	if env.PollInterval > 0 && env.PollInterval < interval {
		interval = env.PollInterval // tests
	}
	for {
		select {
		case <-ctx.Done():
			return nil, loginFailure("signing in", ctx.Err())
		case <-time.After(interval):
		}
		var reply loginReply
		if err := l.call(ctx, http.MethodPost, base+"/token", map[string]string{"deviceCode": start.DeviceCode}, &reply); err != nil {
			return nil, loginFailure("signing in", err)
		}
		switch reply.Status {
		case "pending":
			continue
		case "slow_down":
			// RFC 8628 §3.5: five seconds more from now on.
			interval += 5 * time.Second
			continue
		}
		return &reply, nil
	}
}
