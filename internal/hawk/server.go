package hawk

import (
	"crypto/subtle"
	"encoding/base64"
	"math"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// jsDot is JavaScript's "." translated for Go: it stops at line
// terminators. The bewit expressions below are Hawk's, translated from
// JavaScript.
const jsDot = `[^\n\r\x{2028}\x{2029}]`

// regexps holds the compiled bewit expressions; compiled per parser value
// rather than at package level so the package keeps no global state.
// Headers, parsed on every authenticated request, are scanned by hand
// instead (see ParseHeader).
type regexps struct {
	bewitPresent, bewit *regexp.Regexp
}

func compileRegexps() *regexps {
	return &regexps{
		bewitPresent: regexp.MustCompile(`^/` + jsDot + `*[?&]bewit=`),
		bewit:        regexp.MustCompile(`^(/` + jsDot + `*)([?&])bewit=([^&$]*)(?:&(` + jsDot + `+))?$`),
	}
}

// Parser parses Hawk headers and bewits. It holds only compiled regular
// expressions, is safe for concurrent use, and should be created once (see
// NewParser) and reused.
type Parser struct{ re *regexps }

// NewParser returns a Parser.
func NewParser() *Parser { return &Parser{re: compileRegexps()} }

// Header holds the attributes of a parsed Hawk Authorization header. Absent
// attributes are empty (Hawk rejects empty values, so empty means absent).
type Header struct {
	ID, TS, Nonce, Hash, Ext, MAC, App, Dlg string
}

// Request describes the parts of an incoming request that a MAC covers.
type Request struct {
	// Method is the HTTP method (case-insensitive).
	Method string
	// Resource is the raw request-target exactly as received
	// (http.Request.RequestURI), never a decoded path.
	Resource string
	// Host is the host name the client addressed (see HostPort).
	Host string
	// Port is the port the client addressed (see HostPort).
	Port int
}

// ParseHeader parses an Authorization header value with Hawk's rules:
// at most MaxMatchLength characters, scheme "Hawk" (any case), quoted
// attributes from a fixed set without duplicates or empty values, and id,
// ts, nonce and mac all present. Failures are *Error values carrying
// Taskcluster's messages.
//
// Hawk parses with two JavaScript regular expressions over the header
// decoded as Latin-1; this is a hand-written scanner with exactly their
// accept/reject behaviour (the regexp form survives in the tests, which
// compare the two). It works on the raw bytes: each byte is one Latin-1
// character, every character either expression treats specially is
// ASCII or U+00A0 (byte 0xA0), and the values it keeps must be ASCII.
func (p *Parser) ParseHeader(header string) (Header, error) {
	if header == "" {
		return Header{}, fail(MsgUnauthorized)
	}
	if len(header) > MaxMatchLength {
		return Header{}, fail(MsgHeaderTooLong)
	}
	// ^(\w+)(?:\s+(.*))?$ : a word, then the end, or white space and the
	// attributes, which may not contain line terminators.
	i := 0
	for i < len(header) && isWordChar(header[i]) {
		i++
	}
	if i == 0 {
		return Header{}, fail(MsgInvalidHeaderSyntax)
	}
	scheme, attrs := header[:i], ""
	if i < len(header) {
		if !isJSSpace(header[i]) {
			return Header{}, fail(MsgInvalidHeaderSyntax)
		}
		for i < len(header) && isJSSpace(header[i]) {
			i++
		}
		attrs = header[i:]
		if strings.IndexByte(attrs, '\n') >= 0 || strings.IndexByte(attrs, '\r') >= 0 {
			return Header{}, fail(MsgInvalidHeaderSyntax)
		}
	}
	if !strings.EqualFold(scheme, "hawk") {
		return Header{}, fail(MsgUnauthorized)
	}
	if attrs == "" {
		return Header{}, fail(MsgInvalidHeaderSyntax)
	}

	var h Header
	var seen uint8
	errorMessage := ""
	// Hawk's parser is a global regex replace: every match is consumed,
	// failures leave a marker behind, and any leftover text means the
	// header was malformed. The last failure's message wins.
	leftover := false
	last := 0
	for {
		m, ok := nextAttribute(attrs, last)
		if !ok {
			break
		}
		if m.start > last {
			leftover = true
		}
		last = m.end
		field, bit := h.field(m.name)
		switch {
		case field == nil:
			errorMessage = "Unknown attribute: " + m.name
			leftover = true
		case m.value == "" || !printableASCII(m.value):
			// The same test as validAttributeValue: a matched value
			// holds no quote or backslash, so printable is enough.
			errorMessage = "Bad attribute value: " + m.name
			leftover = true
		case seen&bit != 0:
			errorMessage = "Duplicate attribute: " + m.name
			leftover = true
		default:
			seen |= bit
			*field = m.value
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

// attributeMatch is one match of Hawk's attribute expression
// (\w+)="([^"\\]*)"\s*(?:,\s*|$) within the attribute text: s[start:end],
// with its two groups.
type attributeMatch struct {
	start, end  int
	name, value string
}

// nextAttribute finds the leftmost match of the attribute expression in s
// at or after from, as a regular-expression search would. A match can only
// start at from or at the first character of a word: if one started inside
// a word, the word's previous character would start a match too.
func nextAttribute(s string, from int) (attributeMatch, bool) {
	for i := from; i < len(s); i++ {
		if !isWordChar(s[i]) || i > from && isWordChar(s[i-1]) {
			continue
		}
		if m, ok := attributeAt(s, i); ok {
			return m, true
		}
	}
	return attributeMatch{}, false
}

// attributeAt matches the attribute expression at exactly s[start:]. Each
// part of the expression can only match greedily here (no shorter choice
// lets the next part match), so a single forward pass decides.
func attributeAt(s string, start int) (attributeMatch, bool) {
	j := start
	for j < len(s) && isWordChar(s[j]) {
		j++
	}
	if j == start || j+1 >= len(s) || s[j] != '=' || s[j+1] != '"' {
		return attributeMatch{}, false
	}
	valueStart := j + 2
	k := strings.IndexByte(s[valueStart:], '"')
	if k < 0 || strings.IndexByte(s[valueStart:valueStart+k], '\\') >= 0 {
		return attributeMatch{}, false
	}
	valueEnd := valueStart + k
	end := valueEnd + 1
	for end < len(s) && isJSSpace(s[end]) {
		end++
	}
	if end < len(s) {
		if s[end] != ',' {
			return attributeMatch{}, false
		}
		end++
		for end < len(s) && isJSSpace(s[end]) {
			end++
		}
	}
	return attributeMatch{start: start, end: end, name: s[start:j], value: s[valueStart:valueEnd]}, true
}

// printableASCII reports whether every byte of s is in 0x20–0x7E. It tests
// eight bytes at a time: ext values run to kilobytes.
func printableASCII(s string) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		_ = s[7]
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		// Some byte < 0x20, or some byte > 0x7E (adding one sets its high
		// bit, or it was already set). A borrow or carry only crosses
		// into the next byte from a byte that is itself out of range, so
		// neither test has false positives.
		if (w-ones*0x20)&^w&highs != 0 || ((w+ones)|w)&highs != 0 {
			return false
		}
		s = s[8:]
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// isWordChar reports whether c matches the regular-expression class \w.
func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// isJSSpace reports whether byte c, read as a Latin-1 character, matches
// JavaScript's \s: ASCII white space and U+00A0, the only non-ASCII
// JavaScript space in Latin-1.
func isJSSpace(c byte) bool {
	switch c {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xa0:
		return true
	}
	return false
}

// field returns the Header field of a known attribute name and a bit
// identifying it, or nil for an unknown name.
func (h *Header) field(name string) (*string, uint8) {
	switch name {
	case "id":
		return &h.ID, 1 << 0
	case "ts":
		return &h.TS, 1 << 1
	case "nonce":
		return &h.Nonce, 1 << 2
	case "hash":
		return &h.Hash, 1 << 3
	case "ext":
		return &h.Ext, 1 << 4
	case "mac":
		return &h.MAC, 1 << 5
	case "app":
		return &h.App, 1 << 6
	case "dlg":
		return &h.Dlg, 1 << 7
	}
	return nil, 0
}

// Artifacts returns the MAC inputs of the header for request r.
func (h Header) Artifacts(r Request) Artifacts {
	return Artifacts{
		Method:   r.Method,
		Resource: r.Resource,
		Host:     r.Host,
		Port:     r.Port,
		TS:       h.TS,
		Nonce:    h.Nonce,
		Hash:     h.Hash,
		Ext:      h.Ext,
		App:      h.App,
		Dlg:      h.Dlg,
	}
}

// Verify checks the header's MAC for request r under key (in constant
// time), then that its timestamp is within TimestampSkew of now. The MAC
// comes first so that an unauthenticated caller learns nothing about the
// server clock. Nonces are deliberately not tracked, as in Taskcluster.
func (h Header) Verify(key string, r Request, now time.Time) error {
	if key == "" {
		return fail("Invalid credentials")
	}
	mac := MAC(key, KindHeader, h.Artifacts(r))
	if subtle.ConstantTimeCompare([]byte(mac), []byte(h.MAC)) != 1 {
		return fail(MsgBadMAC)
	}
	// Hawk coerces ts with JavaScript number semantics; a ts that is not a
	// number compares false and so is never stale (the MAC still covers it).
	ts := jsvalue.Number(h.TS)
	if math.Abs(ts*1000-float64(now.UnixMilli())) > float64(TimestampSkew.Milliseconds()) {
		return fail(MsgStaleTimestamp)
	}
	return nil
}

// VerifyPayloadHash checks a hash attribute against the raw body sent with
// contentType, in constant time. Callers run it only when the header
// carried a hash: Taskcluster does not require one.
func VerifyPayloadHash(hash, contentType string, body []byte) error {
	computed := PayloadHash(contentType, body)
	if subtle.ConstantTimeCompare([]byte(computed), []byte(hash)) != 1 {
		return fail(MsgInvalidPayloadHashPrefix + hash + "\n" +
			"Computed payload hash: " + computed + "\n" +
			"The request signed a payload hash that differs from the hash of the body the server received.")
	}
	return nil
}

// HasBewit reports whether a raw request-target uses bewit authentication,
// i.e. has a "bewit=" query parameter (Taskcluster tests the raw target with
// a regular expression rather than parsing the query).
func (p *Parser) HasBewit(requestTarget string) bool {
	return p.re.bewitPresent.MatchString(requestTarget)
}

// Bewit is a parsed bewit together with the request it arrived on.
type Bewit struct {
	// ID, Exp, MAC and Ext are the four backslash-separated parts.
	ID, Exp, MAC, Ext string
	// Resource is the request-target with the bewit parameter removed, as
	// covered by the MAC.
	Resource string
	// Host and Port are copied from the request.
	Host string
	Port int
}

// ParseBewit extracts and decodes the bewit of request r, whose Resource is
// the raw request-target. Failures are *Error values carrying Taskcluster's
// messages; the checks run in Hawk's order.
func (p *Parser) ParseBewit(r Request) (Bewit, error) {
	if len(r.Resource) > MaxMatchLength {
		return Bewit{}, fail(MsgResourceTooLong)
	}
	parts := p.re.bewit.FindStringSubmatch(latin1(r.Resource))
	if parts == nil {
		return Bewit{}, fail(MsgUnauthorized)
	}
	if parts[3] == "" {
		return Bewit{}, fail(MsgEmptyBewit)
	}
	if m := strings.ToUpper(r.Method); m != "GET" && m != "HEAD" {
		return Bewit{}, fail(MsgInvalidMethod)
	}
	raw, ok := decodeBase64URLLenient(parts[3])
	if !ok {
		return Bewit{}, fail(MsgInvalidBewitEncoding)
	}
	fields := strings.Split(string(raw), `\`)
	if len(fields) != 4 {
		return Bewit{}, fail(MsgInvalidBewitStructure)
	}
	b := Bewit{
		ID:   latin1(fields[0]),
		Exp:  latin1(fields[1]),
		MAC:  latin1(fields[2]),
		Ext:  latin1(fields[3]),
		Host: r.Host,
		Port: r.Port,
	}
	if b.ID == "" || b.Exp == "" || b.MAC == "" {
		return Bewit{}, fail(MsgMissingBewitAttrs)
	}
	b.Resource = parts[1]
	if parts[4] != "" {
		b.Resource += parts[2] + parts[4]
	}
	return b, nil
}

// Verify checks the bewit's MAC under key (constant time; the MAC always
// uses method GET), then that it has not expired at now. Unlike headers,
// bewits get no clock-skew allowance.
func (b Bewit) Verify(key string, now time.Time) error {
	if key == "" {
		return fail("Invalid credentials")
	}
	mac := MAC(key, KindBewit, Artifacts{
		Method:   "GET",
		Resource: b.Resource,
		Host:     b.Host,
		Port:     b.Port,
		TS:       b.Exp,
		Ext:      b.Ext,
	})
	if subtle.ConstantTimeCompare([]byte(mac), []byte(b.MAC)) != 1 {
		return fail(MsgBadMAC)
	}
	// parseInt semantics: a non-numeric exp is NaN and never expires; the
	// MAC already proves the signer chose it.
	if exp := jsvalue.ParseInt(b.Exp); exp*1000 <= float64(now.UnixMilli()) {
		return fail(MsgAccessExpired)
	}
	return nil
}

// decodeBase64URLLenient decodes base64url text the way Node's Buffer does
// after Hawk has checked the alphabet: padding optional, a dangling sixth
// bit group ignored.
func decodeBase64URLLenient(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return nil, false
		}
	}
	if len(s)%4 == 1 {
		s = s[:len(s)-1]
	}
	out, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return out, true
}

// latin1 converts bytes interpreted as Latin-1 into a UTF-8 Go string, as
// Node does with header values and Hawk does with decoded bewits.
func latin1(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) * 2)
	for i := 0; i < len(s); i++ {
		b.WriteRune(rune(s[i]))
	}
	return b.String()
}
