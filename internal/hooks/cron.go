package hooks

import (
	"errors"
	"fmt"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A hook's schedule is written in the cron dialect of the npm package
// cron-parser (version 5), which Taskcluster's hooks service uses, evaluated
// in UTC. This file parses that dialect and computes due times; the vectors
// in testdata/cron.json, produced from cron-parser itself by
// testdata/gen/gen.mjs, pin both.
//
// The dialect, as hooks accept it:
//
//   - one to six whitespace-separated fields; six are
//     "second minute hour day-of-month month day-of-week", and fewer fields
//     are right-aligned to those six with the missing leading ones taken
//     from "* * * * * 0" (so five fields run at second 0, like classic
//     cron, and an empty pattern runs every minute);
//   - in every field: "*" or "?" (every value), "a", "a-b", "a-b/n",
//     "a/n" (from a to the field's maximum), "*/n", and comma lists;
//   - month and day-of-week accept three-letter English names, any case;
//     day-of-week 7 is Sunday, like 0;
//   - day-of-month "L" is the month's last day; day-of-week "dL" is the
//     month's last weekday d; day-of-week "d#n" is its n-th weekday d;
//   - "@yearly", "@annually", "@monthly", "@weekly", "@daily", "@hourly",
//     "@minutely", "@secondly", "@weekdays" and "@weekends";
//   - when both day-of-month and day-of-week are restricted, a day matching
//     either is due (classic cron's rule).
//
// cron-parser's "H" (a hashed value, chosen at random on every parse when no
// seed is given) is refused: its due times would differ between replicas
// and between two computations of the same schedule.

// cronField bounds.
type fieldSpec struct {
	name     string
	min, max int
}

var (
	secondField = fieldSpec{"second", 0, 59}
	minuteField = fieldSpec{"minute", 0, 59}
	hourField   = fieldSpec{"hour", 0, 23}
	domField    = fieldSpec{"dayOfMonth", 1, 31}
	monthField  = fieldSpec{"month", 1, 12}
	dowField    = fieldSpec{"dayOfWeek", 0, 7}
)

var predefined = map[string]string{
	"@yearly":   "0 0 0 1 1 *",
	"@annually": "0 0 0 1 1 *",
	"@monthly":  "0 0 0 1 * *",
	"@weekly":   "0 0 0 * * 0",
	"@daily":    "0 0 0 * * *",
	"@hourly":   "0 0 * * * *",
	"@minutely": "0 * * * * *",
	"@secondly": "* * * * * *",
	"@weekdays": "0 0 0 * * 1-5",
	"@weekends": "0 0 0 * * 0,6",
}

var monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
	"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}

var dayNames = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}

// Characters each field may contain (after names are replaced by numbers).
var (
	plainChars = regexp.MustCompile(`^[?,*\d/-]+$`)
	domChars   = regexp.MustCompile(`^[?,*\dL/-]+$`)
	dowChars   = regexp.MustCompile(`^[?,*\dL#/-]+$`)
	nameRun    = regexp.MustCompile(`[a-zA-Z]{3}`)
)

// daysInMonth is the longest each month can be (February in leap years).
var daysInMonth = [12]int{31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}

// CronPattern is one parsed cron pattern.
type CronPattern struct {
	text                           string
	seconds, minutes               uint64 // bit i set: value i is due
	hours, days, months            uint64
	weekdays                       uint64 // bits 0–6
	lastDay                        bool   // day-of-month "L"
	lastWeekdays                   uint64 // day-of-week "dL": bit d
	nth                            int    // day-of-week "d#n": n, 0 if unused
	daysWildcard, weekdaysWildcard bool
}

// String returns the pattern as written.
func (p *CronPattern) String() string { return p.text }

// ParseCron parses one pattern. Its errors carry cron-parser's messages,
// which Taskcluster shows to callers.
func ParseCron(text string) (*CronPattern, error) {
	if strings.Contains(text, "H") && !strings.HasPrefix(text, "@") {
		return nil, errors.New("hashed values (H) are not supported: their due times would differ between replicas")
	}
	expr := text
	if p, ok := predefined[expr]; ok {
		expr = p
	}
	if expr == "" {
		expr = "0 * * * * *"
	}
	atoms := strings.Fields(expr)
	if len(atoms) > 6 {
		return nil, errors.New("Invalid cron expression, too many fields")
	}
	defaults := []string{"*", "*", "*", "*", "*", "0"}
	atoms = append(append([]string{}, defaults[len(atoms):]...), atoms...)
	p := &CronPattern{text: text}
	var err error
	if p.seconds, err = parseField(atoms[0], secondField, plainChars); err != nil {
		return nil, err
	}
	if p.minutes, err = parseField(atoms[1], minuteField, plainChars); err != nil {
		return nil, err
	}
	if p.hours, err = parseField(atoms[2], hourField, plainChars); err != nil {
		return nil, err
	}
	month, err := replaceNames(atoms[4], monthNames, dayNames)
	if err != nil {
		return nil, err
	}
	if p.months, err = parseField(month, monthField, plainChars); err != nil {
		return nil, err
	}
	if err := p.parseDays(atoms[3]); err != nil {
		return nil, err
	}
	if err := p.parseWeekdays(atoms[5]); err != nil {
		return nil, err
	}
	// A single month with one explicit day it never has can never be due,
	// unless a restricted day-of-week rescues it.
	if bits.OnesCount64(p.months) == 1 && !p.lastDay && p.weekdaysWildcard && p.days != 0 {
		m := bits.TrailingZeros64(p.months)
		if bits.TrailingZeros64(p.days) > daysInMonth[m-1] {
			return nil, errors.New("Invalid explicit day of month definition")
		}
	}
	return p, nil
}

// replaceNames turns three-letter month or day names into numbers.
func replaceNames(field string, tables ...map[string]int) (string, error) {
	var bad string
	out := nameRun.ReplaceAllStringFunc(field, func(m string) string {
		key := strings.ToLower(m)
		for _, t := range tables {
			if v, ok := t[key]; ok {
				return strconv.Itoa(v)
			}
		}
		if bad == "" {
			bad = key
		}
		return m
	})
	if bad != "" {
		return "", fmt.Errorf("Validation error, cannot resolve alias %q", bad)
	}
	return out, nil
}

func (p *CronPattern) parseDays(field string) error {
	if !domChars.MatchString(field) {
		return fmt.Errorf("Invalid characters, got value: %s", field)
	}
	p.daysWildcard = field == "*" || field == "?"
	var plain []string
	for _, item := range strings.Split(field, ",") {
		if item == "L" {
			p.lastDay = true
			continue
		}
		plain = append(plain, item)
	}
	if len(plain) == 0 {
		return nil
	}
	var err error
	p.days, err = parseField(strings.Join(plain, ","), domField, domChars)
	return err
}

func (p *CronPattern) parseWeekdays(field string) error {
	field, err := replaceNames(field, dayNames, monthNames)
	if err != nil {
		return err
	}
	if !dowChars.MatchString(field) {
		return fmt.Errorf("Invalid characters, got value: %s", field)
	}
	p.weekdaysWildcard = field == "*" || field == "?"
	if day, nth, ok := strings.Cut(field, "#"); ok {
		if strings.ContainsAny(field, ",-/") {
			c := field[strings.IndexAny(field, ",-/")]
			return fmt.Errorf("Constraint error, invalid dayOfWeek `#` and `%c` special characters are incompatible", c)
		}
		n, err := strconv.Atoi(nth)
		if err != nil || strings.Contains(nth, "#") || n < 1 || n > 5 {
			return errors.New("Constraint error, invalid dayOfWeek occurrence number (#)")
		}
		p.nth = n
		field = day
	}
	var plain []string
	for _, item := range strings.Split(field, ",") {
		if strings.Contains(item, "L") {
			// Like cron-parser, only the first character names the
			// weekday ("9L" is Tuesday's, 9 mod 7).
			if item[0] < '0' || item[0] > '9' {
				return fmt.Errorf("Invalid last weekday of the month expression: %s", item)
			}
			p.lastWeekdays |= 1 << ((item[0] - '0') % 7)
			continue
		}
		plain = append(plain, item)
	}
	if len(plain) == 0 {
		return nil
	}
	set, err := parseField(strings.Join(plain, ","), dowField, dowChars)
	if err != nil {
		return err
	}
	if set&(1<<7) != 0 {
		set = set&^(1<<7) | 1 // 7 is Sunday
	}
	p.weekdays = set
	return nil
}

// parseField parses a comma list of values, ranges and steps into a set.
func parseField(field string, f fieldSpec, chars *regexp.Regexp) (uint64, error) {
	if !chars.MatchString(field) {
		return 0, fmt.Errorf("Invalid characters, got value: %s", field)
	}
	field = strings.NewReplacer("*", fmt.Sprintf("%d-%d", f.min, f.max), "?", fmt.Sprintf("%d-%d", f.min, f.max)).Replace(field)
	var set uint64
	for _, item := range strings.Split(field, ",") {
		if item == "" {
			return 0, errors.New("Invalid list value format")
		}
		s, err := parseItem(item, f)
		if err != nil {
			return 0, err
		}
		set |= s
	}
	return set, nil
}

// parseItem parses "a", "a-b", "a/n" or "a-b/n".
func parseItem(item string, f fieldSpec) (uint64, error) {
	parts := strings.Split(item, "/")
	if len(parts) > 2 {
		return 0, fmt.Errorf("Invalid repeat: %s", item)
	}
	rng, step := parts[0], 1
	if len(parts) == 2 {
		if !strings.Contains(rng, "-") {
			rng = fmt.Sprintf("%s-%d", rng, f.max)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("Constraint error, cannot repeat at every %s time.", jsNumber(parts[1]))
		}
		step = n
	}
	bounds := strings.Split(rng, "-")
	if len(bounds) == 1 {
		v, err := strconv.Atoi(rng)
		if err != nil || v < f.min || v > f.max {
			return 0, fmt.Errorf("Constraint error, got value %s expected range %d-%d", rng, f.min, f.max)
		}
		return 1 << v, nil
	}
	lo, errLo := strconv.Atoi(bounds[0])
	hi, errHi := strconv.Atoi(bounds[1])
	// Like cron-parser, "a-b-c" is read as "a-b".
	if errLo != nil || errHi != nil || lo < f.min || hi > f.max {
		return 0, fmt.Errorf("Constraint error, got range %s-%s expected range %d-%d", jsNumber(bounds[0]), jsNumber(bounds[1]), f.min, f.max)
	}
	if lo > hi {
		return 0, fmt.Errorf("Invalid range: %d-%d, min(%d) > max(%d)", lo, hi, lo, hi)
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << v
	}
	return set, nil
}

// jsNumber spells a field fragment the way JavaScript's parseInt would
// report it in an error: a number, or NaN.
func jsNumber(s string) string {
	if v, err := strconv.Atoi(s); err == nil {
		return strconv.Itoa(v)
	}
	return "NaN"
}

// searchYears bounds the search for a due time: every valid pattern is due
// at least once in eight years (29 February included).
const searchYears = 8

// Next returns the first due time strictly after the whole second that
// contains after, and false if the pattern is never due in the years
// searched.
func (p *CronPattern) Next(after time.Time) (time.Time, bool) {
	start := after.UTC().Truncate(time.Second).Add(time.Second)
	day := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)
	end := day.AddDate(searchYears, 0, 0)
	for ; day.Before(end); day = day.AddDate(0, 0, 1) {
		if p.months&(1<<uint(day.Month())) == 0 {
			day = time.Date(day.Year(), day.Month()+1, 0, 0, 0, 0, 0, time.UTC) // last day: the loop steps to the next month
			continue
		}
		if !p.dayDue(day) {
			continue
		}
		from := 0
		if day.Equal(time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.UTC)) {
			from = start.Hour()*3600 + start.Minute()*60 + start.Second()
		}
		if s, ok := p.firstTimeOfDay(from); ok {
			return day.Add(time.Duration(s) * time.Second), true
		}
	}
	return time.Time{}, false
}

// dayDue applies the day-of-month and day-of-week rules to a date.
func (p *CronPattern) dayDue(day time.Time) bool {
	last := day.AddDate(0, 0, 1).Day() == 1
	wd := uint(day.Weekday())
	domMatch := p.days&(1<<uint(day.Day())) != 0 || p.lastDay && last
	dowMatch := p.weekdays&(1<<wd) != 0 || p.lastWeekdays&(1<<wd) != 0 && day.AddDate(0, 0, 7).Month() != day.Month()
	var due bool
	switch {
	case !p.daysWildcard && !p.weekdaysWildcard:
		due = domMatch || dowMatch
	case p.weekdaysWildcard:
		due = domMatch
	default:
		due = dowMatch
	}
	if due && p.nth > 0 && (day.Day()+6)/7 != p.nth {
		return false
	}
	return due
}

// firstTimeOfDay returns the first due second of a day at or after the
// from-th second.
func (p *CronPattern) firstTimeOfDay(from int) (int, bool) {
	for h := from / 3600; h < 24; h++ {
		if p.hours&(1<<uint(h)) == 0 {
			continue
		}
		m0 := 0
		if h == from/3600 {
			m0 = from % 3600 / 60
		}
		for m := m0; m < 60; m++ {
			if p.minutes&(1<<uint(m)) == 0 {
				continue
			}
			s0 := 0
			if h == from/3600 && m == m0 {
				s0 = from % 60
			}
			if rest := p.seconds >> uint(s0); rest != 0 {
				return h*3600 + m*60 + s0 + bits.TrailingZeros64(rest), true
			}
		}
	}
	return 0, false
}
