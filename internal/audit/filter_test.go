package audit

import (
	"strings"
	"testing"
	"time"
)

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		query map[string]string
		bad   string // the parameter the error names; "" for none
		check func(Filter) bool
	}{
		{"empty", nil, "", func(f Filter) bool { return f == (Filter{}) }},
		{"action", map[string]string{"action": "api_key.create"}, "", func(f Filter) bool { return f.Action == APIKeyCreate }},
		{"unknown action", map[string]string{"action": "api_key.steal"}, "action", nil},
		{"actor", map[string]string{"actor_id": "0193a1b2-0000-7000-8000-000000000001"}, "",
			func(f Filter) bool { return f.ActorID != nil }},
		{"bad actor", map[string]string{"actor_id": "me"}, "actor_id", nil},
		{"target is free text", map[string]string{"target_id": "bulk"}, "", func(f Filter) bool { return f.TargetID == "bulk" }},
		{"from time", map[string]string{"from": "2026-11-01T10:00:00Z"}, "",
			func(f Filter) bool { return f.From.Equal(time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)) }},
		{"to date", map[string]string{"to": "2026-12-01"}, "",
			func(f Filter) bool { return f.To.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) }},
		{"bad to", map[string]string{"to": "next week"}, "to", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := ParseFilter(func(k string) string { return tc.query[k] })
			if tc.bad != "" {
				if err == nil || !strings.Contains(err.Error(), "`"+tc.bad+"`") {
					t.Fatalf("got %v, want an error naming %s", err, tc.bad)
				}
				return
			}
			if err != nil || !tc.check(f) {
				t.Fatalf("got %+v, %v", f, err)
			}
		})
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "api_key.create", "2026-11-01", "2026-11-01T10:00:00.5+02:00",
		"0193a1b2-0000-7000-8000-000000000001", "\x00", "9999-99-99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		flt, err := ParseFilter(func(string) string { return v })
		if err != nil {
			if _, ok := err.(*FilterError); !ok {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if flt.Action != "" && !flt.Action.Valid() {
			t.Fatalf("invalid action %q accepted", flt.Action)
		}
	})
}
