package hawk

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// FuzzParseHeader checks that the header parser never panics, fails only
// with *Error values, and that whatever it accepts is well formed and
// re-verifies consistently.
func FuzzParseHeader(f *testing.F) {
	seeds := []string{
		`Hawk id="tester", ts="1700000000", nonce="Xa1b2C", mac="yE2cwSwKGet1axmp/CHjtucTGXOvU5zrkltsq/7ksVg="`,
		`Hawk id="a", ts="1", nonce="n", hash="h", ext="e", mac="m", app="x", dlg="y"`,
		`hawk id="a",ts="1",nonce="n",mac="m",`,
		`Hawk id="a" x ts="1"`,
		`Hawk id="", ts="1"`,
		`Basic abc`,
		`Hawk`,
		"Hawk\tid=\"a\"",
		"Hawk id=\"\xe9\"",
		`Hawk id="a", id="b", foo="c"`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	p := NewParser()
	f.Fuzz(func(t *testing.T, header string) {
		h, err := p.ParseHeader(header)
		if err != nil {
			var herr *Error
			if !errors.As(err, &herr) {
				t.Fatalf("non-Hawk error %T: %v", err, err)
			}
			if herr.Message == "" {
				t.Fatal("empty failure message")
			}
			return
		}
		if len(header) > MaxMatchLength {
			t.Fatalf("accepted a header of %d bytes", len(header))
		}
		if !strings.EqualFold(header[:4], "hawk") {
			t.Fatalf("accepted scheme of %q", header)
		}
		for _, v := range []string{h.ID, h.TS, h.Nonce, h.MAC} {
			if !validAttributeValue(v) {
				t.Fatalf("required attribute %q invalid in %q", v, header)
			}
		}
		for _, v := range []string{h.Hash, h.Ext, h.App, h.Dlg} {
			if v != "" && !validAttributeValue(v) {
				t.Fatalf("optional attribute %q invalid in %q", v, header)
			}
		}
		// Re-signing the parsed attributes must verify; a different key must not.
		req := Request{Method: "GET", Resource: "/", Host: "h", Port: 80}
		h.MAC = MAC("k", KindHeader, h.Artifacts(req))
		now := time.UnixMilli(int64(jsvalue.Number(h.TS) * 1000))
		if err := h.Verify("k", req, now); err != nil && err.Error() != MsgStaleTimestamp {
			t.Fatalf("re-signed header failed: %v", err)
		}
		if err := h.Verify("other", req, now); err == nil || err.Error() != MsgBadMAC {
			t.Fatalf("wrong key gave %v", err)
		}
	})
}

func BenchmarkParseHeader(b *testing.B) {
	p := NewParser()
	header, err := RequestHeader(Credentials{ID: "task-client/fN1SbArXTPSVFNUvaOlinQ/0/on/wg/w1/until/1700001200", Key: "k"},
		"POST", "https://tc.example.com/api/queue/v1/task/fN1SbArXTPSVFNUvaOlinQ/runs/0/artifacts/public%2Flogs%2Flive.log",
		time.UnixMilli(1700000000000), "Xa1b2C", "", strings.Repeat("eyJjZXJ0aWZpY2F0ZSI6eyJ2ZXJzaW9uIjoxfX0", 20))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ParseHeader(header); err != nil {
			b.Fatal(err)
		}
	}
}
