package dashboard

import (
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// metricCards are the Metrics page's cards: a counted metric, and the rate
// shown under it with its base (store.MetricCounts.Value defines both).
var metricCards = []struct{ Type, Rate, Of string }{
	{"sent", "", ""},
	{"delivered", "delivery_rate", "sent"},
	{"delivery_delayed", "", ""},
	{"bounced", "bounce_rate", "sent"},
	{"complained", "complaint_rate", "delivered"},
	{"opened", "open_rate", "delivered"},
	{"clicked", "click_rate", "delivered"},
	{"unsubscribed", "unsubscribe_rate", "delivered"},
	{"suppressed", "", ""},
	{"failed", "", ""},
	{"received", "", ""},
}

// chartTypes are the metrics the chart draws, one line each.
var chartTypes = []string{"sent", "delivered", "delivery_delayed", "bounced", "complained", "opened", "clicked"}

type metricsData struct {
	Range   string
	Domain  string // the id of the domain shown, "" for all
	Domains []store.Domain
	Totals  []metricTotal
	Chart   chartData // rendered as JSON for the chart script
	// Health is the account health section (health.go,
	// templates/partials_health.html).
	Health healthSection
}

type metricTotal struct {
	Type   string
	Count  int64
	Unique string // unique opens or clicks, "" for other metrics
	Rate   string // e.g. "12.5% of delivered", "" for metrics without a rate
}

type chartData struct {
	Labels   []string       `json:"labels"`
	Datasets []chartDataset `json:"datasets"`
}

type chartDataset struct {
	Label string  `json:"label"`
	Data  []int64 `json:"data"`
}

// metrics is the Metrics page: the team's metrics over the last 24 hours
// (per hour) or 7 or 30 days (per day, in UTC), counted by the query of
// GET /emails/metrics (usage.Service.EmailMetrics), so page and API agree.
func (h *overviewHandler) metrics(w http.ResponseWriter, r *http.Request, se *store.Session) {
	q := r.URL.Query()
	rng := q.Get("range")
	span, gran, step, label := 7*24*time.Hour, store.GranularityDaily, 24*time.Hour, "Jan 2"
	switch rng {
	case "24h":
		span, gran, step, label = 24*time.Hour, store.GranularityHourly, time.Hour, "15:00"
	case "30d":
		span = 30 * 24 * time.Hour
	default:
		rng = "7d"
	}
	now := h.now().UTC()
	end := now.Truncate(step).Add(step)
	start := end.Add(-span)
	d := metricsData{Range: rng}
	mq := store.MetricsQuery{Start: start, End: end, Granularity: gran, ByPeriod: true}
	if id, err := uuid.Parse(q.Get("domain")); err == nil {
		d.Domain = id.String()
		mq.DomainIDs = []uuid.UUID{id}
	}
	m, err := h.usage.EmailMetrics(r.Context(), se.TeamID, mq)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if d.Domains, _, err = h.cfg.Domains.List(r.Context(), se.TeamID, store.Page{Limit: 100}); err != nil {
		h.fail(w, r, err)
		return
	}
	periods := store.MetricPeriods(start, end, time.UTC, gran, int(span/step))
	index := make(map[int64]int, len(periods))
	for i, p := range periods {
		index[p.Unix()] = i
		d.Chart.Labels = append(d.Chart.Labels, p.Format(label))
	}
	for _, t := range chartTypes {
		series := make([]int64, len(periods))
		for _, row := range m.Rows {
			if i, ok := index[row.Period.Unix()]; ok {
				series[i] = int64(row.Value(t))
			}
		}
		d.Chart.Datasets = append(d.Chart.Datasets, chartDataset{Label: t, Data: series})
	}
	for _, c := range metricCards {
		mt := metricTotal{Type: c.Type, Count: int64(m.Totals.Value(c.Type))}
		switch c.Type {
		case "opened", "clicked":
			mt.Unique = strconv.FormatFloat(m.Totals.Value("unique_"+c.Type), 'f', -1, 64) + " unique"
		}
		if c.Rate != "" && m.Totals.Value(c.Of) > 0 {
			mt.Rate = strconv.FormatFloat(m.Totals.Value(c.Rate), 'f', -1, 64) + "% of " + c.Of
		}
		d.Totals = append(d.Totals, mt)
	}
	if d.Health, err = h.health(r.Context(), se.TeamID); err != nil {
		h.fail(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "metrics", view{Title: "Metrics", Nav: "metrics", Session: se, CSRF: se.CSRFToken, Data: d})
}
