package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// healthMonitor evaluates every team's account health each interval
// (store.EvaluateHealth, which stores a notice per crossing with the new
// state) and then sends every pending notice to its team's owners through
// the system mailer, so each crossing is told exactly once even when a
// process dies or a send fails between the evaluation and the email.
type healthMonitor struct {
	cfg    config.Health
	store  *store.Store
	mail   *systemMailer // nil: crossings are only logged
	logger *slog.Logger
	now    func() time.Time
}

// startHealthMonitor evaluates now and then every cfg.Health.Interval
// until stop is called. notify (may be nil) is told when a notice was
// accepted, as the outbox dispatcher of this process.
func startHealthMonitor(cfg config.Config, st *store.Store, notify submit.Notifier, logger *slog.Logger) (stop func(), err error) {
	m, err := newHealthMonitor(cfg, st, notify, logger)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.run(ctx)
	}()
	return func() { cancel(); <-done }, nil
}

func newHealthMonitor(cfg config.Config, st *store.Store, notify submit.Notifier, logger *slog.Logger) (*healthMonitor, error) {
	logger = logger.With("component", "health")
	sub := submit.New(submit.Config{Store: st, Notifier: notify, Logger: logger})
	mail, err := newSystemMailer(cfg.SystemFrom, st, sub, logger)
	if err != nil {
		return nil, usageError{err}
	}
	return &healthMonitor{cfg: cfg.Health, store: st, mail: mail, logger: logger, now: time.Now}, nil
}

func (m *healthMonitor) run(ctx context.Context) {
	t := time.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		if err := m.check(ctx); err != nil && ctx.Err() == nil {
			m.logger.Error("evaluating account health", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pendingNoticeBatch bounds the notices one check sends; more wait for
// the next interval.
const pendingNoticeBatch = 100

// check evaluates once, then sends every pending notice: those of this
// evaluation and any left by an earlier check whose send failed or whose
// process died before marking it sent. A notice that cannot be sent is
// logged and stays pending for the next check.
func (m *healthMonitor) check(ctx context.Context) error {
	crossed, err := m.store.EvaluateHealth(ctx, m.now(), m.cfg.Window, m.cfg.Pause)
	if err != nil {
		return err
	}
	for _, n := range crossed {
		m.logger.Warn("account health threshold crossed", "team_id", n.TeamID, "metric", n.Crossing.Metric,
			"rate", n.Crossing.Rate, "threshold", n.Crossing.Threshold, "paused", n.Crossing.Paused)
	}
	pending, err := m.store.PendingHealthNotices(ctx, pendingNoticeBatch)
	if err != nil {
		return err
	}
	for _, n := range pending {
		if err := m.deliver(ctx, n); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			m.logger.Error("sending an account health notice", "team_id", n.TeamID, "notice_id", n.ID, "err", err)
		}
	}
	return nil
}

// deliver sends one pending notice and marks it sent. Sending is
// idempotent (the key is the notice's id), so a notice sent by a process
// that died before marking it, or sent at the same time by another
// process, is replayed instead of sent twice; marking twice is harmless.
// Without a system mailer the notice is only logged (by check, when found)
// and marked sent with no email.
func (m *healthMonitor) deliver(ctx context.Context, n store.HealthNotice) error {
	var emailID *uuid.UUID
	if m.mail != nil {
		id, err := m.mail.HealthNotice(ctx, n)
		var serr *submit.Error
		switch {
		case errors.As(err, &serr) && serr.Kind == submit.KindIdempotencyInFlight:
			// Another process is sending it now and will mark it.
			m.logger.Debug("account health notice being sent by another process", "team_id", n.TeamID,
				"notice_id", n.ID)
			return nil
		case errors.As(err, &serr) && serr.Kind == submit.KindIdempotencyMismatch:
			// The key holds an email accepted (or, rarely, being accepted by
			// another process) for this notice by an earlier attempt, before
			// the owners or the system sender changed: the notice was sent.
			// Left pending it would fail so until the key expires after 24
			// hours and then go out twice.
			m.logger.Warn("account health notice already sent with other recipients", "team_id", n.TeamID,
				"notice_id", n.ID)
		case err != nil:
			return err
		default:
			emailID = id
		}
	}
	return m.store.MarkHealthNoticeSent(ctx, n.ID, emailID)
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
	owners, err := m.store.TeamOwners(ctx, n.TeamID)
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
		if resumed, err = st.ResumeSending(ctx, team, time.Now()); err != nil {
			return err
		}
		if resumed {
			if err := adminAudit(ctx, st, &team, audit.TeamHealthResume, "team", team.String(), nil); err != nil {
				return err
			}
		}
	}
	now := time.Now()
	counts, err := st.HealthCounts(ctx, team, now, cfg.Window)
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
	p, err := st.SendingPause(ctx, team)
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
