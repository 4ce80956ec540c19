package hawk

import (
	"crypto/tls"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHostPort(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		host     string
		tls      bool
		headers  map[string][]string
		wantHost string
		wantPort int
		wantErr  bool
	}{
		{name: "plain", host: "tc.example.com", wantHost: "tc.example.com", wantPort: 80},
		{name: "tls default", host: "tc.example.com", tls: true, wantHost: "tc.example.com", wantPort: 443},
		{name: "explicit port", host: "localhost:8080", wantHost: "localhost", wantPort: 8080},
		{name: "explicit port over tls", host: "localhost:8443", tls: true, wantHost: "localhost", wantPort: 8443},
		{name: "explicit 80 is the http default and dropped", host: "h:80", tls: true, wantHost: "h", wantPort: 443},
		{name: "uppercase host", host: "TC.Example.COM:9000", wantHost: "tc.example.com", wantPort: 9000},
		{name: "ipv6", host: "[::1]:8080", wantHost: "::1", wantPort: 8080},
		{name: "ipv6 no port", host: "[::1]", wantHost: "::1", wantPort: 80},
		{name: "forwarded port", host: "internal:8080", headers: map[string][]string{"X-Forwarded-Port": {"443"}}, wantHost: "internal", wantPort: 443},
		{name: "forwarded port list", host: "internal:8080", headers: map[string][]string{"X-Forwarded-Port": {"8443, 80"}}, wantHost: "internal", wantPort: 8443},
		{name: "forwarded port wins over proto", host: "internal:8080", headers: map[string][]string{"X-Forwarded-Port": {"9999"}, "X-Forwarded-Proto": {"https"}}, wantHost: "internal", wantPort: 9999},
		{name: "invalid forwarded port ignored", host: "internal:8080", headers: map[string][]string{"X-Forwarded-Port": {"abc"}}, wantHost: "internal", wantPort: 8080},
		{name: "forwarded proto https", host: "internal:8080", headers: map[string][]string{"X-Forwarded-Proto": {"https"}}, wantHost: "internal", wantPort: 443},
		{name: "forwarded proto http keeps port", host: "internal:8080", tls: true, headers: map[string][]string{"X-Forwarded-Proto": {"http"}}, wantHost: "internal", wantPort: 8080},
		{name: "forwarded host ignored", host: "internal", headers: map[string][]string{"X-Forwarded-Host": {"public.example.com"}}, wantHost: "internal", wantPort: 80},
		{name: "empty host", host: "", wantErr: true},
		{name: "slash", host: "a/b", wantErr: true},
		{name: "bad port", host: "h:x", wantErr: true},
		{name: "port too large", host: "h:70000", wantErr: true},
		{name: "two colons", host: "h:1:2", wantErr: true},
		{name: "userinfo", host: "u@h", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/x", nil)
			r.Host = tt.host
			if !tt.tls {
				r.TLS = nil
			} else {
				r.TLS = &tls.ConnectionState{}
			}
			for k, vs := range tt.headers {
				for _, v := range vs {
					r.Header.Add(k, v)
				}
			}
			host, port, err := HostPort(r)
			if tt.wantErr {
				require.EqualError(t, err, MsgInvalidHost)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantHost, host)
			require.Equal(t, tt.wantPort, port)
		})
	}
}
