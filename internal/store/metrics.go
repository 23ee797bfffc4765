package store

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Metric names of GET /emails/metrics, in Resend's order: the counts, then
// the rates.
var MetricNames = []string{
	"received", "delivered", "complained", "suppressed", "bounced", "bounced_transient",
	"bounced_permanent", "bounced_undetermined", "opened", "clicked", "unsubscribed",
	"delivery_delayed", "failed", "sent", "unique_opened", "unique_clicked",
	"delivery_rate", "open_rate", "click_rate", "bounce_rate", "complaint_rate", "unsubscribe_rate",
}

// Metric granularities: the size of a period bucket.
const (
	GranularityHourly  = "hourly"
	GranularityDaily   = "daily"
	GranularityWeekly  = "weekly"
	GranularityMonthly = "monthly"
)

// truncUnit is the date_trunc unit of each granularity.
var truncUnit = map[string]string{
	GranularityHourly: "hour", GranularityDaily: "day", GranularityWeekly: "week", GranularityMonthly: "month",
}

// MetricsQuery selects and breaks down a team's email metrics.
type MetricsQuery struct {
	Start, End time.Time // events with Start <= time < End
	// Location buckets the periods (PostgreSQL and Go must both know its
	// name: it is passed to AT TIME ZONE by name); nil is UTC.
	Location    *time.Location
	Granularity string // a Granularity constant; "" is daily
	ByPeriod    bool
	ByDomain    bool
	ByEmail     bool
	ByBroadcast bool
	// Filters; empty matches all. Received emails belong to no sent
	// email: an email or broadcast filter leaves them out.
	DomainIDs, EmailIDs, BroadcastIDs []uuid.UUID
}

// MetricCounts are the counted metrics of one breakdown row (or of the
// totals). Events count where they happened, one per recipient.
type MetricCounts struct {
	Sent                int64
	Delivered           int64
	DeliveryDelayed     int64
	Bounced             int64
	BouncedTransient    int64
	BouncedPermanent    int64
	BouncedUndetermined int64
	Complained          int64
	// Opened and Clicked count every human open and click; the unique
	// counts, each (email, recipient) once. Opens and clicks flagged
	// `machine: true` in their detail (privacy proxies, link scanners)
	// are recorded but not counted.
	Opened        int64
	UniqueOpened  int64
	Clicked       int64
	UniqueClicked int64
	Suppressed    int64
	Unsubscribed  int64
	Failed        int64
	Received      int64
}

// Value is a metric by its name (see MetricNames). Rates are percentages
// rounded to two decimals, 0 when their base is 0: delivery and bounce
// rates are of sent; open, click, complaint and unsubscribe rates are of
// delivered (opens and clicks unique, as mail clients reopen and links
// are clicked twice). An unknown name is 0.
func (c MetricCounts) Value(name string) float64 {
	switch name {
	case "received":
		return float64(c.Received)
	case "delivered":
		return float64(c.Delivered)
	case "complained":
		return float64(c.Complained)
	case "suppressed":
		return float64(c.Suppressed)
	case "bounced":
		return float64(c.Bounced)
	case "bounced_transient":
		return float64(c.BouncedTransient)
	case "bounced_permanent":
		return float64(c.BouncedPermanent)
	case "bounced_undetermined":
		return float64(c.BouncedUndetermined)
	case "opened":
		return float64(c.Opened)
	case "clicked":
		return float64(c.Clicked)
	case "unsubscribed":
		return float64(c.Unsubscribed)
	case "delivery_delayed":
		return float64(c.DeliveryDelayed)
	case "failed":
		return float64(c.Failed)
	case "sent":
		return float64(c.Sent)
	case "unique_opened":
		return float64(c.UniqueOpened)
	case "unique_clicked":
		return float64(c.UniqueClicked)
	case "delivery_rate":
		return rate(c.Delivered, c.Sent)
	case "open_rate":
		return rate(c.UniqueOpened, c.Delivered)
	case "click_rate":
		return rate(c.UniqueClicked, c.Delivered)
	case "bounce_rate":
		return rate(c.Bounced, c.Sent)
	case "complaint_rate":
		return rate(c.Complained, c.Delivered)
	case "unsubscribe_rate":
		return rate(c.Unsubscribed, c.Delivered)
	}
	return 0
}

func rate(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(10000*float64(n)/float64(of)) / 100
}

// MetricsRow is one breakdown row: the dimensions asked for, then counts.
type MetricsRow struct {
	Period        time.Time  // the period's start in the query's Location; zero unless ByPeriod
	DomainID      *uuid.UUID // nil for mail of no (or a removed) domain
	DomainName    string
	EmailID       *uuid.UUID // nil for received mail
	BroadcastID   *uuid.UUID // nil for mail of no broadcast
	BroadcastName string
	MetricCounts
}

// Metrics are a team's metrics over a range: totals, and the rows of the
// breakdown when one was asked for (ordered by period, then the others).
type Metrics struct {
	Totals MetricCounts
	Rows   []MetricsRow
}

// metricsCounts are the aggregates of MetricCounts, in its field order.
// Bounces are classed by the type in their detail (contract.BounceDetail
// for synchronous bounces and for delivery status notifications alike):
// a bounce with no type is undetermined.
const metricsCounts = `
	count(*) FILTER (WHERE type = 'sent'),
	count(*) FILTER (WHERE type = 'delivered'),
	count(*) FILTER (WHERE type = 'delivery_delayed'),
	count(*) FILTER (WHERE type = 'bounced'),
	count(*) FILTER (WHERE type = 'bounced' AND detail->>'type' = 'Transient'),
	count(*) FILTER (WHERE type = 'bounced' AND detail->>'type' = 'Permanent'),
	count(*) FILTER (WHERE type = 'bounced' AND coalesce(detail->>'type', '') NOT IN ('Transient', 'Permanent')),
	count(*) FILTER (WHERE type = 'complained'),
	count(*) FILTER (WHERE type = 'opened' AND human),
	count(DISTINCT (email_id, rcpt)) FILTER (WHERE type = 'opened' AND human),
	count(*) FILTER (WHERE type = 'clicked' AND human),
	count(DISTINCT (email_id, rcpt)) FILTER (WHERE type = 'clicked' AND human),
	count(*) FILTER (WHERE type = 'suppressed'),
	count(*) FILTER (WHERE type = 'unsubscribed'),
	count(*) FILTER (WHERE type = 'failed'),
	count(*) FILTER (WHERE type = 'received')`

// EmailMetrics counts a team's metrics with one aggregate query: the
// events of its emails (email_event, by the index on its created_at),
// unsubscribes and received emails of the range, grouped by the
// dimensions asked for and totaled (GROUPING SETS), so unique counts of
// the totals are unique over the whole range.
func (s *Insights) EmailMetrics(ctx context.Context, teamID uuid.UUID, q MetricsQuery) (Metrics, error) {
	gran := q.Granularity
	if gran == "" {
		gran = GranularityDaily
	}
	unit, ok := truncUnit[gran]
	if !ok {
		return Metrics{}, fmt.Errorf("unknown granularity %q", gran)
	}
	loc := q.Location
	if loc == nil {
		loc = time.UTC
	}
	args := pgx.NamedArgs{"team": teamID, "start": q.Start, "end": q.End, "tz": loc.String()}
	filter, received := "", true
	if len(q.DomainIDs) > 0 {
		filter += ` AND e.domain_id = ANY(@domains)`
		args["domains"] = q.DomainIDs
	}
	if len(q.EmailIDs) > 0 {
		filter += ` AND e.id = ANY(@emails)`
		args["emails"] = q.EmailIDs
		received = false
	}
	if len(q.BroadcastIDs) > 0 {
		filter += ` AND e.broadcast_id = ANY(@broadcasts)`
		args["broadcasts"] = q.BroadcastIDs
		received = false
	}
	// Unsubscribed counts unsubscribes through the links of emails
	// (broadcast_unsubscribe, which one-click List-Unsubscribe posts also
	// write). A contact unsubscribed by the API or dashboard, or through a
	// topic preference page, unsubscribes through no email and does not
	// count; nor would a mailto: List-Unsubscribe reply, which names no
	// email.
	src := `SELECT ev.type, ev.email_id, coalesce(ev.recipient, '') AS rcpt, ev.detail, ev.created_at,
			e.domain_id, e.broadcast_id
		FROM email_event ev JOIN email e ON e.id = ev.email_id
		WHERE e.team_id = @team AND ev.created_at >= @start AND ev.created_at < @end
			AND ev.type IN ('sent', 'delivered', 'delivery_delayed', 'bounced', 'complained', 'opened',
				'clicked', 'suppressed', 'failed')` + filter + `
		UNION ALL
		SELECT 'unsubscribed', u.email_id, u.email, NULL, u.created_at, e.domain_id, e.broadcast_id
		FROM broadcast_unsubscribe u JOIN email e ON e.id = u.email_id
		WHERE e.team_id = @team AND u.created_at >= @start AND u.created_at < @end` + filter
	if received {
		src += `
		UNION ALL
		SELECT 'received', NULL, '', NULL, r.created_at, r.domain_id, NULL
		FROM received_email r
		WHERE r.team_id = @team AND r.created_at >= @start AND r.created_at < @end` +
			strings.ReplaceAll(filter, "e.domain_id", "r.domain_id") // the only filter left
	}
	var dims []string
	if q.ByPeriod {
		dims = append(dims, "period")
	}
	if q.ByDomain {
		dims = append(dims, "domain_id")
	}
	if q.ByEmail {
		dims = append(dims, "email_id")
	}
	if q.ByBroadcast {
		dims = append(dims, "broadcast_id")
	}
	sel, group := "0", ""
	if len(dims) > 0 {
		d := strings.Join(dims, ", ")
		sel = d + ", GROUPING(" + d + ")"
		group = " GROUP BY GROUPING SETS ((" + d + "), ()) ORDER BY " + d
	}
	sql := `SELECT ` + sel + `,` + metricsCounts + `
		FROM (SELECT *, date_trunc('` + unit + `', created_at AT TIME ZONE @tz) AS period,
				NOT coalesce(detail @> '{"machine": true}', false) AS human
			FROM (` + src + `) src) ev` + group
	rows, err := s.pool.Query(ctx, sql, args)
	if err != nil {
		return Metrics{}, fmt.Errorf("counting metrics: %w", mapErr(err))
	}
	defer rows.Close()
	var out Metrics
	for rows.Next() {
		var r MetricsRow
		var period *time.Time
		var grouping int32
		dest := []any{}
		for _, d := range dims {
			switch d {
			case "period":
				dest = append(dest, &period)
			case "domain_id":
				dest = append(dest, &r.DomainID)
			case "email_id":
				dest = append(dest, &r.EmailID)
			case "broadcast_id":
				dest = append(dest, &r.BroadcastID)
			}
		}
		dest = append(dest, &grouping)
		c := &r.MetricCounts
		dest = append(dest, &c.Sent, &c.Delivered, &c.DeliveryDelayed, &c.Bounced, &c.BouncedTransient,
			&c.BouncedPermanent, &c.BouncedUndetermined, &c.Complained, &c.Opened, &c.UniqueOpened,
			&c.Clicked, &c.UniqueClicked, &c.Suppressed, &c.Unsubscribed, &c.Failed, &c.Received)
		if err := rows.Scan(dest...); err != nil {
			return Metrics{}, fmt.Errorf("reading metrics: %w", mapErr(err))
		}
		if len(dims) == 0 || grouping != 0 {
			out.Totals = r.MetricCounts
			continue
		}
		if q.ByPeriod {
			// AT TIME ZONE gave the wall time of the bucket's start there.
			p := *period
			r.Period = time.Date(p.Year(), p.Month(), p.Day(), p.Hour(), 0, 0, 0, loc)
		}
		out.Rows = append(out.Rows, r)
	}
	if err := rows.Err(); err != nil {
		return Metrics{}, fmt.Errorf("counting metrics: %w", mapErr(err))
	}
	if err := s.nameMetricsRows(ctx, teamID, out.Rows, q); err != nil {
		return Metrics{}, err
	}
	return out, nil
}

// nameMetricsRows fills in the names of the rows' domains and broadcasts.
func (s *Insights) nameMetricsRows(ctx context.Context, teamID uuid.UUID, rows []MetricsRow, q MetricsQuery) error {
	if !q.ByDomain && !q.ByBroadcast {
		return nil
	}
	var domains, broadcasts []uuid.UUID
	for _, r := range rows {
		if r.DomainID != nil {
			domains = append(domains, *r.DomainID)
		}
		if r.BroadcastID != nil {
			broadcasts = append(broadcasts, *r.BroadcastID)
		}
	}
	names := map[uuid.UUID]string{}
	read := func(sql string, ids []uuid.UUID) error {
		if len(ids) == 0 {
			return nil
		}
		res, err := s.pool.Query(ctx, sql, pgx.NamedArgs{"team": teamID, "ids": ids})
		if err != nil {
			return fmt.Errorf("naming metrics rows: %w", mapErr(err))
		}
		defer res.Close()
		for res.Next() {
			var id uuid.UUID
			var name string
			if err := res.Scan(&id, &name); err != nil {
				return fmt.Errorf("naming metrics rows: %w", mapErr(err))
			}
			names[id] = name
		}
		if err := res.Err(); err != nil {
			return fmt.Errorf("naming metrics rows: %w", mapErr(err))
		}
		return nil
	}
	if err := read(`SELECT id, name FROM domain WHERE team_id = @team AND id = ANY(@ids)`, domains); err != nil {
		return err
	}
	if err := read(`SELECT id, name FROM broadcast WHERE team_id = @team AND id = ANY(@ids)`, broadcasts); err != nil {
		return err
	}
	for i := range rows {
		if id := rows[i].DomainID; id != nil {
			rows[i].DomainName = names[*id]
		}
		if id := rows[i].BroadcastID; id != nil {
			rows[i].BroadcastName = names[*id]
		}
	}
	return nil
}

// MetricPeriods lists the starts of the periods of granularity gran in
// loc that [start, end) touches, the first holding start; it stops after
// max+1 periods, for callers to refuse a range of more than max.
func MetricPeriods(start, end time.Time, loc *time.Location, gran string, max int) []time.Time {
	if loc == nil {
		loc = time.UTC
	}
	t := start.In(loc)
	y, m, d := t.Date()
	var first time.Time
	switch gran {
	case GranularityHourly:
		first = time.Date(y, m, d, t.Hour(), 0, 0, 0, loc)
	case GranularityWeekly:
		first = time.Date(y, m, d-(int(t.Weekday())+6)%7, 0, 0, 0, 0, loc) // date_trunc weeks start on Monday
	case GranularityMonthly:
		first = time.Date(y, m, 1, 0, 0, 0, 0, loc)
	default:
		first = time.Date(y, m, d, 0, 0, 0, 0, loc)
	}
	var out []time.Time
	y, m, d = first.Date()
	h := first.Hour()
	for i := 0; len(out) <= max; i++ {
		var p time.Time
		switch gran {
		case GranularityHourly:
			p = time.Date(y, m, d, h+i, 0, 0, 0, loc)
		case GranularityWeekly:
			p = time.Date(y, m, d+7*i, 0, 0, 0, 0, loc)
		case GranularityMonthly:
			p = time.Date(y, m+time.Month(i), 1, 0, 0, 0, 0, loc)
		default:
			p = time.Date(y, m, d+i, 0, 0, 0, 0, loc)
		}
		if !p.Before(end) && i > 0 {
			break
		}
		// A wall hour skipped by a daylight-saving change normalizes to
		// the next one: keep each period once.
		if n := len(out); n > 0 && !p.After(out[n-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}
