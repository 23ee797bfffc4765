package delivery

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/workflows/contract"
)

// classify is the one translator of errors to Temporal's retry classes.
func TestClassify(t *testing.T) {
	t.Parallel()
	refused := &refusedError{"MX host mx.x.test resolves only to loopback, private, link-local or cloud metadata addresses, which the egress policy refuses"}
	for _, tc := range []struct {
		name      string
		err       error
		permanent bool
		reason    string
	}{
		{"egress refusal", refused, true, refused.reason},
		{"missing DKIM key", fmt.Errorf("%w: no master key", errNoKey), true, "DKIM key unavailable: no master key"},
		{"missing domain", fmt.Errorf("loading domain of x: %w", store.ErrNotFound), true, "loading domain of x: not found"},
		{"database down", fmt.Errorf("loading: %w", store.ErrUnavailable), false, ""},
		{"timeout", context.DeadlineExceeded, false, ""},
		{"anything else", errors.New("boom"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classify(tc.err)
			var app *temporal.ApplicationError
			if !tc.permanent {
				require.Equal(t, tc.err, got, "left retryable as is")
				require.False(t, errors.As(got, &app))
				return
			}
			require.True(t, errors.As(got, &app))
			require.True(t, app.NonRetryable())
			require.Equal(t, contract.ErrTypePermanent, app.Type())
			reason, ok := contract.PermanentReason(got)
			require.True(t, ok)
			require.Equal(t, tc.reason, reason)
		})
	}
}
