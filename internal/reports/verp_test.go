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

	// Today's unsigned form (delivery.DomainReturnPath) still parses
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

func TestRecipientReturnPath(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := uuid.MustParse("0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60")

	for _, i := range []int{0, 1, 65535} {
		addr, err := RecipientReturnPath(key, id, i, "Send.Example.com")
		require.NoError(t, err)
		local, host, _ := strings.Cut(addr, "@")
		assert.LessOrEqual(t, len(local), 64, "RFC 5321 §4.5.3.1.1 local-part limit, index %d", i)
		assert.Equal(t, "send.example.com", host)
		assert.Regexp(t, `^bounces\+[a-z2-7]{45}$`, local)
		for _, a := range []string{addr, strings.ToUpper(addr), "<" + addr + ">"} {
			v, ok := ParseVERP(a)
			require.True(t, ok, a)
			assert.Equal(t, VERP{EmailID: id, PerRecipient: true, Index: i, Host: "send.example.com", code: v.code}, v)
			assert.True(t, v.Verify(key), a)
			assert.False(t, v.Verify([]byte("another key, 32 bytes long......")))
		}
	}
	_, err := RecipientReturnPath(key, id, 65536, "send.example.com")
	require.Error(t, err)
	_, err = RecipientReturnPath(key, id, -1, "send.example.com")
	require.Error(t, err)

	// The code of one recipient does not name another: each index has
	// its own MAC, and the per-email signature does not verify as one.
	a0, err := RecipientReturnPath(key, id, 0, "send.example.com")
	require.NoError(t, err)
	a1, err := RecipientReturnPath(key, id, 1, "send.example.com")
	require.NoError(t, err)
	v0, _ := ParseVERP(a0)
	v1, _ := ParseVERP(a1)
	v0.Index = 1
	assert.False(t, v0.Verify(key), "recipient 0's MAC with index 1")
	v1.Index = 0
	assert.False(t, v1.Verify(key), "recipient 1's MAC with index 0")
	// Nor does a mailto unsubscribe code of the same email and index
	// (another purpose label, and another prefix).
	_, ok := ParseVERP(strings.Replace(a0, "bounces+", "unsubscribe+", 1))
	assert.False(t, ok)
}

// TestSignatureIsStable pins the signature scheme: a change would orphan
// the bounces of every email sent before it.
func TestSignatureIsStable(t *testing.T) {
	id := uuid.MustParse(fixtureEmailID)
	assert.Equal(t, "e7g2owtvx5hqf54z", Sign(fixtureKey, id))
	rp, err := RecipientReturnPath(fixtureKey, id, 1, "send.example.com")
	require.NoError(t, err)
	assert.Equal(t, "bounces+agiklyt4dn6t5h2kdmwd2ts7maaadk263b24mew6zhgyg@send.example.com", rp)
}

func FuzzParseVERP(f *testing.F) {
	f.Add("bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60-e7g2owtvx5hqf54z@send.example.com", []byte("k"))
	f.Add("bounces+0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60@send.example.com", []byte(""))
	f.Add("<BOUNCES+@>", []byte("key"))
	rp, err := RecipientReturnPath(fixtureKey, uuid.MustParse(fixtureEmailID), 7, "send.example.com")
	require.NoError(f, err)
	f.Add(rp, fixtureKey)
	f.Add(strings.ToUpper(rp), []byte("k"))
	f.Fuzz(func(t *testing.T, addr string, key []byte) {
		v, ok := ParseVERP(addr)
		if !ok {
			return
		}
		verified := v.Verify(key)
		require.False(t, verified && len(key) == 0, "nothing verifies without a key")
		// What parses formats back to an address that parses the same.
		if v.PerRecipient {
			require.Empty(t, v.Signature)
			a, err := RecipientReturnPath(key, v.EmailID, v.Index, v.Host)
			require.NoError(t, err)
			again, ok := ParseVERP(a)
			require.True(t, ok)
			require.Equal(t, v.EmailID, again.EmailID)
			require.Equal(t, v.Index, again.Index)
			require.True(t, !again.Verify(key) || len(key) > 0)
			local, _, _ := strings.Cut(a, "@")
			require.LessOrEqual(t, len(local), 64)
			return
		}
		again, ok := ParseVERP(SignedReturnPath(key, v.EmailID, "h.example"))
		require.True(t, ok)
		require.Equal(t, v.EmailID, again.EmailID)
		require.True(t, again.Verify(key))
	})
}
