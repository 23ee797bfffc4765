package store

import "testing"

func TestScrubAddress(t *testing.T) {
	t.Parallel()
	const addr = "pat.s+x@dest.test"
	tests := []struct{ in, want string }{
		{"hi pat.s+x@dest.test!", "hi [E]!"},
		{"PAT.S+X@DEST.TEST", "[E]"},
		{"<pat.s+x@dest.test>, pat.s+x@dest.test.", "<[E]>, [E]."},
		{"/contacts/pat.s+x%40dest.test", "/contacts/[E]"},
		{"jim.pat.s+x@dest.test", "jim.pat.s+x@dest.test"},
		{"pat.s+x@dest.test.org", "pat.s+x@dest.test.org"},
		{"pat.s+x@dest.tester", "pat.s+x@dest.tester"},
		{"pat.s+y@dest.test", "pat.s+y@dest.test"},
	}
	for _, tt := range tests {
		got, changed := scrubAddress(tt.in, addr, "[E]")
		if got != tt.want || changed != (tt.in != tt.want) {
			t.Errorf("scrubAddress(%q) = %q, %v; want %q", tt.in, got, changed, tt.want)
		}
	}
}
