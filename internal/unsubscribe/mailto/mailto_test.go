package mailto

import (
	"encoding/base32"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

var (
	testKey  = []byte("0123456789abcdef0123456789abcdef")
	otherKey = []byte("fedcba9876543210fedcba9876543210")
)

func TestMakeParseVerify(t *testing.T) {
	id := uuid.MustParse("0190f2a4-5b6c-7d8e-9f01-23456789abcd")
	addr, err := Make(testKey, id, 1, "Send.Shop.Test")
	require.NoError(t, err)
	local, host, _ := strings.Cut(addr, "@")
	require.Equal(t, "send.shop.test", host)
	require.LessOrEqual(t, len(local), 64, "RFC 5321 §4.5.3.1.1")
	require.Equal(t, strings.ToLower(local), local)

	a, ok := Parse(addr)
	require.True(t, ok)
	require.Equal(t, id, a.EmailID)
	require.Equal(t, 1, a.Index)
	require.Equal(t, "send.shop.test", a.Host)
	require.True(t, a.Verify(testKey))
	require.False(t, a.Verify(otherKey))
	require.False(t, a.Verify(nil))

	// Upper-cased by an MTA, in angle brackets: the same address.
	b, ok := Parse("<" + strings.ToUpper(addr) + ">")
	require.True(t, ok)
	require.Equal(t, a, b)
	require.True(t, b.Verify(testKey))

	_, err = Make(testKey, id, MaxIndex+1, "h")
	require.Error(t, err)
	_, err = Make(testKey, id, -1, "h")
	require.Error(t, err)
}

func TestForged(t *testing.T) {
	id := uuid.MustParse("0190f2a4-5b6c-7d8e-9f01-23456789abcd")
	code, err := Code(testKey, id, 3)
	require.NoError(t, err)
	other := swapIndex(t, code, 4)
	require.NotEqual(t, code, other)

	for name, tc := range map[string]struct {
		addr  string
		parse bool
	}{
		"valid":             {Prefix + code + "@h.test", true},
		"another key":       {Prefix + mustCode(t, otherKey, id, 3) + "@h.test", true},
		"another recipient": {Prefix + swapIndex(t, code, 4) + "@h.test", true},
		"flipped mac":       {Prefix + code[:40] + flip(code[40]) + code[41:] + "@h.test", true},
		"flipped id":        {Prefix + flip(code[0]) + code[1:] + "@h.test", true},
		"short":             {Prefix + code[:44] + "@h.test", false},
		"long":              {Prefix + code + "a@h.test", false},
		"not base32":        {Prefix + code[:44] + "1@h.test", false},
		"bad padding bits":  {Prefix + code[:44] + "b@h.test", false},
		"no prefix":         {"bounces+" + code + "@h.test", false},
		"no host":           {Prefix + code + "@", false},
		"no at":             {Prefix + code, false},
		"empty":             {"", false},
	} {
		t.Run(name, func(t *testing.T) {
			a, ok := Parse(tc.addr)
			require.Equal(t, tc.parse, ok)
			if ok {
				require.Equal(t, name == "valid", a.Verify(testKey))
			}
		})
	}
}

func mustCode(t *testing.T, key []byte, id uuid.UUID, i int) string {
	c, err := Code(key, id, i)
	require.NoError(t, err)
	return c
}

// swapIndex returns code with the recipient index changed and the MAC
// kept.
func swapIndex(t *testing.T, code string, i int) string {
	enc := base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
	raw, err := enc.DecodeString(code)
	require.NoError(t, err)
	raw[16], raw[17] = byte(i>>8), byte(i) // after the email id
	return enc.EncodeToString(raw)
}

func flip(c byte) string {
	if c == 'a' {
		return "b"
	}
	return "a"
}

func FuzzParse(f *testing.F) {
	id := uuid.MustParse("0190f2a4-5b6c-7d8e-9f01-23456789abcd")
	addr, _ := Make(testKey, id, 2, "send.shop.test")
	f.Add(addr)
	f.Add(strings.ToUpper(addr))
	f.Add("unsubscribe+@x")
	f.Add("bounces+x@y")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok := Parse(s)
		if !ok {
			return
		}
		// Whatever parses round-trips to the same code, and verifies
		// only when it is the code made under the key.
		c, err := Code(testKey, a.EmailID, a.Index)
		if err != nil {
			t.Fatal(err)
		}
		local, _, _ := strings.Cut(strings.ToLower(strings.Trim(strings.TrimSpace(s), "<>")), "@")
		if a.Verify(testKey) != (local == Prefix+c) {
			t.Fatalf("Verify disagrees with the made code for %q", s)
		}
	})
}
