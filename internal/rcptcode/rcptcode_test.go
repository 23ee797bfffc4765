package rcptcode

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestCode(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	id := uuid.MustParse("0190a5e2-7c1b-7d3e-9f4a-1b2c3d4e5f60")
	for _, i := range []int{0, 1, 300, MaxIndex} {
		c, err := Make(key, "purpose a", id, i)
		require.NoError(t, err)
		require.Len(t, c, Len)
		require.Regexp(t, `^[a-z2-7]+$`, c, "a lower-case dot-atom")
		got, ok := Parse(c)
		require.True(t, ok)
		require.Equal(t, id, got.EmailID)
		require.Equal(t, i, got.Index)
		require.True(t, got.Verify(key, "purpose a"))
		require.False(t, got.Verify(key, "purpose b"), "another purpose")
		require.False(t, got.Verify([]byte("another key, 32 bytes long......"), "purpose a"))
		require.False(t, got.Verify(nil, "purpose a"), "no key")
		moved := got
		moved.Index = (i + 1) % (MaxIndex + 1)
		require.False(t, moved.Verify(key, "purpose a"), "the MAC covers the index")
	}
	for _, i := range []int{-1, MaxIndex + 1} {
		_, err := Make(key, "purpose a", id, i)
		require.Error(t, err, i)
	}
	c, err := Make(key, "purpose a", id, 7)
	require.NoError(t, err)
	for name, bad := range map[string]string{
		"empty":           "",
		"short":           c[:Len-1],
		"long":            c + "a",
		"upper case":      strings.ToUpper(c),
		"not base32":      "1" + c[1:],
		"unused bits set": c[:Len-1] + "7",
		"a uuid":          id.String(),
	} {
		_, ok := Parse(bad)
		require.False(t, ok, name)
	}
}

func FuzzParse(f *testing.F) {
	c, err := Make([]byte("k"), "l", uuid.New(), 3)
	require.NoError(f, err)
	f.Add(c)
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := Parse(s)
		if !ok {
			return
		}
		// What parses is exactly one code: made again, it is the same
		// but for the MAC.
		again, err := Make([]byte("k"), "l", got.EmailID, got.Index)
		require.NoError(t, err)
		n := (idLen + indexLen) * 8 / 5 // characters that hold only id and index
		require.Equal(t, s[:n], again[:n], "id and index encode alike")
		require.Equal(t, got.Verify([]byte("k"), "l"), s == again)
	})
}
