package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/health/notices"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/workflows"
)

// newHealth returns the activity of the AccountHealth workflow, which the
// Schedule `account-health` starts every POSTHASTE_HEALTH_INTERVAL
// (keepSchedules): it evaluates every team's account health and tells each
// crossing to the team's owners through the system mailer (crossings are
// only logged without one). notify (may be nil) is told when a notice was
// accepted, as the outbox dispatcher of this process.
func newHealth(cfg config.Config, st *store.Store, notify submit.Notifier, logger *slog.Logger) (*notices.Activities, error) {
	logger = logger.With("component", "health")
	sub := submit.New(submit.Config{Store: submit.StoreOf(st), Notifier: notify, Logger: logger})
	mail, err := newSystemMailer(cfg.SystemFrom, st, sub, logger)
	if err != nil {
		return nil, usageError{err}
	}
	h := &notices.Activities{Store: st.Insights, Logger: logger}
	if mail != nil {
		h.Mail = mail
	}
	return h, nil
}

// healthInput is the input of the AccountHealth workflow's runs.
func healthInput(c config.Health) workflows.AccountHealthInput {
	return workflows.AccountHealthInput{Window: c.Window, Pause: c.Pause}
}

// healthNoticeKey is the idempotency key of the email of a notice.
func healthNoticeKey(id uuid.UUID) string {
	return "health-notice/" + id.String()
}

// HealthNotice tells the team's owners that one of its rates crossed its
// threshold, and whether its sending is now paused, and returns the id of
// the email; nil, and no error, when the team has no owners. The email is
// sent with an idempotency key derived from n.ID and is built only from n
// and the owners, so sending the same notice again within 24 hours returns
// the first email instead of accepting another (a submit.Error of
// KindIdempotencyMismatch if the owners changed in between, or
// KindIdempotencyInFlight while another process is sending it).
func (m *systemMailer) HealthNotice(ctx context.Context, n store.HealthNotice) (*uuid.UUID, error) {
	owners, err := m.store.Webhooks.TeamOwners(ctx, n.TeamID)
	if err != nil || len(owners) == 0 {
		return nil, err
	}
	x := n.Crossing
	subject := fmt.Sprintf("Your %s rate is above %s", x.Metric, health.Percent(x.Threshold))
	den, events := n.Counts.Sent(), n.Counts.Bounced
	what := "bounced"
	if x.Metric == health.Complaint {
		den, events, what = n.Counts.Delivered, n.Counts.Complained, "were reported as spam"
	}
	text := fmt.Sprintf("Your team's %s rate over the last %s is %s (%d of %d emails %s), above the %s threshold "+
		"at which mailbox providers start treating a sender as a source of unwanted mail.\n\n",
		x.Metric, health.Days(n.Window), health.Percent(x.Rate), events, den, what, health.Percent(x.Threshold))
	if x.Paused {
		subject = fmt.Sprintf("Sending paused: your %s rate is above %s", x.Metric, health.Percent(x.Threshold))
		text += "Sending is paused for your team: new emails, batches, SMTP submissions and broadcasts are refused.\n" +
			"Clean your lists, then ask the operator of this server to resume sending.\n"
	} else {
		text += "Remove addresses that bounce or complain from your lists, and send only to people who asked for your mail.\n"
	}
	key := healthNoticeKey(n.ID)
	res, err := m.sendKeyed(ctx, n.TeamID, owners, subject, text, &key)
	if err != nil {
		return nil, err
	}
	m.logger.Info("account health notice sent", "team_id", n.TeamID, "email_id", res.ID, "replayed", res.Replayed)
	return &res.ID, nil
}

// adminHealth prints a team's account health; with resume it first lifts
// the pause of its sending.
func adminHealth(ctx context.Context, st *store.Store, cfg config.Health, team uuid.UUID, resume bool, stdout io.Writer) error {
	resumed := false
	if resume {
		var err error
		if resumed, err = st.Insights.ResumeSending(ctx, team, time.Now()); err != nil {
			return err
		}
		if resumed {
			if err := adminAudit(ctx, st, &team, audit.TeamHealthResume, "team", team.String(), nil); err != nil {
				return err
			}
		}
	}
	now := time.Now()
	counts, err := st.Insights.HealthCounts(ctx, team, now, cfg.Window)
	if err != nil {
		return err
	}
	out := map[string]any{"team": team.String(), "window": health.Days(cfg.Window),
		"delivered": counts.Delivered, "bounced": counts.Bounced, "complained": counts.Complained,
		"bounce_rate": counts.BounceRate(), "complaint_rate": counts.ComplaintRate(),
		"bounce_judged": counts.Judged(health.Bounce), "complaint_judged": counts.Judged(health.Complaint),
		"paused": false}
	if resume {
		out["resumed"] = resumed
	}
	p, err := st.Insights.SendingPause(ctx, team)
	if err != nil {
		return err
	}
	if p != nil {
		out["paused"] = true
		out["paused_at"] = p.At
		out["paused_reason"] = p.Message()
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
