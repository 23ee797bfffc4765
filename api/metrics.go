package api

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// Limits of GET /emails/metrics, as Resend states them.
const (
	maxMetricPeriods = 10_000
	maxMetricIDs     = 100
	// defaultMetricsSpan is how far start_date defaults to before end_date.
	defaultMetricsSpan = 6 * 24 * time.Hour
)

// metricsTimeFormat is Resend's form of the range and period times.
const metricsTimeFormat = "2006-01-02T15:04:05.000Z07:00"

var metricDimensions = []string{"period", "domain", "email", "broadcast"}

var metricGranularities = []string{store.GranularityHourly, store.GranularityDaily, store.GranularityWeekly,
	store.GranularityMonthly}

// metricsRequest is a parsed GET /emails/metrics query.
type metricsRequest struct {
	query      store.MetricsQuery
	metrics    []string
	dimensions []string
	periods    []time.Time // every period of the range, when period is a dimension
}

// metricsJSON is the response of GET /emails/metrics.
type metricsJSON struct {
	Object      string             `json:"object"`
	StartDate   string             `json:"start_date"`
	EndDate     string             `json:"end_date"`
	Metrics     []string           `json:"metrics"`
	Dimensions  []string           `json:"dimensions"`
	Granularity string             `json:"granularity"`
	Totals      map[string]float64 `json:"totals"`
	// Data is absent without dimensions, a list (maybe empty) with them.
	Data any `json:"data,omitempty"`
}

func (s *emailsAPI) emailMetrics(c *gin.Context) {
	req, err := parseMetricsRequest(c.Request.URL.Query(), time.Now())
	if err != nil {
		s.respondError(c, err)
		return
	}
	m, err := s.usage.EmailMetrics(c.Request.Context(), principal(c).TeamID, req.query)
	if err != nil {
		s.respondError(c, err)
		return
	}
	c.JSON(http.StatusOK, renderMetrics(req, m))
}

// renderMetrics shapes the counts as Resend does: the requested metrics
// of the totals and of each row, the rows' dimensions by name. With period
// as the only dimension every period of the range has its row, zeros
// included, for charts; other breakdowns list the combinations that have
// events.
func renderMetrics(req metricsRequest, m store.Metrics) metricsJSON {
	q := req.query
	out := metricsJSON{Object: "metrics", StartDate: q.Start.UTC().Format(metricsTimeFormat),
		EndDate: q.End.UTC().Format(metricsTimeFormat), Metrics: req.metrics, Dimensions: req.dimensions,
		Granularity: q.Granularity, Totals: pick(req.metrics, m.Totals)}
	if len(req.dimensions) == 0 {
		return out
	}
	rows := m.Rows
	if len(req.dimensions) == 1 && q.ByPeriod {
		rows = fillPeriods(req.periods, m.Rows)
	}
	data := make([]map[string]any, 0, len(rows))
	for _, r := range rows {
		row := map[string]any{}
		for k, v := range pick(req.metrics, r.MetricCounts) {
			row[k] = v
		}
		if q.ByPeriod {
			row["period"] = r.Period.Format(metricsTimeFormat)
		}
		if q.ByDomain {
			row["domain_id"], row["domain_name"] = idOrNil(r.DomainID), r.DomainName
		}
		if q.ByEmail {
			row["email_id"] = idOrNil(r.EmailID)
		}
		if q.ByBroadcast {
			row["broadcast_id"], row["broadcast_name"] = idOrNil(r.BroadcastID), r.BroadcastName
		}
		data = append(data, row)
	}
	out.Data = data
	return out
}

// fillPeriods gives each period its row, zero where nothing happened.
func fillPeriods(periods []time.Time, rows []store.MetricsRow) []store.MetricsRow {
	byStart := make(map[int64]store.MetricsRow, len(rows))
	for _, r := range rows {
		byStart[r.Period.Unix()] = r
	}
	out := make([]store.MetricsRow, len(periods))
	for i, p := range periods {
		if r, ok := byStart[p.Unix()]; ok {
			out[i] = r
		} else {
			out[i] = store.MetricsRow{Period: p}
		}
	}
	return out
}

func pick(metrics []string, c store.MetricCounts) map[string]float64 {
	out := make(map[string]float64, len(metrics))
	for _, name := range metrics {
		out[name] = c.Value(name)
	}
	return out
}

func idOrNil(id *uuid.UUID) any {
	if id == nil {
		return nil
	}
	return id.String()
}

func metricsInvalid(format string, a ...any) error {
	return errorf(http.StatusUnprocessableEntity, nameValidation, fmt.Sprintf(format, a...))
}

// listParam reads a list parameter as Resend accepts it: comma-separated,
// repeated, or both; empty items are ignored.
func listParam(q url.Values, name string) []string {
	var out []string
	for _, v := range q[name] {
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// enumList reads a list parameter of known values, each kept once in the
// order given; all of them when the parameter is absent or empty.
func enumList(q url.Values, name string, known []string) ([]string, error) {
	items := listParam(q, name)
	var out []string
	for _, v := range items {
		if !slices.Contains(known, v) {
			return nil, metricsInvalid("The `%s` parameter has an unknown value %q: use %s.", name, v,
				strings.Join(known, ", "))
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

func idList(q url.Values, name string) ([]uuid.UUID, error) {
	items := listParam(q, name)
	if len(items) > maxMetricIDs {
		return nil, metricsInvalid("The `%s` parameter takes at most %d ids.", name, maxMetricIDs)
	}
	var out []uuid.UUID
	for _, v := range items {
		id, err := uuid.Parse(v)
		if err != nil {
			return nil, metricsInvalid("The `%s` parameter must be a list of UUIDs: %q is not one.", name, v)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// parseMetricsTime reads an ISO 8601 date (midnight in loc) or datetime
// (without an offset, in loc).
func parseMetricsTime(v string, loc *time.Location) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04:05.999999999", "2006-01-02T15:04"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// parseMetricsRequest validates a GET /emails/metrics query; now is the
// current time (the default end and the clamp of later ones).
func parseMetricsRequest(q url.Values, now time.Time) (metricsRequest, error) {
	var req metricsRequest
	loc := time.UTC
	if v, ok := q["timezone"]; ok {
		name := strings.TrimSpace(strings.Join(v, ""))
		l, err := time.LoadLocation(name)
		if len(v) != 1 || name == "" || name == "Local" || err != nil {
			return req, metricsInvalid("The `timezone` parameter must be an IANA time zone name, such as America/New_York.")
		}
		loc = l
	}
	gran := store.GranularityDaily
	if v, ok := q["granularity"]; ok {
		if len(v) != 1 || !slices.Contains(metricGranularities, v[0]) {
			return req, metricsInvalid("The `granularity` parameter must be one of %s.", strings.Join(metricGranularities, ", "))
		}
		gran = v[0]
	}
	var err error
	if req.metrics, err = enumList(q, "metrics", store.MetricNames); err != nil {
		return req, err
	}
	if len(req.metrics) == 0 {
		req.metrics = slices.Clone(store.MetricNames)
	}
	if req.dimensions, err = enumList(q, "dimensions", metricDimensions); err != nil {
		return req, err
	}
	if req.dimensions == nil {
		req.dimensions = []string{}
	}
	mq := store.MetricsQuery{Location: loc, Granularity: gran,
		ByPeriod: slices.Contains(req.dimensions, "period"), ByDomain: slices.Contains(req.dimensions, "domain"),
		ByEmail: slices.Contains(req.dimensions, "email"), ByBroadcast: slices.Contains(req.dimensions, "broadcast")}
	if mq.DomainIDs, err = idList(q, "domain_id"); err != nil {
		return req, err
	}
	if mq.EmailIDs, err = idList(q, "email_id"); err != nil {
		return req, err
	}
	if mq.BroadcastIDs, err = idList(q, "broadcast_id"); err != nil {
		return req, err
	}
	switch {
	case mq.ByEmail && mq.ByBroadcast:
		return req, metricsInvalid("The `dimensions` parameter cannot combine `email` with `broadcast`.")
	case len(mq.EmailIDs) > 0 && (mq.ByBroadcast || len(mq.BroadcastIDs) > 0):
		return req, metricsInvalid("The `email_id` parameter cannot be combined with the `broadcast` dimension or `broadcast_id`.")
	case len(mq.BroadcastIDs) > 0 && mq.ByEmail:
		return req, metricsInvalid("The `broadcast_id` parameter cannot be combined with the `email` dimension.")
	}
	mq.End = now
	if v, ok := q["end_date"]; ok {
		t, good := parseMetricsTime(strings.Join(v, ""), loc)
		if len(v) != 1 || !good {
			return req, metricsInvalid("The `end_date` parameter must be an ISO 8601 date or datetime.")
		}
		if t.Before(now) {
			mq.End = t
		}
	}
	mq.Start = mq.End.Add(-defaultMetricsSpan)
	if v, ok := q["start_date"]; ok {
		t, good := parseMetricsTime(strings.Join(v, ""), loc)
		if len(v) != 1 || !good {
			return req, metricsInvalid("The `start_date` parameter must be an ISO 8601 date or datetime.")
		}
		if t.After(mq.End) {
			return req, metricsInvalid("The `start_date` parameter must be on or before `end_date`.")
		}
		mq.Start = t
	}
	req.periods = store.MetricPeriods(mq.Start, mq.End, loc, gran, maxMetricPeriods)
	if len(req.periods) > maxMetricPeriods {
		return req, metricsInvalid("The date range makes more than %d %s periods: shorten it or use a larger `granularity`.",
			maxMetricPeriods, gran)
	}
	req.query = mq
	return req, nil
}
