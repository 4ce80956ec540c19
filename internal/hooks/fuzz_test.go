package hooks

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// FuzzParseCron: no pattern makes the parser or the due-time search panic,
// and a due time is always after the reference, on a whole second.
func FuzzParseCron(f *testing.F) {
	raw, err := os.ReadFile("testdata/cron.json")
	if err != nil {
		f.Fatal(err)
	}
	var vectors []cronVector
	if err := json.Unmarshal(raw, &vectors); err != nil {
		f.Fatal(err)
	}
	for _, v := range vectors {
		f.Add(v.Pattern)
	}
	at := time.Date(2030, 1, 31, 23, 59, 58, 5e8, time.UTC)
	f.Fuzz(func(t *testing.T, pattern string) {
		p, err := ParseCron(pattern)
		if err != nil {
			return
		}
		next, ok := p.Next(at)
		if ok && (!next.After(at) || next.Nanosecond() != 0) {
			t.Fatalf("%q: due time %s after %s", pattern, next, at)
		}
	})
}
