package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/bench"
)

func TestParseSizes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "1000,100000", want: []int{1000, 100000}},
		{in: " 1_000 , 100_000 ,", want: []int{1000, 100000}},
		{in: "", want: nil},
		{in: "10,x", wantErr: true},
		{in: "0", wantErr: true},
		{in: "-5", wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			t.Parallel()
			got, err := parseSizes(c.in)
			if c.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, c.want, got)
		})
	}
}

// TestBenchBacklogsDefault: the --backlogs flag shows bench's default
// sizes in the text it parses back.
func TestBenchBacklogsDefault(t *testing.T) {
	t.Parallel()
	def := benchCommand().Flags().Lookup("backlogs").DefValue
	require.Equal(t, "1000,100000", def)
	got, err := parseSizes(def)
	require.NoError(t, err)
	require.Equal(t, bench.DefaultOptions().Backlogs, got)
}

// TestBenchCommandInProcess runs `hopper bench --db sqlite` at a tiny size,
// as a table and as JSON.
func TestBenchCommandInProcess(t *testing.T) {
	t.Parallel()
	args := []string{"--db", "sqlite", "--log-level", "error", "--tasks", "20", "--creators", "2", "--workers", "2",
		"--batch", "4", "--wake-samples", "3", "--backlogs", "10,30", "--backlog-samples", "5"}

	var table bytes.Buffer
	cmd := benchCommand()
	cmd.SetArgs(args)
	cmd.SetOut(&table)
	require.NoError(t, cmd.Execute())
	for _, want := range []string{"in-process hopper on sqlite", "life-cycle", "tasks/s", "wake", "backlog 30 vs 10"} {
		require.Contains(t, table.String(), want)
	}

	var raw bytes.Buffer
	cmd = benchCommand()
	cmd.SetArgs(append(args, "--json", "--only", "backlog"))
	cmd.SetOut(&raw)
	require.NoError(t, cmd.Execute())
	var rep struct {
		Lifecycle *json.RawMessage
		Backlog   []struct{ Backlog int }
	}
	require.NoError(t, json.Unmarshal(raw.Bytes(), &rep), raw.String())
	require.Nil(t, rep.Lifecycle)
	require.Len(t, rep.Backlog, 2)
	require.Equal(t, 30, rep.Backlog[1].Backlog)
}

func TestBenchCommandNeedsATarget(t *testing.T) {
	t.Setenv("TASKCLUSTER_ROOT_URL", "")
	cmd := benchCommand()
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	require.ErrorContains(t, cmd.Execute(), "--root-url")

	cmd = benchCommand()
	cmd.SetArgs([]string{"--db", "sqlite", "--root-url", "http://127.0.0.1:1"})
	cmd.SetOut(&bytes.Buffer{})
	require.ErrorContains(t, cmd.Execute(), "not both")
}
