package seal

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSealOpen(t *testing.T) {
	k, err := NewKey()
	require.NoError(t, err)
	key, err := ParseKey(k)
	require.NoError(t, err)
	b, err := New(key)
	require.NoError(t, err)

	s1, err := b.Seal([]byte("secret"), []byte("row-1"))
	require.NoError(t, err)
	s2, err := b.Seal([]byte("secret"), []byte("row-1"))
	require.NoError(t, err)
	require.NotEqual(t, s1, s2, "random nonces")
	require.False(t, bytes.Contains(s1, []byte("secret")))

	pt, err := b.Open(s1, []byte("row-1"))
	require.NoError(t, err)
	require.Equal(t, "secret", string(pt))

	_, err = b.Open(s1, []byte("row-2"))
	require.ErrorIs(t, err, ErrOpen, "bound to its row")
	tampered := bytes.Clone(s1)
	tampered[len(tampered)-1] ^= 1
	_, err = b.Open(tampered, []byte("row-1"))
	require.ErrorIs(t, err, ErrOpen)
	_, err = b.Open([]byte{1, 2, 3}, nil)
	require.ErrorIs(t, err, ErrOpen)

	other, err := New(bytes.Repeat([]byte{7}, KeySize))
	require.NoError(t, err)
	_, err = other.Open(s1, []byte("row-1"))
	require.ErrorIs(t, err, ErrOpen, "another master key")
}

func TestParseKey(t *testing.T) {
	raw := bytes.Repeat([]byte{0xab}, KeySize)
	for name, tc := range map[string]struct {
		in string
		ok bool
	}{
		"hex":        {hex.EncodeToString(raw), true},
		"base64":     {"q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=", true},
		"base64 raw": {"q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s", true},
		"spaces":     {"  q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s=\n", true},
		"short":      {"q6urq6ur", false},
		"not base64": {"!!!!", false},
		"empty":      {"", false},
	} {
		t.Run(name, func(t *testing.T) {
			k, err := ParseKey(tc.in)
			if !tc.ok {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, raw, k)
		})
	}
	_, err := New([]byte("short"))
	require.Error(t, err)
}

func TestLoadOrCreateKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "master.key")
	k1, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	k2, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, k1, k2, "the second run reads the first key")

	require.Len(t, k1, 1)

	require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o600))
	_, err = LoadOrCreateKeyFile(path)
	require.Error(t, err)
}
