package dashboard

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// budgetNotice is what the Receiving page says about the team's inbound
// budget (issue 33 point 1): shown from 80% of a limit on, and as a
// refusal once a limit is reached, with the figures.
type budgetNotice struct {
	// Full: a limit is reached; StorageFull: the bytes' one, which lasts
	// until older mail ages out rather than until the day ends.
	Full, StorageFull     bool
	Messages, MaxMessages int64
	Bytes, MaxBytes       string
}

// inboundBudget is the notice of team's inbound budget; nil when the team
// is below 80% of its limits (or has none).
func (h *receivingHandler) inboundBudget(ctx context.Context, team uuid.UUID) (*budgetNotice, error) {
	b := h.cfg.InboundBudget
	u, err := h.cfg.Received.Usage(ctx, team, h.now())
	if err != nil {
		return nil, err
	}
	if !b.Near(u) {
		return nil, nil
	}
	maxMessages, maxBytes := b.Limits(u)
	return &budgetNotice{Full: b.Full(u), StorageFull: maxBytes > 0 && u.Bytes >= maxBytes, Messages: u.Messages, MaxMessages: maxMessages, Bytes: sizeOf(u.Bytes),
		MaxBytes: sizeOf(maxBytes)}, nil
}

// sizeOf writes a byte count for people: 512 B, 3.2 MiB, 1.0 GiB; "" for 0
// (no limit).
func sizeOf(n int64) string {
	switch {
	case n <= 0:
		return ""
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
}
