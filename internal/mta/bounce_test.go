package mta

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/bounce"
)

// TestResultBounce: a Result is classified by its reply (bounce.Classify).
func TestResultBounce(t *testing.T) {
	r := Result{Code: 550, EnhancedCode: "5.1.1", Message: "user unknown"}
	require.Equal(t, bounce.Classify(550, "5.1.1", "user unknown"), r.Bounce())
	require.True(t, r.Bounce().Suppress)
}

func TestResultDiagnostic(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Result
		want []string
	}{
		{"one line", Result{Code: 550, EnhancedCode: "5.1.1", Message: "user unknown"}, []string{"smtp; 550 5.1.1 user unknown"}},
		{"no enhanced code", Result{Code: 554, Message: "rejected"}, []string{"smtp; 554 rejected"}},
		{"multi-line reply", Result{Code: 550, EnhancedCode: "5.7.1", Message: "blocked\nsee https://example.test"},
			[]string{"smtp; 550 5.7.1 blocked", "smtp; 550 5.7.1 see https://example.test"}},
		{"code alone", Result{Code: 550}, []string{"smtp; 550"}},
		{"no reply", Result{Message: "interrupted"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.r.Diagnostic())
		})
	}
}
