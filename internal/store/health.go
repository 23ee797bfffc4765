package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/posthaste/posthaste/internal/health"
)

// TeamHealth is a team's account health as the last evaluation found it.
type TeamHealth struct {
	TeamID      uuid.UUID
	EvaluatedAt time.Time
	Window      time.Duration
	Counts      health.Counts
	State       health.State
	// ResumedAt is when an operator last lifted a pause; nil if never.
	ResumedAt *time.Time
}

// HealthNotice is a crossing found by EvaluateHealth, for the team's
// owners. It is stored (table health_notice) with the state that records
// the crossing and stays pending until MarkHealthNoticeSent.
type HealthNotice struct {
	// ID names the notice; the monitor derives the idempotency key of its
	// email from it, so a re-send replays the first email.
	ID        uuid.UUID
	TeamID    uuid.UUID
	Window    time.Duration
	Counts    health.Counts
	Crossing  health.Crossing
	CreatedAt time.Time // the evaluation that found the crossing
}

// HealthCounts counts the outcomes of the recipients of the team's emails
// created in the window that ends at now (see health.Counts).
func (s *Insights) HealthCounts(ctx context.Context, teamID uuid.UUID, now time.Time, window time.Duration) (health.Counts, error) {
	all, err := s.healthCounts(ctx, s.pool, &teamID, now, window)
	if err != nil {
		return health.Counts{}, err
	}
	return all[teamID], nil
}

type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// healthCounts counts per team (one team, or every team with email in
// the window when team is nil). A recipient's state is the one its
// delivery reached; opened and clicked imply delivered.
func (s *Insights) healthCounts(ctx context.Context, q queryer, team *uuid.UUID, now time.Time, window time.Duration) (
	map[uuid.UUID]health.Counts, error) {
	rows, err := q.Query(ctx, `SELECT e.team_id,
			count(*) FILTER (WHERE r.status IN ('delivered', 'complained', 'opened', 'clicked')),
			count(*) FILTER (WHERE r.status = 'bounced'),
			count(*) FILTER (WHERE r.status = 'complained')
		FROM email e, unnest(e.rcpt_status) AS r(status)
		WHERE e.created_at > @since AND e.created_at <= @now AND (@team::uuid IS NULL OR e.team_id = @team)
			AND r.status IN ('delivered', 'complained', 'opened', 'clicked', 'bounced')
		GROUP BY e.team_id`,
		pgx.NamedArgs{"since": now.Add(-window), "now": now, "team": team})
	if err != nil {
		return nil, fmt.Errorf("counting outcomes: %w", mapErr(err))
	}
	out := map[uuid.UUID]health.Counts{}
	for rows.Next() {
		var id uuid.UUID
		var c health.Counts
		if err := rows.Scan(&id, &c.Delivered, &c.Bounced, &c.Complained); err != nil {
			rows.Close()
			return nil, fmt.Errorf("counting outcomes: %w", mapErr(err))
		}
		out[id] = c
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting outcomes: %w", mapErr(err))
	}
	return out, nil
}

const teamHealthColumns = `team_id, evaluated_at, window_seconds, delivered, bounced, complained,
	bounce_warned_at, complaint_warned_at, paused_at, paused_metric, paused_rate, paused_threshold,
	paused_window_seconds, resumed_at`

func scanTeamHealth(row pgx.Row) (TeamHealth, error) {
	var h TeamHealth
	var windowS int64
	var bounceAt, complaintAt, pausedAt *time.Time
	var metric *string
	var rate, threshold *float64
	var pausedWindow *int64
	if err := row.Scan(&h.TeamID, &h.EvaluatedAt, &windowS, &h.Counts.Delivered, &h.Counts.Bounced, &h.Counts.Complained,
		&bounceAt, &complaintAt, &pausedAt, &metric, &rate, &threshold, &pausedWindow, &h.ResumedAt); err != nil {
		return TeamHealth{}, mapErr(err)
	}
	h.Window = time.Duration(windowS) * time.Second
	h.State.Warned = map[health.Metric]time.Time{}
	if bounceAt != nil {
		h.State.Warned[health.Bounce] = *bounceAt
	}
	if complaintAt != nil {
		h.State.Warned[health.Complaint] = *complaintAt
	}
	if pausedAt != nil {
		h.State.Paused = &health.Pause{Metric: health.Metric(*metric), Rate: *rate, Threshold: *threshold,
			Window: time.Duration(*pausedWindow) * time.Second, At: pausedAt.UTC()}
	}
	return h, nil
}

// TeamHealth returns the team's health as last evaluated; ErrNotFound
// before its first evaluation.
func (s *Insights) TeamHealth(ctx context.Context, teamID uuid.UUID) (TeamHealth, error) {
	h, err := scanTeamHealth(s.pool.QueryRow(ctx, `SELECT `+teamHealthColumns+` FROM team_health WHERE team_id = @team`,
		pgx.NamedArgs{"team": teamID}))
	if err != nil {
		return TeamHealth{}, fmt.Errorf("loading the health of team %s: %w", teamID, err)
	}
	return h, nil
}

// SendingPause returns why the team's sending is paused, nil when it is
// not. It reads one row by primary key: it runs on every send.
func (s *Insights) SendingPause(ctx context.Context, teamID uuid.UUID) (*health.Pause, error) {
	var p health.Pause
	var windowS int64
	err := s.pool.QueryRow(ctx, `SELECT paused_metric, paused_rate, paused_threshold, paused_window_seconds, paused_at
		FROM team_health WHERE team_id = @team AND paused_at IS NOT NULL`, pgx.NamedArgs{"team": teamID}).
		Scan(&p.Metric, &p.Rate, &p.Threshold, &windowS, &p.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("checking whether team %s is paused: %w", teamID, mapErr(err))
	}
	p.Window, p.At = time.Duration(windowS)*time.Second, p.At.UTC()
	return &p, nil
}

// EvaluateHealth counts the outcomes of every team over the window that
// ends at now, applies health.Evaluate to each team with email in the
// window or a stored state, and stores the new states together with one
// pending notice per crossing found, in one transaction: a crossing is
// never recorded without its notice, and the notice survives a crash
// before it is sent (see PendingHealthNotices). It returns the notices it
// stored. Evaluations serialise on an advisory lock, so several processes
// may run them and each crossing is stored by exactly one of them.
func (s *Insights) EvaluateHealth(ctx context.Context, now time.Time, window time.Duration, pause bool) ([]HealthNotice, error) {
	var notices []HealthNotice
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('team_health evaluation', 0))`); err != nil {
			return fmt.Errorf("locking the health evaluation: %w", mapErr(err))
		}
		counts, err := s.healthCounts(ctx, tx, nil, now, window)
		if err != nil {
			return err
		}
		prev := map[uuid.UUID]TeamHealth{}
		rows, err := tx.Query(ctx, `SELECT `+teamHealthColumns+` FROM team_health FOR UPDATE`)
		if err != nil {
			return fmt.Errorf("loading team health: %w", mapErr(err))
		}
		for rows.Next() {
			h, err := scanTeamHealth(rows)
			if err != nil {
				rows.Close()
				return fmt.Errorf("loading team health: %w", err)
			}
			prev[h.TeamID] = h
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("loading team health: %w", mapErr(err))
		}
		teams := map[uuid.UUID]bool{}
		for id := range counts {
			teams[id] = true
		}
		for id := range prev {
			teams[id] = true
		}
		for id := range teams {
			c := counts[id]
			next, crossed := health.Evaluate(prev[id].State, c, now, window, pause)
			if err := upsertTeamHealth(ctx, tx, id, now, window, c, next); err != nil {
				return err
			}
			for _, x := range crossed {
				n, err := insertHealthNotice(ctx, tx, HealthNotice{TeamID: id, Window: window, Counts: c, Crossing: x,
					CreatedAt: now})
				if err != nil {
					return err
				}
				notices = append(notices, n)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return notices, nil
}

// insertHealthNotice stores n as pending with a new id and returns it as
// stored.
func insertHealthNotice(ctx context.Context, tx pgx.Tx, n HealthNotice) (HealthNotice, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return HealthNotice{}, fmt.Errorf("making health notice id: %w", err)
	}
	n.ID = id
	x := n.Crossing
	err = tx.QueryRow(ctx, `INSERT INTO health_notice (id, team_id, metric, rate, threshold, paused, window_seconds,
			delivered, bounced, complained, created_at)
		VALUES (@id, @team, @metric, @rate, @threshold, @paused, @window, @delivered, @bounced, @complained, @now)
		RETURNING created_at`,
		pgx.NamedArgs{"id": n.ID, "team": n.TeamID, "metric": string(x.Metric), "rate": x.Rate, "threshold": x.Threshold,
			"paused": x.Paused, "window": int64(n.Window / time.Second), "delivered": n.Counts.Delivered,
			"bounced": n.Counts.Bounced, "complained": n.Counts.Complained, "now": n.CreatedAt}).Scan(&n.CreatedAt)
	if err != nil {
		return HealthNotice{}, fmt.Errorf("storing a health notice for team %s: %w", n.TeamID, mapErr(err))
	}
	n.CreatedAt = n.CreatedAt.UTC()
	return n, nil
}

// PendingHealthNotices returns up to limit notices not yet marked sent,
// oldest first, of every team. Several processes may read the same ones:
// senders make sending one idempotent (its id gives the key) and marking
// it twice is harmless.
func (s *Insights) PendingHealthNotices(ctx context.Context, limit int) ([]HealthNotice, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, team_id, metric, rate, threshold, paused, window_seconds,
			delivered, bounced, complained, created_at
		FROM health_notice WHERE sent_at IS NULL ORDER BY created_at, id LIMIT @limit`, pgx.NamedArgs{"limit": limit})
	if err != nil {
		return nil, fmt.Errorf("loading pending health notices: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (HealthNotice, error) {
		var n HealthNotice
		var windowS int64
		err := row.Scan(&n.ID, &n.TeamID, &n.Crossing.Metric, &n.Crossing.Rate, &n.Crossing.Threshold,
			&n.Crossing.Paused, &windowS, &n.Counts.Delivered, &n.Counts.Bounced, &n.Counts.Complained, &n.CreatedAt)
		n.Window, n.CreatedAt = time.Duration(windowS)*time.Second, n.CreatedAt.UTC()
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("loading pending health notices: %w", mapErr(err))
	}
	return out, nil
}

// MarkHealthNoticeSent records that the notice was sent as the email
// emailID (nil: none was, e.g. the team has no owners) so that it is no
// longer pending. Marking a notice already marked (by another process
// that sent it too, under the same idempotency key) or deleted with its
// team changes nothing and is not an error; the first mark is kept.
func (s *Insights) MarkHealthNoticeSent(ctx context.Context, id uuid.UUID, emailID *uuid.UUID) error {
	_, err := s.pool.Exec(ctx, `UPDATE health_notice SET sent_at = now(), email_id = @email
		WHERE id = @id AND sent_at IS NULL`, pgx.NamedArgs{"id": id, "email": emailID})
	if err != nil {
		return fmt.Errorf("marking health notice %s sent: %w", id, mapErr(err))
	}
	return nil
}

func upsertTeamHealth(ctx context.Context, tx pgx.Tx, team uuid.UUID, now time.Time, window time.Duration,
	c health.Counts, st health.State) error {
	args := pgx.NamedArgs{"team": team, "now": now, "window": int64(window / time.Second),
		"delivered": c.Delivered, "bounced": c.Bounced, "complained": c.Complained,
		"bounce_at": warnedAt(st, health.Bounce), "complaint_at": warnedAt(st, health.Complaint),
		"paused_at": nil, "metric": nil, "rate": nil, "threshold": nil, "paused_window": nil}
	if p := st.Paused; p != nil {
		args["paused_at"], args["metric"], args["rate"], args["threshold"] = p.At, string(p.Metric), p.Rate, p.Threshold
		args["paused_window"] = int64(p.Window / time.Second)
	}
	_, err := tx.Exec(ctx, `INSERT INTO team_health (team_id, evaluated_at, window_seconds, delivered, bounced, complained,
			bounce_warned_at, complaint_warned_at, paused_at, paused_metric, paused_rate, paused_threshold, paused_window_seconds)
		VALUES (@team, @now, @window, @delivered, @bounced, @complained, @bounce_at, @complaint_at,
			@paused_at, @metric, @rate, @threshold, @paused_window)
		ON CONFLICT (team_id) DO UPDATE SET evaluated_at = EXCLUDED.evaluated_at, window_seconds = EXCLUDED.window_seconds,
			delivered = EXCLUDED.delivered, bounced = EXCLUDED.bounced, complained = EXCLUDED.complained,
			bounce_warned_at = EXCLUDED.bounce_warned_at, complaint_warned_at = EXCLUDED.complaint_warned_at,
			paused_at = EXCLUDED.paused_at, paused_metric = EXCLUDED.paused_metric, paused_rate = EXCLUDED.paused_rate,
			paused_threshold = EXCLUDED.paused_threshold, paused_window_seconds = EXCLUDED.paused_window_seconds`, args)
	if err != nil {
		return fmt.Errorf("storing the health of team %s: %w", team, mapErr(err))
	}
	return nil
}

func warnedAt(st health.State, m health.Metric) *time.Time {
	if t, ok := st.Warned[m]; ok {
		return &t
	}
	return nil
}

// ResumeSending lifts the pause of the team's sending (an operator's
// decision) and reports whether it was paused. Its warnings stay as they
// are: a rate still above its threshold does not pause the team again
// until it has gone under it and crossed anew.
func (s *Insights) ResumeSending(ctx context.Context, teamID uuid.UUID, now time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE team_health SET paused_at = NULL, paused_metric = NULL, paused_rate = NULL,
			paused_threshold = NULL, paused_window_seconds = NULL, resumed_at = @now
		WHERE team_id = @team AND paused_at IS NOT NULL`, pgx.NamedArgs{"team": teamID, "now": now})
	if err != nil {
		return false, fmt.Errorf("resuming the sending of team %s: %w", teamID, mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}
