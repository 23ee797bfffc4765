package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
)

// healthMonitor evaluates every team's account health each interval
// (store.EvaluateHealth) and tells the owners of a team whose rate crossed
// its threshold, once per crossing, through the system mailer.
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

// check evaluates once and sends the notices of the crossings found. A
// notice that cannot be sent is logged, not retried: the crossing is
// recorded and shown on the Metrics page either way.
func (m *healthMonitor) check(ctx context.Context) error {
	notices, err := m.store.EvaluateHealth(ctx, m.now(), m.cfg.Window, m.cfg.Pause)
	if err != nil {
		return err
	}
	for _, n := range notices {
		m.logger.Warn("account health threshold crossed", "team_id", n.TeamID, "metric", n.Crossing.Metric,
			"rate", n.Crossing.Rate, "threshold", n.Crossing.Threshold, "paused", n.Crossing.Paused)
		if m.mail == nil {
			continue
		}
		if err := m.mail.HealthNotice(ctx, n); err != nil {
			m.logger.Error("sending an account health notice", "team_id", n.TeamID, "err", err)
		}
	}
	return nil
}

// HealthNotice tells the team's owners that one of its rates crossed its
// threshold, and whether its sending is now paused.
func (m *systemMailer) HealthNotice(ctx context.Context, n store.HealthNotice) error {
	owners, err := m.store.TeamOwners(ctx, n.TeamID)
	if err != nil || len(owners) == 0 {
		return err
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
	id, err := m.send(ctx, n.TeamID, owners, subject, text)
	if err != nil {
		return err
	}
	m.logger.Info("account health notice sent", "team_id", n.TeamID, "email_id", id)
	return nil
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
