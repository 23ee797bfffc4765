// Package usage is a team's usage as the API and the dashboard show it:
// its request log, its email metrics, the recipients counted against its
// monthly quota, its usage of what its plan allows (GET /usage) and its
// account health. Everything here is a read; the request log is written
// by internal/reqlog, the quota by sending (internal/submit) and account
// health by the health activities.
package usage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
)

// Service reads a team's usage. Every method reads only the team's own
// rows: store.ErrNotFound for what the team does not have. Safe for
// concurrent use.
type Service struct {
	insights *store.Insights
	accounts *store.Accounts
}

// New returns the Service over the store's insights (request log, metrics,
// account health: st.Insights) and accounts (quotas: st.Accounts); cmd
// builds it once and hands it to the API and the dashboard.
func New(insights *store.Insights, accounts *store.Accounts) *Service {
	return &Service{insights: insights, accounts: accounts}
}

// RequestLogs lists the team's API requests matching f, newest first,
// without their bodies.
func (s *Service) RequestLogs(ctx context.Context, teamID uuid.UUID, f store.LogFilter, p store.Page) ([]store.RequestLog, bool, error) {
	return s.insights.ListRequestLogs(ctx, teamID, f, p)
}

// RequestLog returns one of the team's API requests with its bodies
// (redacted when logged).
func (s *Service) RequestLog(ctx context.Context, teamID, id uuid.UUID) (store.RequestLog, error) {
	return s.insights.GetRequestLog(ctx, teamID, id)
}

// EmailMetrics counts the team's email metrics of q (the query of GET
// /emails/metrics and of the dashboard's Metrics page, so both agree).
func (s *Service) EmailMetrics(ctx context.Context, teamID uuid.UUID, q store.MetricsQuery) (store.Metrics, error) {
	return s.insights.EmailMetrics(ctx, teamID, q)
}

// QuotaUsed returns the recipients of the team's accepted emails counted
// against its quota in the month (UTC) of now.
func (s *Service) QuotaUsed(ctx context.Context, teamID uuid.UUID, now time.Time) (int64, error) {
	return s.accounts.QuotaUsed(ctx, teamID, now)
}

// Health is a team's account health.
type Health struct {
	// Window is that of the team's last evaluation, health.DefaultWindow
	// before the first.
	Window time.Duration
	// Paused is why the team's sending is paused, as stored; nil when it
	// is not.
	Paused *health.Pause
	// Counts are the outcomes of the team's recipients counted at now
	// over Window.
	Counts health.Counts
}

// Health returns the team's account health: its outcomes counted at now
// over the window of its last evaluation, and its pause as stored.
func (s *Service) Health(ctx context.Context, teamID uuid.UUID, now time.Time) (Health, error) {
	h := Health{Window: health.DefaultWindow}
	th, err := s.insights.TeamHealth(ctx, teamID)
	switch {
	case err == nil:
		h.Window, h.Paused = th.Window, th.State.Paused
	case !errors.Is(err, store.ErrNotFound):
		return Health{}, err
	}
	if h.Counts, err = s.insights.HealthCounts(ctx, teamID, now, h.Window); err != nil {
		return Health{}, fmt.Errorf("counting the team's outcomes: %w", err)
	}
	return h, nil
}

// Usage is a team's use of what its plan allows, as GET /usage answers
// it: store.TeamUsage and the windows it was counted over.
type Usage struct {
	store.TeamUsage
	// At is when it was counted.
	At time.Time
	// DayStart and MonthStart begin the day and the calendar month (UTC)
	// the counts cover; DayEnd and MonthEnd end them (the counts reset).
	DayStart, DayEnd, MonthStart, MonthEnd time.Time
}

// Usage counts the team's usage at now: the emails of the UTC day and of
// the quota's month (UTC), its contacts, segments, broadcasts and domains,
// its plan's volume and its own rate limit. store.ErrNotFound for an
// unknown team.
func (s *Service) Usage(ctx context.Context, teamID uuid.UUID, now time.Time) (Usage, error) {
	now = now.UTC()
	u := Usage{At: now, DayStart: time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, time.UTC),
		MonthStart: store.QuotaMonth(now)}
	u.DayEnd, u.MonthEnd = u.DayStart.AddDate(0, 0, 1), u.MonthStart.AddDate(0, 1, 0)
	var err error
	if u.TeamUsage, err = s.insights.TeamUsage(ctx, teamID, u.DayStart, u.MonthStart); err != nil {
		return Usage{}, err
	}
	return u, nil
}
