package egress

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPolicyAllows(t *testing.T) {
	listed := Policy{Allow: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16"), netip.MustParsePrefix("fd00::5/128")}}
	for _, tc := range []struct {
		policy Policy
		ip     string
		want   bool
	}{
		{Policy{}, "93.184.215.14", true},
		{Policy{}, "127.0.0.1", false},
		{Policy{}, "10.1.2.3", false},
		{Policy{}, "169.254.169.254", false},
		{Policy{AllowPrivate: true}, "169.254.169.254", true},
		{listed, "10.1.2.3", true},
		{listed, "::ffff:10.1.2.3", true}, // judged as the IPv4 address
		{listed, "10.2.0.1", false},
		{listed, "fd00::5", true},
		{listed, "fd00::6", false},
		{listed, "93.184.215.14", true},
	} {
		require.Equal(t, tc.want, tc.policy.Allows(netip.MustParseAddr(tc.ip)), "%+v %s", tc.policy, tc.ip)
	}
}

func TestParseAllowList(t *testing.T) {
	got, err := ParseAllowList(" 10.0.0.5, 192.168.10.0/24,,fd00::/8, ::ffff:127.0.0.0/104 ")
	require.NoError(t, err)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.5/32"), netip.MustParsePrefix("192.168.10.0/24"),
		netip.MustParsePrefix("fd00::/8"), netip.MustParsePrefix("127.0.0.0/8")}, got)
	got, err = ParseAllowList("")
	require.NoError(t, err)
	require.Empty(t, got)
	for in, want := range map[string]string{
		"mx.example.com":  "not an IP address",
		"10.0.0.1/33":     "not a CIDR prefix",
		"10.0.0.1/8":      "did you mean 10.0.0.0/8",
		"fe80::1%eth0":    "not an IP address",
		"10.0.0.1,banana": `"banana"`,
	} {
		_, err := ParseAllowList(in)
		require.ErrorContains(t, err, want, in)
	}
}

// A listed private address is reached over https; plain http stays
// refused (only AllowPrivate allows it).
func TestFetchAllowList(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "inside")
	}))
	defer srv.Close()
	c := New(Config{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	c.transport.TLSClientConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	defer c.transport.CloseIdleConnections()
	body, _, err := c.Fetch(t.Context(), srv.URL, 100)
	require.NoError(t, err)
	require.Equal(t, "inside", string(body))
	_, _, err = c.Fetch(t.Context(), srv.URL, 5)
	require.ErrorIs(t, err, ErrTooLarge)
	require.EqualError(t, err, "egress: GET "+srv.URL+": body is larger than 5 bytes")
	require.ErrorIs(t, c.control("tcp4", "127.0.0.2:443", nil), ErrBlocked, "only what is listed")
	_, _, err = c.Fetch(t.Context(), "http://127.0.0.1:1/", 100)
	require.ErrorIs(t, err, ErrBlocked)
}

// onlyReader hides the WriterTo of its reader: readLimited sees reads.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

func TestReadLimited(t *testing.T) {
	const limit = 1_000_000
	body := bytes.Repeat([]byte("x"), limit)
	for _, size := range []int64{-1, limit} {
		got, err := readLimited(onlyReader{bytes.NewReader(body)}, limit, size)
		require.NoError(t, err)
		require.Equal(t, body, got)
		require.LessOrEqual(t, cap(got), limit+1, "the buffer never grows past the limit")
	}
	for _, size := range []int64{-1, 10} { // unknown, or a server that says less than it sends
		_, err := readLimited(onlyReader{bytes.NewReader(append(body, 'y'))}, limit, size)
		require.ErrorIs(t, err, ErrTooLarge)
	}
	got, err := readLimited(onlyReader{bytes.NewReader(nil)}, limit, 0)
	require.NoError(t, err)
	require.Empty(t, got)
}
