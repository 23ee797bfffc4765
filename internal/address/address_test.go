package address

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in     string
		want   Address
		str    string // Address.String(); "" means in
		errSub string
	}{
		{in: "a@x.com", want: Address{Local: "a", Domain: "x.com"}},
		{in: "  a@x.com\t", want: Address{Local: "a", Domain: "x.com"}, str: "a@x.com"},
		{in: "A.B+tag@Example.COM", want: Address{Local: "A.B+tag", Domain: "example.com"}, str: "A.B+tag@example.com"},
		{in: "Name <a@x.com>", want: Address{Name: "Name", Local: "a", Domain: "x.com"}},
		{in: "<a@x.com>", want: Address{Local: "a", Domain: "x.com"}, str: "a@x.com"},
		{in: "Name<a@x.com>", want: Address{Name: "Name", Local: "a", Domain: "x.com"}, str: "Name <a@x.com>"},
		{in: "Name < a@x.com >", want: Address{Name: "Name", Local: "a", Domain: "x.com"}, str: "Name <a@x.com>"},
		{in: "Acme Inc. <no-reply@acme.com>", want: Address{Name: "Acme Inc.", Local: "no-reply", Domain: "acme.com"}},
		{in: `"Doe, John" <j@x.com>`, want: Address{Name: "Doe, John", Local: "j", Domain: "x.com"}},
		{in: `Doe, John <j@x.com>`, want: Address{Name: "Doe, John", Local: "j", Domain: "x.com"}, str: `"Doe, John" <j@x.com>`},
		{in: `"Jo \"JJ\" Doe" <j@x.com>`, want: Address{Name: `Jo "JJ" Doe`, Local: "j", Domain: "x.com"}},
		{in: `"a\\b" <j@x.com>`, want: Address{Name: `a\b`, Local: "j", Domain: "x.com"}},
		{in: `Jo   "J J"   Doe <j@x.com>`, want: Address{Name: "Jo J J Doe", Local: "j", Domain: "x.com"}, str: "Jo J J Doe <j@x.com>"},
		{in: `"" <j@x.com>`, want: Address{Local: "j", Domain: "x.com"}, str: "j@x.com"},
		{in: `"  spaced  " <j@x.com>`, want: Address{Name: "  spaced  ", Local: "j", Domain: "x.com"}},
		{in: `"<b@y.com>" <a@x.com>`, want: Address{Name: "<b@y.com>", Local: "a", Domain: "x.com"}},
		{in: "=?utf-8?q?J=C3=B6rg_M=C3=BCller?= <j@x.de>", want: Address{Name: "Jörg Müller", Local: "j", Domain: "x.de"}, str: "Jörg Müller <j@x.de>"},
		{in: "=?UTF-8?B?SsO2cmc=?= =?UTF-8?B?IE3DvGxsZXI=?= <j@x.de>", want: Address{Name: "Jörg Müller", Local: "j", Domain: "x.de"}, str: "Jörg Müller <j@x.de>"},
		{in: "=?iso-8859-1?q?J=F6rg?= <j@x.de>", want: Address{Name: "Jörg", Local: "j", Domain: "x.de"}, str: "Jörg <j@x.de>"},
		{in: "=?windows-1252?q?=80uro?= <j@x.de>", want: Address{Name: "€uro", Local: "j", Domain: "x.de"}, str: "€uro <j@x.de>"},
		{in: "=?shift_jis?b?k/qWe4zq?= <j@x.jp>", want: Address{Name: "日本語", Local: "j", Domain: "x.jp"}, str: "日本語 <j@x.jp>"},
		{in: `"=?utf-8?q?literal?=" <j@x.com>`, want: Address{Name: "=?utf-8?q?literal?=", Local: "j", Domain: "x.com"}},
		{in: "Jörg <jörg@bücher.de>", want: Address{Name: "Jörg", Local: "jörg", Domain: "xn--bcher-kva.de"}, str: "Jörg <jörg@xn--bcher-kva.de>"},
		{in: "user@例え.テスト", want: Address{Local: "user", Domain: "xn--r8jz45g.xn--zckzah"}, str: "user@xn--r8jz45g.xn--zckzah"},
		{in: "user@XN--BCHER-KVA.de", want: Address{Local: "user", Domain: "xn--bcher-kva.de"}, str: "user@xn--bcher-kva.de"},
		{in: "o'brien+x=y@sub.x.co.uk", want: Address{Local: "o'brien+x=y", Domain: "sub.x.co.uk"}},

		{in: "", errSub: "empty"},
		{in: "   ", errSub: "empty"},
		{in: "a", errSub: "no @"},
		{in: "a@", errSub: "empty domain"},
		{in: "@x.com", errSub: "empty local part"},
		{in: "a@localhost", errSub: "no dot"},
		{in: "a@x.123", errSub: "numeric"},
		{in: "a@1.2.3.4", errSub: "numeric"},
		{in: "a@[1.2.3.4]", errSub: "literals"},
		{in: "a@x..com", errSub: "host name"},
		{in: "a@x.com.", errSub: "host name"},
		{in: "a@-x.com", errSub: "host name"},
		{in: "a@x_y.com", errSub: "host name"},
		{in: "a@x y.com", errSub: "host name"},
		{in: "a..b@x.com", errSub: "empty dot-separated"},
		{in: ".a@x.com", errSub: "empty dot-separated"},
		{in: "a b@x.com", errSub: "local part contains"},
		{in: `"a b"@x.com`, errSub: "local part contains"},
		{in: "a@b@x.com", errSub: "local part contains"},
		{in: strings.Repeat("a", 65) + "@x.com", errSub: "64"},
		{in: "a@" + strings.Repeat("b", 64) + ".com", errSub: "host name"},
		{in: "Name <a@x.com", errSub: "unbalanced"},
		{in: "Name a@x.com>", errSub: "unbalanced"},
		{in: "a@x.com\r\nBcc: b@y.com", errSub: "line break"},
		{in: "Name\n <a@x.com>", errSub: "line break"},
		{in: "=?utf-8?q?a=0D=0Ab?= <a@x.com>", errSub: "line break"},
		{in: "=?utf-8?q?a=00b?= <a@x.com>", errSub: "control"},
		{in: "\"a\x00b\" <a@x.com>", errSub: "control"},
		{in: `"unterminated <a@x.com>`, errSub: "unterminated"},
		{in: "=?x-unknown?q?a?= <a@x.com>", errSub: "decoding display name"},
		{in: "a\xff@x.com", errSub: "UTF-8"},
		{in: strings.Repeat("n", 3000) + " <a@x.com>", errSub: "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.errSub != "" {
				require.Error(t, err)
				require.Contains(t, err.Error(), tt.errSub)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			str := tt.str
			if str == "" {
				str = tt.in
			}
			require.Equal(t, str, got.String())
			require.Equal(t, got.Local+"@"+got.Domain, got.Addr())
		})
	}
}

func TestAddressStringQuoting(t *testing.T) {
	tests := []struct {
		name, want string
	}{
		{"Plain Name", "Plain Name <a@x.com>"},
		{"Acme Inc.", "Acme Inc. <a@x.com>"},
		{".Start", `".Start" <a@x.com>`},
		{"Doe, John", `"Doe, John" <a@x.com>`},
		{`Say "hi"`, `"Say \"hi\"" <a@x.com>`},
		{`back\slash`, `"back\\slash" <a@x.com>`},
		{"two  spaces", `"two  spaces" <a@x.com>`},
		{" lead", `" lead" <a@x.com>`},
		{"=?utf-8?q?x?=", `"=?utf-8?q?x?=" <a@x.com>`},
		{"Zoë (café)", `"Zoë (café)" <a@x.com>`},
		{"Zoë", "Zoë <a@x.com>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := Address{Name: tt.name, Local: "a", Domain: "x.com"}
			require.Equal(t, tt.want, a.String())
			back, err := Parse(a.String())
			require.NoError(t, err)
			require.Equal(t, a, back)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"a@x.com", "Name <a@x.com>", `"Doe, John" <j@x.com>`, "=?utf-8?q?J=C3=B6rg?= <j@x.de>",
		"jörg@bücher.de", `"a\"b" <a@x.com>`, "<a@x.com>", "a@[1.2.3.4]", "=?utf-8?b?SsO2cmc=?= <j@x.de>",
		"Acme Inc. <no-reply@acme.com>", `"x" "y" z <a@b.co>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := Parse(s)
		if err != nil {
			return
		}
		// The parts are clean enough to go into an SMTP envelope and a header.
		require.NotEmpty(t, a.Local)
		require.True(t, utf8.ValidString(a.Name))
		require.NotContains(t, a.Name, "\r")
		require.NotContains(t, a.Name, "\n")
		require.False(t, strings.ContainsFunc(a.Name, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }))
		require.NotContains(t, a.Addr(), " ")
		require.NotContains(t, a.Addr(), "<")
		require.Equal(t, strings.ToLower(a.Domain), a.Domain)
		for i := 0; i < len(a.Domain); i++ {
			require.Less(t, a.Domain[i], byte(utf8.RuneSelf))
		}
		require.LessOrEqual(t, len(a.Addr()), maxAddrLength)

		// The display form parses back to the same address, and so does
		// the bare addr-spec.
		back, err := Parse(a.String())
		require.NoError(t, err, "reparsing %q", a.String())
		require.Equal(t, a, back)
		bare, err := Parse(a.Addr())
		require.NoError(t, err)
		require.Equal(t, Address{Local: a.Local, Domain: a.Domain}, bare)
	})
}
