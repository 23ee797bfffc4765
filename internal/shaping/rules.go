package shaping

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The providers traffic is shaped for. Every MX host belongs to one of
// them; hosts that match no suffix belong to Default.
const (
	Gmail   = "gmail"
	Outlook = "outlook"
	Yahoo   = "yahoo"
	Default = "default"
)

// Providers lists the provider names, Default last.
var Providers = []string{Gmail, Outlook, Yahoo, Default}

// suffixes maps MX host name suffixes to providers: the one definition of
// the grouping. Google's consumer and Workspace MX hosts share their
// edge, as do Microsoft's consumer (olc.protection.outlook.com) and
// Microsoft 365 (mail.protection.outlook.com, mx.microsoft for DANE) ones.
var suffixes = []struct{ suffix, provider string }{
	{".google.com", Gmail},
	{".googlemail.com", Gmail},
	{".outlook.com", Outlook},
	{".hotmail.com", Outlook},
	{".mx.microsoft", Outlook},
	{".yahoodns.net", Yahoo},
}

// ProviderOf returns the provider of the MX host name host (any case,
// with or without the final dot).
func ProviderOf(host string) string {
	h := "." + strings.ToLower(strings.TrimSuffix(host, "."))
	for _, s := range suffixes {
		if strings.HasSuffix(h, s.suffix) {
			return s.provider
		}
	}
	return Default
}

// Limits are the limits of one provider, each per source address (and,
// for Default, per MX host) and shared by every process (through Redis
// when configured). Zero means no limit.
type Limits struct {
	// Connections bounds the connections open at once, idle pooled ones
	// included (key "conns").
	Connections int
	// PerConnection bounds the messages one connection carries before it
	// is closed (key "per_conn").
	PerConnection int
	// PerSecond and PerHour bound the messages sent (keys "per_sec" and
	// "per_hour"): a bucket of that many, refilled over the second or the
	// hour, so a burst of the whole amount may go at once.
	PerSecond int
	PerHour   int
	// Backoff is the first pause after the provider asked to slow down
	// (key "backoff"); each further request while the memory of the last
	// one lasts doubles it, up to BackoffMax (key "backoff_max").
	Backoff    time.Duration
	BackoffMax time.Duration
}

// Rules are the limits of every provider.
type Rules map[string]Limits

// DefaultRules are the limits without POSTHASTE_SHAPING, after the
// shaping.toml that KumoMTA ships: 10 connections, 100 messages per
// connection and 100 a second by default; Gmail and Outlook 5 connections
// and 50 messages per connection; Yahoo 20 messages per connection, as
// Yahoo's sender guidelines ask. Back-off starts at a minute and stops
// growing at an hour.
func DefaultRules() Rules {
	base := Limits{Connections: 10, PerConnection: 100, PerSecond: 100,
		Backoff: time.Minute, BackoffMax: time.Hour}
	gmail, outlook, yahoo := base, base, base
	gmail.Connections, gmail.PerConnection = 5, 50
	outlook.Connections, outlook.PerConnection = 5, 50
	yahoo.PerConnection = 20
	return Rules{Gmail: gmail, Outlook: outlook, Yahoo: yahoo, Default: base}
}

// ParseRules reads POSTHASTE_SHAPING over DefaultRules: "off", or
// provider sections separated by ";", each "provider:key=value,..." with
// the keys of Limits (counts as integers, 0 for no limit; backoff and
// backoff_max as Go durations), for example
//
//	gmail:conns=3,per_conn=20;default:per_sec=50,per_hour=20000
//
// Keys not given keep their defaults. "off" returns nil: no shaping.
func ParseRules(s string) (Rules, error) {
	s = strings.TrimSpace(s)
	if s == "off" {
		return nil, nil
	}
	rules := DefaultRules()
	if s == "" {
		return rules, nil
	}
	for _, sec := range strings.Split(s, ";") {
		sec = strings.TrimSpace(sec)
		if sec == "" {
			continue
		}
		name, body, ok := strings.Cut(sec, ":")
		name = strings.TrimSpace(name)
		if !ok {
			return nil, fmt.Errorf("%q: want provider:key=value,...", sec)
		}
		if !slices.Contains(Providers, name) {
			return nil, fmt.Errorf("unknown provider %q (want one of %s)", name, strings.Join(Providers, ", "))
		}
		l := rules[name]
		for _, kv := range strings.Split(body, ",") {
			k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
			if !ok {
				return nil, fmt.Errorf("%s: %q: want key=value", name, kv)
			}
			if err := l.set(strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		if l.BackoffMax < l.Backoff {
			return nil, fmt.Errorf("%s: backoff_max %v is shorter than backoff %v", name, l.BackoffMax, l.Backoff)
		}
		rules[name] = l
	}
	return rules, nil
}

func (l *Limits) set(k, v string) error {
	var n *int
	switch k {
	case "conns":
		n = &l.Connections
	case "per_conn":
		n = &l.PerConnection
	case "per_sec":
		n = &l.PerSecond
	case "per_hour":
		n = &l.PerHour
	case "backoff", "backoff_max":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q: want a positive duration such as 1m", k, v)
		}
		if k == "backoff" {
			l.Backoff = d
		} else {
			l.BackoffMax = d
		}
		return nil
	default:
		return fmt.Errorf("unknown key %q (want conns, per_conn, per_sec, per_hour, backoff, backoff_max)", k)
	}
	i, err := strconv.Atoi(v)
	if err != nil || i < 0 || i > 1_000_000_000 {
		return fmt.Errorf("%s=%q: want a whole number, 0 for no limit", k, v)
	}
	*n = i
	return nil
}

// String formats the rules as ParseRules reads them, for the startup log.
func (r Rules) String() string {
	if r == nil {
		return "off"
	}
	var parts []string
	for _, p := range Providers {
		l := r[p]
		parts = append(parts, fmt.Sprintf("%s:conns=%d,per_conn=%d,per_sec=%d,per_hour=%d,backoff=%v,backoff_max=%v",
			p, l.Connections, l.PerConnection, l.PerSecond, l.PerHour, l.Backoff, l.BackoffMax))
	}
	return strings.Join(parts, ";")
}
