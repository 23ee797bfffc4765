package delivery

import (
	"crypto"
	"errors"
	"io"
	"testing"

	"github.com/google/uuid"
)

// countedSigner is a distinct, comparable crypto.Signer.
type countedSigner struct{ n int }

func (s *countedSigner) Public() crypto.PublicKey { return s.n }
func (s *countedSigner) Sign(io.Reader, []byte, crypto.SignerOpts) ([]byte, error) {
	return nil, errors.New("not a key")
}

func TestSignerCacheOpensEachKeyOnce(t *testing.T) {
	t.Parallel()
	c := newSignerCache()
	d1, d2 := uuid.New(), uuid.New()
	opens := 0
	open := func() (crypto.Signer, error) {
		opens++
		return &countedSigner{n: opens}, nil
	}
	first, err := c.get(d1, []byte("sealed-1"), open)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.get(d1, []byte("sealed-1"), open)
	if err != nil {
		t.Fatal(err)
	}
	if opens != 1 || again != first {
		t.Fatalf("the same key was opened %d times (want 1) or gave another signer", opens)
	}
	// A rotated key of the same domain, and the same sealed bytes under
	// another domain, are other keys.
	rotated, _ := c.get(d1, []byte("sealed-2"), open)
	other, _ := c.get(d2, []byte("sealed-1"), open)
	if opens != 3 || rotated == first || other == first {
		t.Fatalf("opens = %d, want 3, with new signers for a rotated key and another domain", opens)
	}
}

func TestSignerCacheKeepsNoFailure(t *testing.T) {
	t.Parallel()
	c := newSignerCache()
	d := uuid.New()
	boom := errors.New("no master key")
	if _, err := c.get(d, []byte("k"), func() (crypto.Signer, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want the open error", err)
	}
	k := &countedSigner{}
	s, err := c.get(d, []byte("k"), func() (crypto.Signer, error) { return k, nil })
	if err != nil || s != crypto.Signer(k) {
		t.Fatalf("after a failed open the key is opened again: got %v, %v", s, err)
	}
}

func TestSignerCacheIsBounded(t *testing.T) {
	t.Parallel()
	c := newSignerCache()
	open := func() (crypto.Signer, error) { return &countedSigner{}, nil }
	for range maxCachedSigners + 10 {
		if _, err := c.get(uuid.New(), []byte("k"), open); err != nil {
			t.Fatal(err)
		}
	}
	if n := c.keys.Len(); n > maxCachedSigners {
		t.Fatalf("%d cached signers, want at most %d", n, maxCachedSigners)
	}
}
