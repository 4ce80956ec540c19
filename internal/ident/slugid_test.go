package ident_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/ident"
)

func TestValidSlugID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"fN1SbArXTPSVFNUvaOlinQ", true},
		{"E5SBRfo-RfOIxh0V4187Qg", true},
		{"909mRog1S9eVa0g-bb91bA", true},
		{"909mRog1E98Va0g-bb91ba", false}, // 9th character is not a v4 version nibble
		{"fN1SbArXTPSVFNUvaOlinQx", false},
		{"fN1SbArXTPSVFNUvaOlin", false},
		{"", false},
		{"fN1SbArX TPSVFNUvaOlinQ", false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, ident.ValidSlugID(tt.id), tt.id)
		require.Equal(t, tt.want, ident.SlugID().MatchString(tt.id), tt.id)
	}
}
