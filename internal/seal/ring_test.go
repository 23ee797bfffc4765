package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

// sealV1 writes a value the way Box.Seal did before keyrings (version 1:
// no key id), as the databases of existing installations hold them.
func sealV1(t *testing.T, key, plaintext, ad []byte) []byte {
	t.Helper()
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	nonce := make([]byte, aead.NonceSize())
	_, err = rand.Read(nonce)
	require.NoError(t, err)
	return aead.Seal(append([]byte{1}, nonce...), nonce, plaintext, ad)
}

func TestRingOpensOldKeysAndSealsWithTheCurrent(t *testing.T) {
	a, b, c := testKey(0xa), testKey(0xb), testKey(0xc)
	boxA, err := New(a)
	require.NoError(t, err)
	underA, err := boxA.Seal([]byte("dkim key"), []byte("row"))
	require.NoError(t, err)
	require.Equal(t, byte(2), underA[0])
	id, ok := SealedUnder(underA)
	require.True(t, ok)
	require.Equal(t, IDOf(a), id)
	require.Equal(t, IDOf(a), boxA.CurrentID())
	v1 := sealV1(t, a, []byte("old secret"), []byte("row"))
	_, ok = SealedUnder(v1)
	require.False(t, ok, "version 1 names no key")

	ring, err := NewRing(b, a)
	require.NoError(t, err)
	require.Equal(t, []KeyID{IDOf(b), IDOf(a)}, ring.KeyIDs())
	pt, err := ring.Open(underA, []byte("row"))
	require.NoError(t, err)
	require.Equal(t, "dkim key", string(pt))
	pt, err = ring.Open(v1, []byte("row"))
	require.NoError(t, err, "version 1 opens with a previous key")
	require.Equal(t, "old secret", string(pt))
	_, err = ring.Open(underA, []byte("other row"))
	require.ErrorIs(t, err, ErrOpen)

	underB, err := ring.Seal([]byte("new"), []byte("row"))
	require.NoError(t, err)
	require.True(t, ring.IsCurrent(underB))
	require.True(t, bytes.HasPrefix(underB, ring.CurrentPrefix()))
	require.False(t, bytes.HasPrefix(underA, ring.CurrentPrefix()))
	require.False(t, ring.IsCurrent(underA))
	require.False(t, ring.IsCurrent(v1))
	_, err = boxA.Open(underB, []byte("row"))
	require.ErrorIs(t, err, ErrOpen, "the old key alone cannot open what the new one sealed")

	// Reseal moves values to the current key and leaves current ones.
	for _, old := range [][]byte{underA, v1} {
		out, changed, err := ring.Reseal(old, []byte("row"))
		require.NoError(t, err)
		require.True(t, changed)
		require.True(t, ring.IsCurrent(out))
		onlyB, err := New(b)
		require.NoError(t, err)
		_, err = onlyB.Open(out, []byte("row"))
		require.NoError(t, err, "opens with the new key alone")
	}
	out, changed, err := ring.Reseal(underB, []byte("row"))
	require.NoError(t, err)
	require.False(t, changed)
	require.Equal(t, underB, out)

	// A key outside the ring opens nothing, of either version.
	boxC, err := New(c)
	require.NoError(t, err)
	for _, v := range [][]byte{underA, underB, v1} {
		_, err = boxC.Open(v, []byte("row"))
		require.ErrorIs(t, err, ErrOpen)
		_, _, err = boxC.Reseal(v, []byte("row"))
		require.ErrorIs(t, err, ErrOpen)
	}
	// A forged key id is not trusted: the value still has to open.
	forged := bytes.Clone(underA)
	copy(forged[1:], IDOf(c).bytes())
	_, err = ring.Open(forged, []byte("row"))
	require.ErrorIs(t, err, ErrOpen)

	_, err = NewRing(a, b, a)
	require.ErrorContains(t, err, "repeats")
	_, err = NewRing(a, []byte("short"))
	require.Error(t, err)
}

func (id KeyID) bytes() []byte { return id[:] }

func TestDerivedKeysArePinnable(t *testing.T) {
	a, b := testKey(1), testKey(2)
	boxA, _ := New(a)
	ring, _ := NewRing(b, a)
	require.NotEqual(t, boxA.DeriveKey("p"), ring.DeriveKey("p"), "derived from the current key")
	require.Equal(t, boxA.DeriveKey("p"), ring.Oldest().DeriveKey("p"))
	require.Equal(t, []KeyID{IDOf(a)}, ring.Oldest().KeyIDs())
	pinned := ring.WithKeys(map[string][]byte{"p": boxA.DeriveKey("p")})
	require.Equal(t, boxA.DeriveKey("p"), pinned.DeriveKey("p"), "a pinned key survives the rotation")
	require.Equal(t, ring.DeriveKey("q"), pinned.DeriveKey("q"), "other purposes still derive")
	s, err := boxA.Seal([]byte("x"), nil)
	require.NoError(t, err)
	_, err = pinned.Open(s, nil)
	require.NoError(t, err, "the same ring")
}

func TestKeyFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "master.key")
	first, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.Len(t, first, 1)

	id, err := PrependKeyFile(path)
	require.NoError(t, err)
	keys, err := ReadKeyFile(path)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	require.Equal(t, id, IDOf(keys[0]), "the new key is first, the current one")
	require.Equal(t, first[0], keys[1], "the old key stays, as a previous one")
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	again, err := LoadOrCreateKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, keys, again)

	kept, err := TrimKeyFile(path)
	require.NoError(t, err)
	require.Equal(t, id, kept)
	keys, err = ReadKeyFile(path)
	require.NoError(t, err)
	require.Len(t, keys, 1)
	require.Equal(t, id, IDOf(keys[0]))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file is left behind")

	_, err = ReadKeyFile(filepath.Join(t.TempDir(), "none"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.NoError(t, os.WriteFile(path, []byte("# only a comment\n"), 0o600))
	_, err = ReadKeyFile(path)
	require.ErrorContains(t, err, "no key")
}

func TestParseKeys(t *testing.T) {
	a, b := strings.Repeat("ab", KeySize), strings.Repeat("cd", KeySize)
	keys, err := ParseKeys("# keys\n" + a + "\n\n " + b + " \n")
	require.NoError(t, err)
	require.Len(t, keys, 2)
	keys, err = ParseKeys(a + ", " + b)
	require.NoError(t, err)
	require.Len(t, keys, 2)
	_, err = ParseKeys(a + ",nope")
	require.ErrorContains(t, err, "key 2")
}

// FuzzOpen feeds arbitrary bytes to Open: it never panics and opens
// nothing that was not sealed.
func FuzzOpen(f *testing.F) {
	ring, err := NewRing(testKey(3), testKey(4))
	if err != nil {
		f.Fatal(err)
	}
	s, _ := ring.Seal([]byte("x"), []byte("ad"))
	f.Add(s, []byte("ad"))
	f.Add([]byte{2, 0, 0, 0, 0}, []byte(nil))
	f.Add([]byte{1}, []byte(nil))
	f.Add([]byte{}, []byte(nil))
	f.Fuzz(func(t *testing.T, sealed, ad []byte) {
		pt, err := ring.Open(sealed, ad)
		// The only value that opens is a seal of "x" for "ad" (each fuzz
		// worker seals its own seed, with its own nonce).
		if err == nil && !(bytes.Equal(ad, []byte("ad")) && string(pt) == "x") {
			t.Fatalf("opened %x with ad %x", sealed, ad)
		}
		_, _, _ = ring.Reseal(sealed, ad)
		_, _ = SealedUnder(sealed)
	})
}
