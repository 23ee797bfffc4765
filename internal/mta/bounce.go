package mta

import (
	"strconv"
	"strings"

	"github.com/posthaste/posthaste/internal/bounce"
)

// Bounce classifies the reply in r (bounce.Classify).
func (r Result) Bounce() bounce.Class {
	return bounce.Classify(r.Code, r.EnhancedCode, r.Message)
}

// Diagnostic returns the RFC 3464 §2.3.6 Diagnostic-Code lines of the reply
// in r, one per line of its text, each "smtp; <code> <enhanced code>
// <text>"; nil when r holds no reply code.
func (r Result) Diagnostic() []string {
	if r.Code == 0 {
		return nil
	}
	prefix := "smtp; " + strconv.Itoa(r.Code)
	if r.EnhancedCode != "" {
		prefix += " " + r.EnhancedCode
	}
	if r.Message == "" {
		return []string{prefix}
	}
	lines := strings.Split(r.Message, "\n")
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimRight(prefix+" "+l, " ")
	}
	return out
}
