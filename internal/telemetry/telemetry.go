// Package telemetry holds Posthaste's Prometheus metrics and the process
// logger. Metrics live in a registry passed in by main, never in the global
// default registry.
package telemetry

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Metrics are the service's own metrics. The zero value is not usable;
// construct with NewMetrics.
type Metrics struct {
	HTTPRequests   *prometheus.CounterVec
	HTTPDuration   *prometheus.HistogramVec
	EmailsAccepted *prometheus.CounterVec
	OutboxWait     prometheus.Histogram
	Deliveries     *prometheus.CounterVec
	EmailEvents    *prometheus.CounterVec
	// RequestLogDropped counts request log entries lost to a full buffer
	// or a failed write.
	RequestLogDropped prometheus.Counter
	// WebhookAttempts counts webhook attempts by outcome: success, failed
	// (non-2xx), no_response, refused (egress guard).
	WebhookAttempts *prometheus.CounterVec
	// SMTPConnections counts SMTP gateway connections by outcome: accepted,
	// refused (over the per-address cap).
	SMTPConnections *prometheus.CounterVec
	// SMTPTransactions counts SMTP mail transactions by their final reply
	// class: accepted (2xx), deferred (4xx), rejected (5xx).
	SMTPTransactions *prometheus.CounterVec
	// SMTPAuthFailures counts failed SMTP AUTH attempts.
	SMTPAuthFailures prometheus.Counter
	// Reconciled counts the emails the reconciler found without an
	// outcome and without a running workflow, by action: restarted, failed.
	Reconciled *prometheus.CounterVec
	// OutboxEnded counts outbox entries ended without a start, by kind and
	// reason: unstartable, gave_up, missing.
	OutboxEnded *prometheus.CounterVec
	// MTAConnections is the outbound SMTP connections this process holds
	// open (idle pooled ones included), by destination provider and
	// source address: the traffic shaping slots in use (package shaping).
	MTAConnections *prometheus.GaugeVec
	// MTAMessages counts the messages traffic shaping let through to MX
	// hosts, by provider and source address.
	MTAMessages *prometheus.CounterVec
	// MTAShapingHeld counts deliveries traffic shaping held back, by
	// provider, source address and reason: connections, rate, backoff.
	MTAShapingHeld *prometheus.CounterVec
	// MTABackoffs counts replies that asked to slow down, by provider and
	// source address.
	MTABackoffs *prometheus.CounterVec
}

// NewMetrics registers the metrics (and the Go and process collectors) on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HTTPRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_http_requests_total", Help: "API requests by route, method (MethodLabel) and status.",
		}, []string{"method", "route", "status"}),
		HTTPDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "posthaste_http_request_duration_seconds", Help: "API request latency by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 10},
		}, []string{"route"}),
		EmailsAccepted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_emails_accepted_total", Help: "Emails accepted for delivery, by source.",
		}, []string{"source"}),
		OutboxWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "posthaste_outbox_wait_seconds", Help: "Time from acceptance to workflow start.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14),
		}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_deliveries_total", Help: "Per-recipient delivery outcomes.",
		}, []string{"outcome"}),
		EmailEvents: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_email_events_total", Help: "Email events recorded, by type.",
		}, []string{"type"}),
		RequestLogDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "posthaste_request_log_dropped_total",
			Help: "API request log entries lost because the buffer was full or the write failed.",
		}),
		WebhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_webhook_attempts_total", Help: "Webhook delivery attempts, by outcome.",
		}, []string{"outcome"}),
		SMTPConnections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_smtp_connections_total", Help: "SMTP gateway connections, by outcome.",
		}, []string{"outcome"}),
		SMTPTransactions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_smtp_transactions_total", Help: "SMTP mail transactions, by final reply.",
		}, []string{"result"}),
		SMTPAuthFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "posthaste_smtp_auth_failures_total", Help: "Failed SMTP AUTH attempts.",
		}),
		Reconciled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_reconciled_emails_total",
			Help: "Emails found without an outcome and without a running workflow, by action.",
		}, []string{"action"}),
		OutboxEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_outbox_ended_total",
			Help: "Outbox entries ended without starting their workflow, by kind and reason.",
		}, []string{"kind", "reason"}),
		MTAConnections: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "posthaste_mta_connections",
			Help: "Outbound SMTP connections open in this process, idle ones included, by provider and source address.",
		}, []string{"provider", "source"}),
		MTAMessages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_mta_messages_total",
			Help: "Messages sent to MX hosts under traffic shaping, by provider and source address.",
		}, []string{"provider", "source"}),
		MTAShapingHeld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_mta_shaping_held_total",
			Help: "Deliveries traffic shaping held back, by provider, source address and reason.",
		}, []string{"provider", "source", "reason"}),
		MTABackoffs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_mta_backoffs_total",
			Help: "MX replies that asked to slow down, by provider and source address.",
		}, []string{"provider", "source"}),
	}
	reg.MustRegister(m.HTTPRequests, m.HTTPDuration, m.EmailsAccepted, m.OutboxWait, m.Deliveries, m.EmailEvents,
		m.RequestLogDropped, m.WebhookAttempts, m.SMTPConnections, m.SMTPTransactions, m.SMTPAuthFailures,
		m.Reconciled, m.OutboxEnded, m.MTAConnections, m.MTAMessages, m.MTAShapingHeld, m.MTABackoffs,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// MethodLabel is the method label of an HTTP request: one of the methods
// of RFC 9110 §9 and RFC 5789 (PATCH), or "OTHER" for any other token a
// client sends, so the label's values stay a fixed set.
func MethodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return "OTHER"
}

// NewLogger returns the process logger: JSON unless format is "text",
// at the given level ("debug", "info", "warn", "error"; "" → info).
func NewLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if level != "" {
		if err := lv.UnmarshalText([]byte(strings.ToUpper(level))); err != nil {
			return nil, err
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return slog.New(slog.NewJSONHandler(w, opts)), nil
}

// Milliseconds is d in milliseconds with microsecond precision, as log
// lines give durations (`took_ms`).
func Milliseconds(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
