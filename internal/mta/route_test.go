package mta

import (
	"net"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func noShuffle(int, func(i, j int)) {}

func reverse(n int, swap func(i, j int)) {
	for i := 0; i < n/2; i++ {
		swap(i, n-1-i)
	}
}

func TestOrderMX(t *testing.T) {
	mx := func(host string, pref uint16) *net.MX { return &net.MX{Host: host, Pref: pref} }
	for _, tc := range []struct {
		name    string
		in      []*net.MX
		shuffle func(int, func(i, j int))
		want    []string
	}{
		{"by preference", []*net.MX{mx("b.test.", 20), mx("a.test.", 10), mx("c.test.", 30)}, noShuffle, []string{"a.test", "b.test", "c.test"}},
		{"equal preferences keep the shuffled order", []*net.MX{mx("a.test.", 10), mx("b.test.", 10), mx("c.test.", 5)}, reverse, []string{"c.test", "b.test", "a.test"}},
		{"equal preferences unshuffled", []*net.MX{mx("a.test.", 10), mx("b.test.", 10), mx("c.test.", 5)}, noShuffle, []string{"c.test", "a.test", "b.test"}},
		{"duplicates and case", []*net.MX{mx("A.test.", 10), mx("a.test", 20)}, noShuffle, []string{"a.test"}},
		{"null MX alone", []*net.MX{mx(".", 0)}, noShuffle, []string{}},
		{"null MX among others is ignored", []*net.MX{mx(".", 0), mx("a.test.", 10)}, noShuffle, []string{"a.test"}},
		{"nil entries", []*net.MX{nil, mx("a.test.", 10)}, noShuffle, []string{"a.test"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, orderMX(tc.in, tc.shuffle))
		})
	}
}

func TestOrderMXShufflesEqualPreferences(t *testing.T) {
	c, err := New(Config{Hostname: "h.test"})
	require.NoError(t, err)
	in := []*net.MX{{Host: "a.test.", Pref: 10}, {Host: "b.test.", Pref: 10}, {Host: "c.test.", Pref: 20}}
	firsts := map[string]int{}
	for range 200 {
		hosts := orderMX(in, c.shuffle)
		require.Equal(t, "c.test", hosts[2])
		firsts[hosts[0]]++
	}
	require.Len(t, firsts, 2, "both equal-preference hosts come first sometimes")
}

func TestNormalizeAddress(t *testing.T) {
	for _, tc := range []struct {
		in, want  string
		utf8Local bool
		err       string
	}{
		{in: "user@example.test", want: "user@example.test"},
		{in: "User@EXAMPLE.test.", want: "User@example.test"},
		{in: "user@bücher.test", want: "user@xn--bcher-kva.test"},
		{in: "user@BÜCHER.test", want: "user@xn--bcher-kva.test"},
		{in: "üser@example.test", want: "üser@example.test", utf8Local: true},
		{in: `"a@b"@example.test`, want: `"a@b"@example.test`},
		{in: "user@[127.0.0.1]", want: "user@[127.0.0.1]"},
		{in: "user@[IPv6:::1]", want: "user@[IPv6:::1]"},
		{in: "bounces+0f1e@rp.example.test", want: "bounces+0f1e@rp.example.test"},
		{in: `"john doe"@example.test`, want: `"john doe"@example.test`},
		{in: `"a\"b"@example.test`, want: `"a\"b"@example.test`},
		{in: "first.last+tag@example.test", want: "first.last+tag@example.test"},
		{in: "john doe@example.test", err: "invalid character"},
		{in: "a..b@example.test", err: "empty atom"},
		{in: ".a@example.test", err: "empty atom"},
		{in: `"a"b"@example.test`, err: "unescaped quote"},
		{in: `"ab@example.test`, err: "unterminated"},
		{in: "a(b)@example.test", err: "invalid character"},
		{in: "\xff@example.test", err: "UTF-8"},
		{in: "user@[300.0.0.1]", err: "invalid IPv4"},
		{in: "user@[::1]", err: "invalid IPv4"},
		{in: "user", err: "want local@domain"},
		{in: "@example.test", err: "want local@domain"},
		{in: "user@", err: "want local@domain"},
		{in: "user@exa mple.test", err: "invalid character"},
		{in: "user@example..test", err: "invalid label"},
		{in: "user@example.test\r\nRCPT TO:<x@y>", err: "invalid character"},
		{in: "<user@example.test>", err: "invalid character"},
		{in: "user@" + strings.Repeat("a", 64) + ".test", err: "invalid label"},
		{in: strings.Repeat("a", 250) + "@b.test", err: "254"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, utf8Local, err := normalizeAddress(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.utf8Local, utf8Local)
		})
	}
}

func FuzzNormalizeAddress(f *testing.F) {
	for _, s := range []string{"user@example.test", "üser@bücher.test", "a@[127.0.0.1]", "a@[IPv6:::1]", "x@y.", "a\r\n@b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, _, err := normalizeAddress(in)
		if err != nil {
			return
		}
		if strings.ContainsAny(out, "\r\n<>\x00") || !utf8.ValidString(out) && utf8.ValidString(in) {
			t.Fatalf("%q normalized to unsafe %q", in, out)
		}
		domain := out[strings.LastIndexByte(out, '@')+1:]
		if !isASCII(domain) {
			t.Fatalf("%q: domain %q is not ASCII", in, domain)
		}
		again, _, err := normalizeAddress(out)
		if err != nil || again != out {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", in, out, again, err)
		}
	})
}

func TestHeaderHasUTF8(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"Subject: hi\r\n\r\nbody ü\r\n", false},
		{"Subject: hü\r\n\r\nbody\r\n", true},
		{"Subject: hi\n\nbody ü\n", false},
		{"Subject: hi\nFrom: ü@x\n\nbody\n", true},
		{"\r\nbody ü", false},
		{"Subject: ü", true},
	} {
		require.Equal(t, tc.want, headerHasUTF8([]byte(tc.in)), tc.in)
	}
}

func TestPrepare(t *testing.T) {
	env := Envelope{
		From: "bounces@rp.Example.test",
		To:   []string{"a@example.test", "bad", "ü@example.test"},
		Data: []byte("Subject: x\n\nline\r\nbody é\n"),
	}
	results := make([]Result, len(env.To))
	m, pending := prepare(env, results)
	require.Equal(t, []int{0, 2}, pending)
	require.Equal(t, "bounces@rp.example.test", m.from)
	require.Equal(t, Bounced, results[1].Status)
	require.Equal(t, "5.1.3", results[1].EnhancedCode)
	require.True(t, m.utf8Rcpts[2])
	require.False(t, m.needsUTF8())
	require.True(t, m.eightBit)
	require.Equal(t, len(env.Data)+3, m.size, "three bare LFs become CRLF")

	results = make([]Result, 2)
	_, pending = prepare(Envelope{From: "bad from", To: []string{"a@b.test", "c@b.test"}}, results)
	require.Empty(t, pending)
	for _, r := range results {
		require.Equal(t, Bounced, r.Status)
		require.Equal(t, "5.1.7", r.EnhancedCode)
	}
}

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{"minimal", Config{Hostname: "mta.example.test"}, ""},
		{"relay", Config{Hostname: "h", Relay: "smtp://relay.test:2525"}, ""},
		{"relay default port", Config{Hostname: "h", Relay: "smtp://relay.test"}, ""},
		{"no hostname", Config{}, "hostname is required"},
		{"hostname with space", Config{Hostname: "a b"}, "printable ASCII"},
		{"port", Config{Hostname: "h", Port: 70000}, "out of range"},
		{"relay scheme", Config{Hostname: "h", Relay: "smtps://relay.test"}, "only smtp"},
		{"relay credentials", Config{Hostname: "h", Relay: "smtp://u:p@relay.test"}, "credentials"},
		{"relay path", Config{Hostname: "h", Relay: "smtp://relay.test/x"}, "smtp://host[:port]"},
		{"relay port", Config{Hostname: "h", Relay: "smtp://relay.test:0"}, "out of range"},
		{"source ip", Config{Hostname: "h", SourceIP: net.IP{1, 2}}, "invalid"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(tc.cfg)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

func TestTimeoutDefaults(t *testing.T) {
	got := Timeouts{Mail: 1}.withDefaults()
	require.Equal(t, Timeouts{
		Connect: 30e9, Greeting: 300e9, Command: 300e9, Mail: 1, Rcpt: 300e9,
		DataInit: 120e9, DataBlock: 180e9, DataFinal: 600e9,
	}, got)
}

func TestStatusString(t *testing.T) {
	require.Equal(t, "delivered", Delivered.String())
	require.Equal(t, "deferred", Deferred.String())
	require.Equal(t, "bounced", Bounced.String())
	require.Equal(t, "Status(0)", Status(0).String())
}
