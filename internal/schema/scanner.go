package schema

// Scanner follows a JSON text as it arrives, in pieces, counting its
// values and nesting without decoding anything: the API's request reader
// refuses a body as soon as it passes its route's limits, which Bounds
// derives from the route's schema, counting alike. It trusts no syntax
// (the text is checked later) and only has to count at least one value
// per value.
type Scanner struct {
	// Values counts objects, arrays, strings (object keys included),
	// numbers and literals; MaxDepth is the deepest nesting of objects
	// and arrays seen (a top-level object: 1).
	Values, MaxDepth int

	inString, escaped bool
	depth             int
	inScalar          bool // inside a number or literal
}

// Feed scans the next piece of the text.
func (s *Scanner) Feed(p []byte) {
	for _, c := range p {
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		switch c {
		case '"':
			s.inString = true
			s.inScalar = false
			s.Values++
		case '{', '[':
			s.Values++
			s.inScalar = false
			s.depth++
			s.MaxDepth = max(s.MaxDepth, s.depth)
		case '}', ']':
			s.inScalar = false
			s.depth--
		case ',', ':', ' ', '\t', '\r', '\n':
			s.inScalar = false
		default:
			if !s.inScalar {
				s.inScalar = true
				s.Values++
			}
		}
	}
}
