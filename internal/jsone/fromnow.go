package jsone

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/jsvalue"
)

// caseless turns a lower-case ASCII word into a pattern matching it in any
// case, as JavaScript's /i does for ASCII (Go's (?i) would also let "K"
// match the Kelvin sign).
func caseless(word string) string {
	var b strings.Builder
	for _, c := range word {
		if c >= 'a' && c <= 'z' {
			fmt.Fprintf(&b, "[%c%c]", c, c-'a'+'A')
		} else {
			b.WriteRune(c)
		}
	}
	return b.String()
}

// timeUnits are the units of a time expression in the order they must
// appear, each with its spellings in the order the reference tries them.
var timeUnits = []struct {
	name      string
	spellings []string
}{
	{"years", []string{"y", "year", "years", "yr"}},
	{"months", []string{"months", "month", "mo"}},
	{"weeks", []string{"weeks", "week", "wk", "w"}},
	{"days", []string{"days", "day", "d"}},
	{"hours", []string{"hours", "hour", "hr", "h"}},
	{"minutes", []string{"minutes", "minute", "min", "m"}},
	{"seconds", []string{"seconds", "second", "sec", "s"}},
}

// timeExpression matches "[+|-] [N years] [N months] ... [N seconds]".
var timeExpression = func() *regexp.Regexp {
	s := jsvalue.SpaceClass + "*"
	var b strings.Builder
	b.WriteString(`^(` + s + `(-|\+))?`)
	for _, u := range timeUnits {
		alts := make([]string, len(u.spellings))
		for i, sp := range u.spellings {
			alts[i] = caseless(sp)
		}
		b.WriteString(`(` + s + `(?P<` + u.name + `>\d+)` + s + `(?:` + strings.Join(alts, "|") + `))?`)
	}
	b.WriteString(s + `$`)
	return regexp.MustCompile(b.String())
}()

// fromNow adds a time expression ("2 days 3 hours", "-1 year") to a
// reference time and returns it as JavaScript's Date.prototype.toJSON
// does; null when the result is not a valid date. Months are 30 days and
// years 365, as in the reference.
func fromNow(expr string, reference any, now time.Time) (any, error) {
	m := timeExpression.FindStringSubmatch(expr)
	if m == nil {
		return nil, &Error{Kind: "Error", Message: "String: '" + expr + "' isn't a time expression"}
	}
	sign := 1.0
	if m[2] == "-" {
		sign = -1
	}
	amount := map[string]float64{}
	for i, name := range timeExpression.SubexpNames() {
		if name != "" && m[i] != "" {
			f, _ := strconv.ParseFloat(m[i], 64)
			amount[name] = f * sign
		}
	}
	days := amount["days"]
	days += 30 * amount["months"]
	days += 365 * amount["years"]

	ms := float64(now.UnixMilli())
	if jsTruthy(reference) {
		ms = dateValue(reference)
	}
	ms = ms +
		amount["weeks"]*7*24*60*60*1000 +
		days*24*60*60*1000 +
		amount["hours"]*60*60*1000 +
		amount["minutes"]*60*1000 +
		amount["seconds"]*1000
	return dateJSON(ms), nil
}

// maxTime is the largest distance from the epoch a JavaScript Date holds,
// in milliseconds.
const maxTime = 8.64e15

// dateValue is the time (ms since the epoch) of JavaScript's new Date(v);
// NaN when v is not a date.
func dateValue(v any) float64 {
	switch x := v.(type) {
	case float64:
		return timeClip(x)
	case bool:
		return toNumber(x)
	case string:
		return parseDate(x)
	}
	return parseDate(toString(v))
}

func timeClip(ms float64) float64 {
	if math.IsNaN(ms) || math.Abs(ms) > maxTime {
		return math.NaN()
	}
	return math.Trunc(ms) + 0
}

// isoDate is the date-time format of ECMAScript's Date.parse: a date
// (YYYY, YYYY-MM, YYYY-MM-DD, or a six-digit signed year), optionally a
// time (THH:mm, :ss, .sss) and an offset (Z or ±HH:mm).
var isoDate = regexp.MustCompile(`^([+-]\d{6}|\d{4})(?:-(\d{2})(?:-(\d{2}))?)?` +
	`(?:T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?(Z|[+-]\d{2}:\d{2})?$`)

// parseDate reads the ISO 8601 forms of Date.parse. A time without an
// offset is read as UTC (JavaScript uses the machine's zone); the other
// formats JavaScript engines guess at are not dates here.
func parseDate(s string) float64 {
	m := isoDate.FindStringSubmatch(s)
	if m == nil || m[1] == "-000000" {
		return math.NaN()
	}
	num := func(s string, def int) int {
		if s == "" {
			return def
		}
		n, _ := strconv.Atoi(s)
		return n
	}
	year := num(m[1], 0)
	month, day := num(m[2], 1), num(m[3], 1)
	hour, minute, second := num(m[4], 0), num(m[5], 0), num(m[6], 0)
	if m[8] != "" && m[4] == "" {
		return math.NaN()
	}
	msec := 0
	if frac := m[7]; frac != "" {
		frac = (frac + "00")[:3]
		msec = num(frac, 0)
	}
	if month < 1 || month > 12 || day < 1 || day > daysIn(year, month) || minute > 59 || second > 59 ||
		hour > 24 || (hour == 24 && (minute != 0 || second != 0 || msec != 0)) {
		return math.NaN()
	}
	t := time.Date(year, time.Month(month), day, hour, minute, second, msec*int(time.Millisecond), time.UTC)
	ms := float64(t.Unix())*1000 + float64(msec)
	if off := m[8]; off != "" && off != "Z" {
		h, mm := num(off[1:3], 0), num(off[4:6], 0)
		if h > 23 || mm > 59 {
			return math.NaN()
		}
		d := float64(h*60+mm) * 60000
		if off[0] == '+' {
			ms -= d
		} else {
			ms += d
		}
	}
	return timeClip(ms)
}

func daysIn(year, month int) int {
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// dateJSON is Date.prototype.toJSON: the ISO form with milliseconds in UTC,
// with a six-digit signed year outside 0000-9999, or null for an invalid
// date.
// DateJSON is JavaScript's Date.prototype.toJSON of t (to the
// millisecond, in UTC): how Taskcluster's services write "now" into a
// template's context.
func DateJSON(t time.Time) string {
	s, _ := dateJSON(float64(t.UnixMilli())).(string)
	return s
}

func dateJSON(ms float64) any {
	ms = timeClip(ms)
	if math.IsNaN(ms) {
		return nil
	}
	t := time.UnixMilli(int64(ms)).UTC()
	year := t.Year()
	var y string
	switch {
	case year < 0:
		y = fmt.Sprintf("-%06d", -year)
	case year > 9999:
		y = fmt.Sprintf("+%06d", year)
	default:
		y = fmt.Sprintf("%04d", year)
	}
	return fmt.Sprintf("%s-%02d-%02dT%02d:%02d:%02d.%03dZ", y, t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e6)
}

// formatNow is the default `now` of a render.
func formatNow(now time.Time) string {
	return dateJSON(float64(now.UnixMilli())).(string)
}

func fromNowBuiltin(r *renderer, sc *scope, args []any) (any, error) {
	var reference any
	if len(args) > 1 {
		reference = args[1]
	}
	if !jsTruthy(reference) {
		reference, _ = sc.lookup("now")
	}
	return fromNow(args[0].(string), reference, r.now)
}
