// Package sandbox recognises the reserved test domain posthaste.test
// (RFC 2606 .test, never on the internet): its sender works for every team
// without verification, and its recipient addresses simulate delivery
// outcomes through the whole pipeline without any network.
package sandbox

import "strings"

// Domain is the sandbox domain.
const Domain = "posthaste.test"

// Sender is the one sandbox sender address.
const Sender = "onboarding@" + Domain

// Outcome events a sandbox recipient produces, in order.
const (
	Delivered  = "delivered"
	Bounced    = "bounced"
	Complained = "complained"
	Suppressed = "suppressed"
)

// Outcome reports the events a sandbox recipient address simulates:
// delivered@, bounced@, complained@ (delivered, then complained) and
// suppressed@, each also with a +label. ok is false for any other address.
func Outcome(addr string) (events []string, ok bool) {
	local, domain, found := strings.Cut(strings.ToLower(addr), "@")
	if !found || domain != Domain {
		return nil, false
	}
	local, _, _ = strings.Cut(local, "+")
	switch local {
	case Delivered:
		return []string{Delivered}, true
	case Bounced:
		return []string{Bounced}, true
	case Complained:
		return []string{Delivered, Complained}, true
	case Suppressed:
		return []string{Suppressed}, true
	}
	return nil, false
}

// IsDomain reports whether domain (ASCII, any case) is the sandbox domain.
func IsDomain(domain string) bool { return strings.EqualFold(domain, Domain) }
