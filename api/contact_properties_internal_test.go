package api

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/store"
)

func TestFallbackValue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		typ, raw string
		want     any
		bad      bool
	}{
		{store.PropertyString, ``, nil, false},
		{store.PropertyString, `null`, nil, false},
		{store.PropertyString, `"Acme"`, "Acme", false},
		{store.PropertyString, `1`, nil, true},
		{store.PropertyNumber, `1.5`, 1.5, false},
		{store.PropertyNumber, `"1"`, nil, true},
		{store.PropertyNumber, `true`, nil, true},
	}
	for _, tc := range cases {
		got, err := fallbackValue(tc.typ, []byte(tc.raw))
		if tc.bad {
			require.Error(t, err, "%s %s", tc.typ, tc.raw)
			continue
		}
		require.NoError(t, err, "%s %s", tc.typ, tc.raw)
		require.Equal(t, tc.want, got)
	}
}
