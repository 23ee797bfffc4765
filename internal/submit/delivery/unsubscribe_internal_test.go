package delivery

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/workflows/contract"
)

// TestProgressFeedsLivenessHeartbeats: outcomes of recipients delivered
// one by one reach the liveness heartbeats before the final record, and
// never write into the progress slice of the caller.
func TestProgressFeedsLivenessHeartbeats(t *testing.T) {
	t.Parallel()
	start := contract.DeliverProgress{Outcomes: make([]contract.DeliverOutcome, 1, 4)}
	start.Outcomes[0] = contract.DeliverOutcome{Rcpt: "earlier@x.test", Status: "delivered"}
	h := &heartbeats{prog: start}
	h.progress(contract.DeliverOutcome{Rcpt: "a@x.test", Status: "delivered"})
	h.progress(contract.DeliverOutcome{Rcpt: "b@x.test", Status: "bounced"})
	require.Equal(t, []string{"earlier@x.test", "a@x.test", "b@x.test"},
		[]string{h.prog.Outcomes[0].Rcpt, h.prog.Outcomes[1].Rcpt, h.prog.Outcomes[2].Rcpt})
	require.Len(t, start.Outcomes, 1)
	require.Equal(t, contract.DeliverOutcome{}, start.Outcomes[:2][1], "the caller's backing array is not written")
}

func TestMessageDate(t *testing.T) {
	t.Parallel()
	at, err := messageDate([]byte("From: a@b.test\r\nDate: Tue, 24 Nov 2026 10:00:00 +0100\r\n\r\nbody"))
	require.NoError(t, err)
	require.True(t, at.Equal(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)))
	_, err = messageDate([]byte("From: a@b.test\r\n\r\nbody"))
	require.Error(t, err)
}
