// Package sandbox recognises the reserved test domain posthaste.test
// (RFC 2606 .test, never on the internet) and, so that a configuration
// written for Resend works unchanged, Resend's test domain resend.dev: their
// sender (onboarding@) works for every team without verification, and their
// recipient addresses simulate delivery outcomes through the whole pipeline
// without any network. Mail to or from resend.dev is never sent to Resend.
package sandbox

import "strings"

// Domain is the sandbox domain.
const Domain = "posthaste.test"

// Sender is the sandbox sender address shown to users.
const Sender = "onboarding@" + Domain

// ResendDomain is Resend's test domain, an alias of Domain: its sender
// onboarding@resend.dev and its delivered@, bounced@, complained@ and
// suppressed@ addresses behave exactly as posthaste.test's.
const ResendDomain = "resend.dev"

// ResendSender is Resend's shared test sender, an alias of Sender.
const ResendSender = "onboarding@" + ResendDomain

// Outcome events a sandbox recipient produces, in order.
const (
	Delivered  = "delivered"
	Bounced    = "bounced"
	Complained = "complained"
	Suppressed = "suppressed"
)

// Outcome reports the events a sandbox recipient address simulates:
// delivered@, bounced@, complained@ (delivered, then complained) and
// suppressed@ of either sandbox domain, each also with a +label. ok is false
// for any other address.
func Outcome(addr string) (events []string, ok bool) {
	local, domain, found := strings.Cut(strings.ToLower(addr), "@")
	if !found || !IsDomain(domain) {
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

// IsDomain reports whether domain (ASCII, any case) is a sandbox domain:
// posthaste.test or resend.dev.
func IsDomain(domain string) bool {
	return strings.EqualFold(domain, Domain) || strings.EqualFold(domain, ResendDomain)
}

// IsSender reports whether addr (a bare address, any case) is a sandbox
// sender: onboarding@posthaste.test or onboarding@resend.dev.
func IsSender(addr string) bool {
	return strings.EqualFold(addr, Sender) || strings.EqualFold(addr, ResendSender)
}
