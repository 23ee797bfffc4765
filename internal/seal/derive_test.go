package seal

import (
	"bytes"
	"testing"
)

func TestDeriveKeyIsPerPurposeAndStable(t *testing.T) {
	k1 := bytes.Repeat([]byte{1}, KeySize)
	k2 := bytes.Repeat([]byte{2}, KeySize)
	b1, err := New(k1)
	if err != nil {
		t.Fatal(err)
	}
	b1again, _ := New(k1)
	b2, _ := New(k2)
	a := b1.DeriveKey("a")
	if len(a) != KeySize {
		t.Fatalf("derived %d bytes", len(a))
	}
	if !bytes.Equal(a, b1again.DeriveKey("a")) {
		t.Fatal("the same master key and purpose must derive the same key")
	}
	if bytes.Equal(a, b1.DeriveKey("b")) || bytes.Equal(a, b2.DeriveKey("a")) || bytes.Equal(a, k1) {
		t.Fatal("another purpose or master key must derive another key, never the master key itself")
	}
}
