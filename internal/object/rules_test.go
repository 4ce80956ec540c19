package object

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/store"
)

var (
	now     = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	expires = now.Add(48 * time.Hour)
	sha256a = strings.Repeat("a", 64)
	sha256b = strings.Repeat("b", 64)
	sha512a = strings.Repeat("a", 128)
)

func requireKind(t *testing.T, err error, kind ErrorKind) {
	t.Helper()
	var e *Error
	require.True(t, errors.As(err, &e), "want an *object.Error, got %v", err)
	require.Equal(t, kind, e.Kind, e.Message)
}

func unfinished(hashes map[string]string) *store.Object {
	return &store.Object{Name: "n", ProjectID: "p", UploadID: "up", UploadExpires: now.Add(time.Hour), Expires: expires, Hashes: hashes, Created: now}
}

func finished(hashes map[string]string) *store.Object {
	o := unfinished(hashes)
	o.UploadID = ""
	return o
}

func TestBeginUpload(t *testing.T) {
	t.Parallel()
	base := UploadRequest{ProjectID: "p", UploadID: "up", Expires: expires}
	with := func(edit func(*UploadRequest)) UploadRequest {
		r := base
		edit(&r)
		return r
	}
	tests := []struct {
		name       string
		existing   *store.Object
		req        UploadRequest
		wantKind   ErrorKind
		wantHashes map[string]string
	}{
		{"new", nil, with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": sha256a} }), 0, map[string]string{"sha256": sha256a}},
		{"repeat", unfinished(nil), base, 0, map[string]string{}},
		{"repeat with expires in finer precision", unfinished(nil), with(func(r *UploadRequest) { r.Expires = expires.Add(300 * time.Microsecond) }), 0, map[string]string{}},
		{"repeat adding a hash", unfinished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha512": sha512a} }),
			0, map[string]string{"sha256": sha256a, "sha512": sha512a}},
		{"repeat changing a hash", unfinished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": sha256b} }), KindConflict, nil},
		{"malformed hash", nil, with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": "abc"} }), KindInput, nil},
		{"other uploadId", unfinished(nil), with(func(r *UploadRequest) { r.UploadID = "other" }), KindConflict, nil},
		{"other projectId", unfinished(nil), with(func(r *UploadRequest) { r.ProjectID = "other" }), KindConflict, nil},
		{"other expires", unfinished(nil), with(func(r *UploadRequest) { r.Expires = expires.Add(time.Hour) }), KindConflict, nil},
		{"already finished", finished(nil), base, KindConflict, nil},
		{"expires in the past", nil, with(func(r *UploadRequest) { r.Expires = now.Add(-time.Second) }), KindInput, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := BeginUpload(tc.existing, "n", tc.req, now)
			if tc.wantKind != 0 {
				requireKind(t, err, tc.wantKind)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantHashes, got.Hashes)
			require.Equal(t, "up", got.UploadID)
			require.True(t, got.Expires.Equal(expires))
			if tc.existing == nil {
				require.Equal(t, now.Add(UploadLifetime), got.UploadExpires)
			}
		})
	}
	_, err := BeginUpload(nil, strings.Repeat("x", MaxNameLen+1), base, now)
	requireKind(t, err, KindInput)
}

func TestFinishUpload(t *testing.T) {
	t.Parallel()
	base := UploadRequest{ProjectID: "p", UploadID: "up"}
	with := func(edit func(*UploadRequest)) UploadRequest {
		r := base
		edit(&r)
		return r
	}
	stale := unfinished(nil)
	stale.UploadExpires = now.Add(-time.Second)
	tests := []struct {
		name       string
		existing   *store.Object
		req        UploadRequest
		wantKind   ErrorKind
		wantRepeat bool
		wantHashes map[string]string
	}{
		{"finish", unfinished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha512": sha512a} }),
			0, false, map[string]string{"sha256": sha256a, "sha512": sha512a}},
		{"unknown", nil, base, KindNotFound, false, nil},
		{"upload expired", stale, base, KindNotFound, false, nil},
		{"other projectId", unfinished(nil), with(func(r *UploadRequest) { r.ProjectID = "q" }), KindInput, false, nil},
		{"other uploadId", unfinished(nil), with(func(r *UploadRequest) { r.UploadID = "x" }), KindConflict, false, nil},
		{"changing a hash", unfinished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": sha256b} }), KindConflict, false, nil},
		{"repeat", finished(map[string]string{"sha256": sha256a, "sha512": sha512a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": sha256a} }), 0, true, nil},
		{"repeat with any uploadId", finished(nil), with(func(r *UploadRequest) { r.UploadID = "x" }), 0, true, nil},
		{"repeat adding a hash", finished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha512": sha512a} }), KindConflict, false, nil},
		{"repeat changing a hash", finished(map[string]string{"sha256": sha256a}), with(func(r *UploadRequest) { r.Hashes = map[string]string{"sha256": sha256b} }), KindConflict, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := FinishUpload(tc.existing, "n", tc.req, now)
			if tc.wantKind != 0 {
				requireKind(t, err, tc.wantKind)
				return
			}
			require.NoError(t, err)
			if tc.wantRepeat {
				require.Nil(t, got)
				return
			}
			require.Empty(t, got.UploadID)
			require.Equal(t, tc.wantHashes, got.Hashes)
			require.True(t, Downloadable(got, now))
			require.False(t, Downloadable(got, expires.Add(time.Millisecond)))
		})
	}
}

func TestChooseDownloadMethod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		accepted map[string]bool
		want     string
	}{
		{map[string]bool{"simple": true, "getUrl": true}, MethodGetURL},
		{map[string]bool{"simple": true}, MethodSimple},
		{map[string]bool{"getUrl": true}, MethodGetURL},
	}
	for _, tc := range tests {
		got, err := ChooseDownloadMethod(tc.accepted)
		require.NoError(t, err)
		require.Equal(t, tc.want, got)
	}
	_, err := ChooseDownloadMethod(map[string]bool{})
	requireKind(t, err, KindNoMatch)
}

func TestCheckContentType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, wantErr string
	}{
		{name: "plain", contentType: "text/plain; charset=utf-8"},
		{name: "empty", contentType: "", wantErr: "must not be empty"},
		{name: "NUL", contentType: "text/\x00plain", wantErr: "control character"},
		{name: "newline", contentType: "text/plain\r\nX-Evil: 1", wantErr: "control character"},
		{name: "DEL", contentType: "text/\x7f", wantErr: "control character"},
		{name: "too long", contentType: strings.Repeat("a", MaxContentTypeLen+1), wantErr: "at most 1024"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := CheckContentType(tt.contentType)
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			var oe *Error
			require.ErrorAs(t, err, &oe)
			require.Equal(t, KindInput, oe.Kind)
		})
	}
}
