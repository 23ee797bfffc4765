package mxlisten

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestNormalizeRecipient(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" means refused
	}{
		{"bounces+0193e5a0-0000-7000-8000-000000000001@send.example.com",
			"bounces+0193e5a0-0000-7000-8000-000000000001@send.example.com"},
		{"Support@Example.COM", "support@example.com"},
		{"BOUNCES+ABC@SEND.EXAMPLE.COM", "bounces+abc@send.example.com"},
		{"o'brien.x_y-z@example.com", "o'brien.x_y-z@example.com"},
		{"user@bücher.example", "user@xn--bcher-kva.example"},
		{"jörg@example.com", "jörg@example.com"},

		// Open relay tricks and what is not a plain mailbox.
		{"user%victim.org@example.com", ""}, // percent hack
		{"victim.org!user@example.com", ""}, // UUCP bang path
		{"user@victim.org@example.com", ""}, // unquoted "user@victim.org"@example.com
		{"@example.com:user@victim.org", ""},
		{"user@[127.0.0.1]", ""},     // address literal
		{"user@[IPv6:::1]", ""},      // address literal
		{"user@127.0.0.1", ""},       // bare IP address
		{"user@example.com.", ""},    // trailing dot
		{"user@example..com", ""},    // empty label
		{"user@.example.com", ""},    // empty label
		{"user@localhost", ""},       // dotless
		{"user", ""},                 // no domain
		{"user@", ""},                // empty domain
		{"@example.com", ""},         // empty local part
		{".user@example.com", ""},    // Dot-string rules
		{"user.@example.com", ""},    // Dot-string rules
		{"us..er@example.com", ""},   // Dot-string rules
		{"us er@example.com", ""},    // unquoted, a quoted local part with a space
		{"us\"er@example.com", ""},   // quote
		{"us\\er@example.com", ""},   // backslash
		{"user\r\n@example.com", ""}, // control characters
		{"user@exa_mple.com", ""},    // not LDH
		{"user@-example.com", ""},    // hyphen at a label's edge
		{"user@example.com>", ""},    // go-smtp leaves what is not a space or '>' in the domain
		{"user@example.com,other@victim.org", ""},
		{strings.Repeat("a", 65) + "@example.com", ""},
		{"user@" + strings.Repeat("a", 64) + ".com", ""},
		{"\xff@example.com", ""},
	} {
		got, err := NormalizeRecipient(tc.in)
		if tc.want == "" {
			require.ErrorIs(t, err, ErrBadAddress, "%q was accepted as %q", tc.in, got)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// FuzzNormalizeRecipient checks that whatever it accepts is one plain
// mailbox at a domain name, in its canonical form.
func FuzzNormalizeRecipient(f *testing.F) {
	for _, s := range []string{"user@example.com", "User@Example.com", "a%b@c.d", "\"a@b\"@c.d", "u@[1.2.3.4]",
		"u@b\u00fccher.example", "x@y.z.", "bounces+1@send.example.com"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := NormalizeRecipient(in)
		if err != nil {
			return
		}
		if !utf8.ValidString(got) || strings.Count(got, "@") != 1 || strings.ContainsAny(got, "%!\"\\ []<>\r\n") {
			t.Fatalf("NormalizeRecipient(%q) = %q", in, got)
		}
		local, domain, _ := strings.Cut(got, "@")
		if local == "" || domain == "" || strings.HasSuffix(domain, ".") || domain != strings.ToLower(domain) {
			t.Fatalf("NormalizeRecipient(%q) = %q", in, got)
		}
		for i := 0; i < len(domain); i++ {
			if domain[i] >= 0x80 {
				t.Fatalf("NormalizeRecipient(%q) = %q: domain is not ASCII", in, got)
			}
		}
		again, err := NormalizeRecipient(got)
		if err != nil || again != got {
			t.Fatalf("not idempotent: %q → %q → %q, %v", in, got, again, err)
		}
	})
}
