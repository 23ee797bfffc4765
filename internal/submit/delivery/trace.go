package delivery

import (
	"context"
	"log/slog"
	"time"

	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/telemetry"
)

// trace logs one step of an email's way to the MX at debug level: the
// email, how long the step took and how long ago the email was accepted,
// so that with POSTHASTE_LOG_LEVEL=debug the lines of one email_id
// (with submit's "email accepted" and the outbox's "workflow started")
// say where its time went (docs/troubleshooting.md).
func (a *Sending) trace(ctx context.Context, msg string, e store.Email, started time.Time, attrs ...any) {
	if !a.logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	now := a.now()
	a.logger.DebugContext(ctx, msg, append([]any{"email_id", e.ID, "took_ms", telemetry.Milliseconds(now.Sub(started)),
		"since_accepted_ms", telemetry.Milliseconds(now.Sub(e.CreatedAt))}, attrs...)...)
}

// firstStatus is the status of the first of results, for a trace line.
func firstStatus(results []mta.Result) string {
	if len(results) == 0 {
		return ""
	}
	return results[0].Status.String()
}
