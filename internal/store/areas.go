package store

// The store's queries are grouped by area, one type each, reached as a
// field of the opened Store: st.Emails, st.Domains, st.Audience and so on.
// Every area type shares the one Store it was opened with (its pool, its
// sealer and the helpers in store.go, sealing.go and events.go), so sealing
// and the outbox stay properties of the store, not of each area.
//
// An area's file names say what it holds; each type keeps its own method
// set small enough to read (issue 34's "about 40 methods").

// Emails holds sending: emails, batches, schedules, idempotency keys,
// suppressions, bounces, tracking lookups and the reconciler's queries.
type Emails struct{ *Store }

// Domains holds sender domains, their records, IP pools and warm-up.
type Domains struct{ *Store }

// Audience holds contacts, topics, contact properties, segments and
// contact imports.
type Audience struct{ *Store }

// Templates holds email templates.
type Templates struct{ *Store }

// Broadcasts holds broadcasts, their recipients and chunks.
type Broadcasts struct{ *Store }

// Webhooks holds webhook endpoints, events, attempts and the outbox.
type Webhooks struct{ *Store }

// Received holds received mail, receiving routes and the inbound budget.
type Received struct{ *Store }

// Privacy holds data subjects, data requests, erasure, retention and the
// audit log.
type Privacy struct{ *Store }

// Accounts holds teams, users, members, invites, API keys and plans.
type Accounts struct{ *Store }

// Sessions holds dashboard sessions and multi-factor sign-in.
type Sessions struct{ *Store }

// Insights holds the request log, email metrics and account health.
type Insights struct{ *Store }

// Automations holds custom events, automations and their runs.
type Automations struct{ *Store }

// areas points each area type at s; Open calls it.
func (s *Store) areas() {
	s.Emails = &Emails{s}
	s.Domains = &Domains{s}
	s.Audience = &Audience{s}
	s.Templates = &Templates{s}
	s.Broadcasts = &Broadcasts{s}
	s.Webhooks = &Webhooks{s}
	s.Received = &Received{s}
	s.Privacy = &Privacy{s}
	s.Accounts = &Accounts{s}
	s.Sessions = &Sessions{s}
	s.Insights = &Insights{s}
	s.Automations = &Automations{s}
}
