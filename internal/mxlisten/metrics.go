package mxlisten

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the inbound MX's Prometheus counters. A nil *Metrics counts
// nothing.
type Metrics struct {
	// Connections counts connections by outcome: accepted, refused (over
	// a connection cap), cut (closed at the session deadline or the cap on
	// commands outside a transaction).
	Connections *prometheus.CounterVec
	// Recipients counts RCPT commands by outcome: accepted, refused (not
	// ours or not an address we accept), deferred (routing failed, or over
	// the return-path rate or the team's budget).
	Recipients *prometheus.CounterVec
	// Messages counts DATA replies by result: accepted, deferred,
	// rejected (over the size cap); deferred also counts the transactions
	// refused at MAIL FROM by the client rates.
	Messages *prometheus.CounterVec
}

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Connections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_inbound_connections_total", Help: "Inbound MX connections, by outcome.",
		}, []string{"outcome"}),
		Recipients: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_inbound_recipients_total", Help: "Inbound MX RCPT commands, by outcome.",
		}, []string{"outcome"}),
		Messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "posthaste_inbound_messages_total", Help: "Inbound MX messages, by final reply.",
		}, []string{"result"}),
	}
	reg.MustRegister(m.Connections, m.Recipients, m.Messages)
	return m
}

func (m *Metrics) connection(outcome string) {
	if m != nil {
		m.Connections.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) recipient(outcome string) {
	if m != nil {
		m.Recipients.WithLabelValues(outcome).Inc()
	}
}

func (m *Metrics) message(result string) {
	if m != nil {
		m.Messages.WithLabelValues(result).Inc()
	}
}
