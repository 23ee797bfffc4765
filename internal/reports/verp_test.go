package reports

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVERP(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := uuid.MustParse("0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60")
	other := uuid.MustParse("0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f61")

	addr := SignedReturnPath(key, id, "send.example.com")
	local, _, _ := strings.Cut(addr, "@")
	assert.LessOrEqual(t, len(local), 64, "RFC 5321 §4.5.3.1.1 local-part limit")
	assert.Regexp(t, `^bounces\+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-[a-z2-7]{16}@send\.example\.com$`, addr)

	v, ok := ParseVERP(addr)
	require.True(t, ok)
	assert.Equal(t, id, v.EmailID)
	assert.Equal(t, "send.example.com", v.Host)
	assert.True(t, v.Verify(key))
	assert.False(t, v.Verify([]byte("another key")), "another key")

	// MTAs that change the case of local parts do not break it.
	for _, a := range []string{strings.ToUpper(addr), "<" + addr + ">", " " + addr + " "} {
		v, ok := ParseVERP(a)
		require.True(t, ok, a)
		assert.Equal(t, id, v.EmailID, a)
		assert.True(t, v.Verify(key), a)
	}

	// A forged DSN cannot name another email with a signature it copied:
	// the signature is of the id.
	forged := strings.Replace(addr, id.String(), other.String(), 1)
	v, ok = ParseVERP(forged)
	require.True(t, ok)
	assert.Equal(t, other, v.EmailID)
	assert.False(t, v.Verify(key))

	// A changed signature fails.
	sig := Sign(key, id)
	flipped := []byte(sig)
	if flipped[0] == 'a' {
		flipped[0] = 'b'
	} else {
		flipped[0] = 'a'
	}
	v, ok = ParseVERP(strings.Replace(addr, sig, string(flipped), 1))
	require.True(t, ok)
	assert.False(t, v.Verify(key))

	// Today's unsigned form (activities.DomainReturnPath) still parses
	// and never verifies.
	v, ok = ParseVERP("bounces+" + id.String() + "@send.example.com")
	require.True(t, ok)
	assert.Equal(t, id, v.EmailID)
	assert.Equal(t, "", v.Signature)
	assert.False(t, v.Verify(key))

	for _, bad := range []string{
		"",
		"billing@example.com",
		"bounces@send.example.com",
		"bounces+@send.example.com",
		"bounces+" + id.String(),
		"bounces+" + id.String() + "@",
		"bounces+not-a-uuid-not-a-uuid-not-a-uuid-xx@send.example.com",
		"bounces+" + id.String() + "-short@send.example.com",
		"bounces+" + id.String() + "-" + sig + "x@send.example.com",
		"bounces+" + id.String() + "-" + strings.Repeat("1", 16) + "@send.example.com", // 1 is not base32
		"bounces+" + id.String() + "x" + sig + "@send.example.com",
		"bounces+" + id.String() + "-" + sig + "@send example.com",
		"xbounces+" + id.String() + "@send.example.com",
	} {
		_, ok := ParseVERP(bad)
		assert.False(t, ok, bad)
	}
}

// TestSignatureIsStable pins the signature scheme: a change would orphan
// the bounces of every email sent before it.
func TestSignatureIsStable(t *testing.T) {
	id := uuid.MustParse(fixtureEmailID)
	assert.Equal(t, "e7g2owtvx5hqf54z", Sign(fixtureKey, id))
}

func FuzzParseVERP(f *testing.F) {
	f.Add("bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com", []byte("k"))
	f.Add("bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60@send.example.com", []byte(""))
	f.Add("<BOUNCES+@>", []byte("key"))
	f.Fuzz(func(t *testing.T, addr string, key []byte) {
		v, ok := ParseVERP(addr)
		if !ok {
			return
		}
		_ = v.Verify(key)
		// What parses formats back to an address that parses the same.
		again, ok := ParseVERP(SignedReturnPath(key, v.EmailID, "h.example"))
		require.True(t, ok)
		require.Equal(t, v.EmailID, again.EmailID)
		require.True(t, again.Verify(key))
	})
}
