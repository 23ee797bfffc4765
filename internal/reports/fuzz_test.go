package reports

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParse feeds Parse mutations of every fixture: it never panics,
// never errs on input with a header, and keeps to its limits.
func FuzzParse(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.eml"))
	require.NoError(f, err)
	for _, name := range files {
		b, err := os.ReadFile(name)
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(dsnWith(20, 100)))
	lim := Limits{MaxBytes: 32 << 10, MaxParts: 8, MaxDepth: 3, MaxRecipients: 4}
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := Parse(bytes.NewReader(data), lim)
		if err != nil {
			require.ErrorIs(t, err, ErrNotMessage)
			return
		}
		require.LessOrEqual(t, rep.Parts, lim.MaxParts)
		if int64(len(data)) > lim.MaxBytes {
			require.True(t, rep.Truncated)
		}
		switch rep.Kind {
		case KindDSN, KindBounce:
			require.NotNil(t, rep.DSN)
			require.LessOrEqual(t, len(rep.DSN.Recipients), lim.MaxRecipients)
			for _, r := range rep.DSN.Recipients {
				require.NotEmpty(t, r.Address())
				if b, ok := r.Bounce(); ok {
					require.NotEmpty(t, b.Type)
					require.NotEmpty(t, b.SubType)
					require.NotNil(t, b.DiagnosticCode)
					require.False(t, b.Suppress && b.Type != "Permanent", "only permanent bounces suppress")
				}
			}
		case KindFeedback:
			require.NotNil(t, rep.Feedback)
			_ = rep.Feedback.Recipients()
		case KindAutoReply:
			require.Nil(t, rep.DSN, "an auto-reply is never a bounce")
			require.NotEmpty(t, rep.AutoReply)
		case KindUnknown:
			require.Nil(t, rep.DSN)
		default:
			t.Fatalf("kind %q", rep.Kind)
		}
		_, _ = rep.VERP()
	})
}
