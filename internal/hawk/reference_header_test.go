package hawk

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// jsSpace is JavaScript's "\s" translated for Go: it also matches \v and
// U+00A0 (the only non-ASCII JS spaces a Latin-1 decoded header can
// contain).
const jsSpace = `[\t\n\v\f\r \x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000}\x{feff}]`

// referenceHeaderParser is the straight translation of Hawk's header
// parsing into Go regular expressions, which ParseHeader used to be. The
// hand-written ParseHeader must agree with it on every input.
type referenceHeaderParser struct {
	header, attribute *regexp.Regexp
}

func newReferenceHeaderParser() *referenceHeaderParser {
	return &referenceHeaderParser{
		header:    regexp.MustCompile(`^(\w+)(?:` + jsSpace + `+(` + jsDot + `*))?$`),
		attribute: regexp.MustCompile(`(\w+)="([^"\\]*)"` + jsSpace + `*(?:,` + jsSpace + `*|$)`),
	}
}

func (p *referenceHeaderParser) parse(header string) (Header, error) {
	if header == "" {
		return Header{}, fail(MsgUnauthorized)
	}
	if len(header) > MaxMatchLength {
		return Header{}, fail(MsgHeaderTooLong)
	}
	s := latin1(header)
	parts := p.header.FindStringSubmatch(s)
	if parts == nil {
		return Header{}, fail(MsgInvalidHeaderSyntax)
	}
	if !strings.EqualFold(parts[1], "hawk") {
		return Header{}, fail(MsgUnauthorized)
	}
	attrs := parts[2]
	if attrs == "" {
		return Header{}, fail(MsgInvalidHeaderSyntax)
	}
	var h Header
	seen := map[string]bool{}
	errorMessage := ""
	leftover := false
	last := 0
	for _, m := range p.attribute.FindAllStringSubmatchIndex(attrs, -1) {
		if m[0] > last {
			leftover = true
		}
		last = m[1]
		name, value := attrs[m[2]:m[3]], attrs[m[4]:m[5]]
		field, _ := h.field(name)
		switch {
		case field == nil:
			errorMessage = "Unknown attribute: " + name
			leftover = true
		case !validAttributeValue(value):
			errorMessage = "Bad attribute value: " + name
			leftover = true
		case seen[name]:
			errorMessage = "Duplicate attribute: " + name
			leftover = true
		default:
			seen[name] = true
			*field = value
		}
	}
	if last < len(attrs) {
		leftover = true
	}
	if leftover {
		if errorMessage == "" {
			return Header{}, fail(MsgBadHeaderFormat)
		}
		return Header{}, fail("Bad Request: " + errorMessage)
	}
	if h.ID == "" || h.TS == "" || h.Nonce == "" || h.MAC == "" {
		return Header{}, fail(MsgMissingAttributes)
	}
	return h, nil
}

// parseOutcome renders a parse result for comparison.
func parseOutcome(h Header, err error) string {
	if err != nil {
		var herr *Error
		if !errors.As(err, &herr) {
			return "non-Hawk error " + err.Error()
		}
		return "error: " + herr.Message
	}
	return "ok: " + strings.Join([]string{h.ID, h.TS, h.Nonce, h.Hash, h.Ext, h.MAC, h.App, h.Dlg}, "|")
}

// differentialHeaders are inputs chosen to exercise every branch of both
// parsers: separators, Latin-1 spaces and line terminators, backslashes,
// matches starting inside words, duplicates and unknown names.
var differentialHeaders = []string{
	`Hawk id="a", ts="1", nonce="n", mac="m"`,
	`Hawk id="a",ts="1",nonce="n",mac="m",`,
	`Hawk id="a",ts="1",nonce="n",mac="m",  `,
	`Hawk id="a" ,ts="1", nonce="n", mac="m"`,
	`Hawk id="a" ts="1", nonce="n", mac="m"`,
	`Hawk id="a", ts="1", nonce="n", mac="m" x`,
	`Hawk x id="a", ts="1", nonce="n", mac="m"`,
	`Hawk xid="a", ts="1", nonce="n", mac="m"`,
	`Hawk  id="a",	ts="1",` + "\v" + `nonce="n",` + "\f" + `mac="m"`,
	"Hawk\xa0id=\"a\",\xa0ts=\"1\", nonce=\"n\", mac=\"m\"\xa0",
	"Hawk\xc2\xa0id=\"a\", ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk \n id=\"a\", ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk id=\"a\",\n ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk id=\"a\", ts=\"1\", nonce=\"n\", mac=\"m\"\r",
	"Hawk \r\n",
	"Basic \r\n",
	"Basic a\nb",
	"Hawk id=\"\xe9\", ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk id=\"a\", ts=\"1\", nonce=\"n\", mac=\"m\", \xe9=\"x\"",
	`Hawk id="a\", ts="1", nonce="n", mac="m"`,
	`Hawk id="a", ts="1\"", nonce="n", mac="m"`,
	`Hawk id="a", ts="", nonce="n", mac="m"`,
	`Hawk id="a", id="b", ts="1", nonce="n", mac="m"`,
	`Hawk id="a", foo="b", ts="1", nonce="n", mac="m"`,
	`Hawk id="a", foo="b", id="c", ts="1", nonce="n", mac="m"`,
	`Hawk id="a", ts="1", nonce="n"`,
	`Hawk id="a="b="c="d", ts="1", nonce="n", mac="m"`,
	`Hawk a="b="c="d="`,
	`Hawk id=="a", ts="1", nonce="n", mac="m"`,
	`Hawk id= "a", ts="1", nonce="n", mac="m"`,
	`Hawk id="a", ts="1", nonce="n", mac="m", hash="h", ext="e", app="p", dlg="d"`,
	`Hawk id="a" , , ts="1", nonce="n", mac="m"`,
	`Hawk ,id="a", ts="1", nonce="n", mac="m"`,
	`Hawk id="a"`,
	`Hawk id`,
	`Hawk id="`,
	`Hawk id="a`,
	`Hawk "id"="a"`,
	`hAwK id="a", ts="1", nonce="n", mac="m"`,
	`Hawk_ id="a", ts="1", nonce="n", mac="m"`,
	`Hawk`,
	`Hawk `,
	` Hawk id="a"`,
	`Hawk,id="a"`,
	`Bearer abc`,
	"Hawk id=\"a\"\x00, ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk id=\"a\u2028\", ts=\"1\", nonce=\"n\", mac=\"m\"",
	"Hawk id=\"a\", ts=\"1\", nonce=\"n\", mac=\"m\"\u00a0",
	strings.Repeat("x", MaxMatchLength+1),
	"Hawk id=\"" + strings.Repeat("a", MaxMatchLength-10) + "\"",
}

func TestParseHeaderMatchesReference(t *testing.T) {
	t.Parallel()
	p, ref := NewParser(), newReferenceHeaderParser()
	for _, header := range differentialHeaders {
		t.Run(header, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, parseOutcome(ref.parse(header)), parseOutcome(p.ParseHeader(header)))
		})
	}
}

// FuzzParseHeaderDifferential checks that the hand-written parser and the
// regular-expression reference agree on every input.
func FuzzParseHeaderDifferential(f *testing.F) {
	for _, s := range differentialHeaders {
		f.Add(s)
	}
	p, ref := NewParser(), newReferenceHeaderParser()
	f.Fuzz(func(t *testing.T, header string) {
		want := parseOutcome(ref.parse(header))
		if got := parseOutcome(p.ParseHeader(header)); got != want {
			t.Fatalf("ParseHeader(%q) = %s, reference gives %s", header, got, want)
		}
	})
}

func TestAttributeCharMatchesHawkList(t *testing.T) {
	t.Parallel()
	// The characters Hawk's attribute value expression lists.
	const listed = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _!#$%&'()*+,-./:;<=>?@[]^`{|}~"
	for c := 0; c < 256; c++ {
		require.Equal(t, strings.IndexByte(listed, byte(c)) >= 0, attributeChar(byte(c)), "byte %#x", c)
	}
}

// extEscapes are ext values exercising NormalizedString's escaping.
var extEscapes = []string{
	"", "plain", `a\b`, "a\nb", `\`, "\n", `\\n`, "\\\n\n\\", "x\r\ny", "é\\\n",
	"eyJjZXJ0aWZpY2F0ZSI6eyJ2ZXJzaW9uIjoxfX0=",
}

// referenceNormalizedExt is how NormalizedString escaped ext before it
// was hand-written: Hawk's two replacements, applied in one pass.
func referenceNormalizedExt(ext string) string {
	return strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(ext)
}

func checkNormalizedExt(t *testing.T, ext string) {
	a := Artifacts{Method: "GET", Resource: "/", Host: "h", Port: 80, TS: "1", Nonce: "n", Ext: ext}
	want := "hawk.1.header\n1\nn\nGET\n/\nh\n80\n\n" + referenceNormalizedExt(ext) + "\n"
	require.Equal(t, want, NormalizedString(KindHeader, a))
}

func TestNormalizedStringEscapesExt(t *testing.T) {
	t.Parallel()
	for _, ext := range extEscapes {
		t.Run(ext, func(t *testing.T) {
			t.Parallel()
			checkNormalizedExt(t, ext)
		})
	}
}

func FuzzNormalizedStringExt(f *testing.F) {
	for _, ext := range extEscapes {
		f.Add(ext)
	}
	f.Fuzz(checkNormalizedExt)
}

func TestPrintableASCII(t *testing.T) {
	t.Parallel()
	naive := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < 0x20 || s[i] > 0x7e {
				return false
			}
		}
		return true
	}
	// Every byte value at every position of strings up to 17 bytes, in a
	// background of each boundary character.
	for _, fill := range []byte{0x20, 0x7e, 'a'} {
		for n := 1; n <= 17; n++ {
			for pos := range n {
				for c := range 256 {
					b := []byte(strings.Repeat(string(fill), n))
					b[pos] = byte(c)
					if got, want := printableASCII(string(b)), naive(string(b)); got != want {
						t.Fatalf("printableASCII(%q) = %v, want %v", b, got, want)
					}
				}
			}
		}
	}
	require.True(t, printableASCII(""))
}
