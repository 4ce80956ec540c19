package cli

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// table lays rows of cells out in columns two spaces apart: the one layout
// of the CLI's lists and detail views ("key:" and value rows).
type table struct{ tw *tabwriter.Writer }

// newTable starts a table on w; a header, if given, is its first row.
func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	if len(header) > 0 {
		cells := make([]any, len(header))
		for i, h := range header {
			cells[i] = h
		}
		t.row(cells...)
	}
	return t
}

// row adds a row, each cell formatted as by fmt.Sprint (so pass a
// json.RawMessage as a string).
func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	io.WriteString(t.tw, "\n")
}

// flush writes the table out.
func (t *table) flush() error { return t.tw.Flush() }
