package hawk

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Vectors H1–H4 and B1–B2 of docs/contract/auth.md §1.9.
const (
	specID    = "tester"
	specKey   = "no-secret"
	specNonce = "Xa1b2C"
	h1URL     = "https://tc.example.com/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status"
	h2URL     = "http://localhost:8080/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log?x=1"
	h2Ext     = "eyJhdXRob3JpemVkU2NvcGVzIjpbInF1ZXVlOmdldC1hcnRpZmFjdDpwdWJsaWMvKiJdfQ=="
	h4Ext     = "eyJjZXJ0aWZpY2F0ZSI6eyJ2ZXJzaW9uIjoxLCJzY29wZXMiOlsicXVldWU6Y3JlYXRlLWFydGlmYWN0OmFiYy8wIiwic2VjcmV0czpnZXQ6eCJdLCJzdGFydCI6MTcwMDAwMDAwMDAwMCwiZXhwaXJ5IjoxNzAwMDAzNjAwMDAwLCJzZWVkIjoiYWFhYWFhYWFRYWFhYWFhYWFhYWFhUWJiYmJiYmJiUWJiYmJiYmJiYmJiYlEiLCJzaWduYXR1cmUiOiI5UnlScWFwdGNQblJHcjI0UXpNMS80Vk1Xak1TOVB5WFV5R1hNcDlOOWhBPSIsImlzc3VlciI6InN0YXRpYy9ob3BwZXIvcm9vdCJ9fQ=="
)

var specTS = time.Unix(1700000000, 0)

func TestSpecHeaderVectors(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		creds     Credentials
		method    string
		url       string
		hash, ext string
		want      string
		request   Request
	}{
		{
			name:    "H1",
			creds:   Credentials{ID: specID, Key: specKey},
			method:  "GET",
			url:     h1URL,
			want:    `Hawk id="tester", ts="1700000000", nonce="Xa1b2C", mac="yE2cwSwKGet1axmp/CHjtucTGXOvU5zrkltsq/7ksVg="`,
			request: Request{Method: "GET", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status", Host: "tc.example.com", Port: 443},
		},
		{
			name:    "H2",
			creds:   Credentials{ID: specID, Key: specKey},
			method:  "POST",
			url:     h2URL,
			ext:     h2Ext,
			want:    `Hawk id="tester", ts="1700000000", nonce="Xa1b2C", ext="` + h2Ext + `", mac="/lUQGzuM6NqDUM/Ur1VhjhOAVlCfoy0dd98EnRq2hME="`,
			request: Request{Method: "POST", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log?x=1", Host: "localhost", Port: 8080},
		},
		{
			name:    "H3",
			creds:   Credentials{ID: specID, Key: specKey},
			method:  "PUT",
			url:     h1URL,
			hash:    "qKG2AtsqLMhIdy7+OrxWG0bU8wTDncYSW0gmNukAKpI=",
			want:    `Hawk id="tester", ts="1700000000", nonce="Xa1b2C", hash="qKG2AtsqLMhIdy7+OrxWG0bU8wTDncYSW0gmNukAKpI=", mac="RnSY5B45K8LGNSwa6j5tI9aEFeyoY7LpQT+OHeYHZDc="`,
			request: Request{Method: "PUT", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status", Host: "tc.example.com", Port: 443},
		},
		{
			name:    "H4",
			creds:   Credentials{ID: "task-client/abc", Key: "wKR5KEExRTlBtaO-tm75uZN9x9tS-41Cynzgm--Fb70"},
			method:  "GET",
			url:     h1URL,
			ext:     h4Ext,
			want:    `Hawk id="task-client/abc", ts="1700000000", nonce="Xa1b2C", ext="` + h4Ext + `", mac="GBdSJBpzuT0HtALKnMow90m2b3wd9++cYA0F4O9G9L4="`,
			request: Request{Method: "GET", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status", Host: "tc.example.com", Port: 443},
		},
	}
	p := NewParser()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := RequestHeader(tt.creds, tt.method, tt.url, specTS, specNonce, tt.hash, tt.ext)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)

			h, err := p.ParseHeader(got)
			require.NoError(t, err)
			require.Equal(t, tt.creds.ID, h.ID)
			require.Equal(t, tt.ext, h.Ext)
			require.Equal(t, tt.hash, h.Hash)
			require.NoError(t, h.Verify(tt.creds.Key, tt.request, specTS.Add(899*time.Second)))
		})
	}
}

func TestSpecNormalizedStrings(t *testing.T) {
	t.Parallel()
	h1 := Artifacts{Method: "get", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status", Host: "TC.example.com", Port: 443, TS: "1700000000", Nonce: specNonce}
	require.Equal(t, "hawk.1.header\n1700000000\nXa1b2C\nGET\n/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/status\ntc.example.com\n443\n\n\n", NormalizedString(KindHeader, h1))

	h2 := Artifacts{Method: "POST", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log?x=1", Host: "localhost", Port: 8080, TS: "1700000000", Nonce: specNonce, Ext: h2Ext}
	require.Equal(t, "hawk.1.header\n1700000000\nXa1b2C\nPOST\n/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log?x=1\nlocalhost\n8080\n\n"+h2Ext+"\n", NormalizedString(KindHeader, h2))
}

func TestSpecH2DecodedPathFails(t *testing.T) {
	t.Parallel()
	p := NewParser()
	header, err := RequestHeader(Credentials{ID: specID, Key: specKey}, "POST", h2URL, specTS, specNonce, "", h2Ext)
	require.NoError(t, err)
	h, err := p.ParseHeader(header)
	require.NoError(t, err)
	decoded := Request{Method: "POST", Resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public/logs/live.log?x=1", Host: "localhost", Port: 8080}
	require.EqualError(t, h.Verify(specKey, decoded, specTS), MsgBadMAC)
}

func TestSpecPayloadHash(t *testing.T) {
	t.Parallel()
	require.Equal(t, "B0weSUXsMcb5UhL41FZbrUJCAotzSI3HawE1NPLRUz8=", PayloadHash("", nil))
	require.Equal(t, "qKG2AtsqLMhIdy7+OrxWG0bU8wTDncYSW0gmNukAKpI=", PayloadHash("application/json", []byte(`{"a":1}`)))
	require.Equal(t, "qKG2AtsqLMhIdy7+OrxWG0bU8wTDncYSW0gmNukAKpI=", PayloadHash(" Application/JSON; charset=utf-8", []byte(`{"a":1}`)))
}

func TestSpecBewitVectors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		url      string
		ttl      time.Duration
		ext      string
		decoded  string
		bewit    string
		resource string
	}{
		{
			name:     "B1",
			url:      "https://tc.example.com/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/private%2Fbuild%2Ftarget.tar.gz",
			ttl:      900 * time.Second,
			decoded:  `tester\1700000900\tru82f1yStmxnPrML3gs8KxdR7650G/UBRSS5LT+tC0=\`,
			bewit:    "dGVzdGVyXDE3MDAwMDA5MDBcdHJ1ODJmMXlTdG14blByTUwzZ3M4S3hkUjc2NTBHL1VCUlNTNUxUK3RDMD1c",
			resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/private%2Fbuild%2Ftarget.tar.gz",
		},
		{
			name:     "B2",
			url:      "https://tc.example.com/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/artifacts/private%2Fx.txt",
			ttl:      600 * time.Second,
			ext:      "eyJhdXRob3JpemVkU2NvcGVzIjpbInF1ZXVlOmdldC1hcnRpZmFjdDpwcml2YXRlLyoiXX0=",
			decoded:  `tester\1700000600\gHA94ZYW/4IwYYcjUd9GdXBYqGV9Ad7WmksJ+P8pepM=\eyJhdXRob3JpemVkU2NvcGVzIjpbInF1ZXVlOmdldC1hcnRpZmFjdDpwcml2YXRlLyoiXX0=`,
			bewit:    "dGVzdGVyXDE3MDAwMDA2MDBcZ0hBOTRaWVcvNEl3WVljalVkOUdkWEJZcUdWOUFkN1dta3NKK1A4cGVwTT1cZXlKaGRYUm9iM0pwZW1Wa1UyTnZjR1Z6SWpwYkluRjFaWFZsT21kbGRDMWhjblJwWm1GamREcHdjbWwyWVhSbEx5b2lYWDA9",
			resource: "/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/artifacts/private%2Fx.txt",
		},
	}
	p := NewParser()
	creds := Credentials{ID: specID, Key: specKey}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			exp := specTS.Add(tt.ttl)
			got, err := BewitFor(creds, tt.url, exp, tt.ext)
			require.NoError(t, err)
			require.Equal(t, tt.bewit, got)
			raw, err := base64.RawURLEncoding.DecodeString(got)
			require.NoError(t, err)
			require.Equal(t, tt.decoded, string(raw))

			signed, err := SignURL(creds, tt.url, exp, tt.ext)
			require.NoError(t, err)
			require.Equal(t, tt.url+"?bewit="+tt.bewit, signed)

			target := tt.resource + "?bewit=" + tt.bewit
			require.True(t, p.HasBewit(target))
			b, err := p.ParseBewit(Request{Method: "GET", Resource: target, Host: "tc.example.com", Port: 443})
			require.NoError(t, err)
			require.Equal(t, tt.resource, b.Resource)
			require.Equal(t, tt.ext, b.Ext)
			require.NoError(t, b.Verify(specKey, specTS))
			require.EqualError(t, b.Verify(specKey, exp), MsgAccessExpired)
			require.EqualError(t, b.Verify("wrong", specTS), MsgBadMAC)
		})
	}
}
