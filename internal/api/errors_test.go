package api_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// TestAsError: the rules' refusals (queue.Error, through the code they
// name), a store's not-found and the framework's own errors become
// Taskcluster's error codes, wrapped or not; anything else is no API error
// (an internal one).
func TestAsError(t *testing.T) {
	t.Parallel()
	missing := &queue.Error{Kind: queue.KindInput, Message: "missing", Details: map[string]any{"missing": []string{"a"}}}
	for _, tc := range []struct {
		err     error
		code    string
		details map[string]any
	}{
		{queue.Conflictf("taken"), api.CodeRequestConflict, nil},
		{fmt.Errorf("creating: %w", queue.NotFoundf("no task")), api.CodeResourceNotFound, nil},
		{missing, api.CodeInputError, missing.Details},
		{&queue.Error{Message: "odd"}, api.CodeInternalServerError, nil},
		{fmt.Errorf("loading: %w", store.ErrNotFound), api.CodeResourceNotFound, nil},
		{store.ErrBadContinuationToken, api.CodeInputError, nil},
		{api.Errorf(api.CodeInputValidationError, "bad"), api.CodeInputValidationError, nil},
	} {
		got := api.AsError(tc.err)
		require.NotNil(t, got, tc.err.Error())
		require.Equal(t, tc.code, got.Code, tc.err.Error())
		require.Equal(t, tc.details, got.Details, tc.err.Error())
	}
	require.Nil(t, api.AsError(errors.New("disk on fire")))
}
