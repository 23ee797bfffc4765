// Package password hashes dashboard passwords with argon2id (RFC 9106) in
// the PHC string format. Each hash holds its memory (64 MiB by default)
// while it runs, so hashes run in a Pool that bounds how many run at once
// and how many callers may wait for one. The Pool also sets the cost of
// the hashes it makes; a process shares one Pool (Shared) everywhere it
// hashes.
package password

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// The defaults of PoolConfig: RFC 9106 §4 second recommended option,
// 64 MiB and 3 passes; two lanes, 32-byte keys.
const (
	defaultMemory = 64 * 1024 // KiB
	defaultPasses = 3
	threads       = 2
	keyLen        = 32
)

// ErrMalformed means a stored hash cannot be read.
var ErrMalformed = errors.New("malformed password hash")

// shared is the Pool every process uses. It is the one piece of package
// state, never replaced: what it bounds, memory, belongs to the process,
// and a pool per caller would multiply the bound.
var shared = NewPool(PoolConfig{})

// Shared returns the process's Pool, with the default cost (RFC 9106).
func Shared() *Pool { return shared }

// Hash returns the PHC string of an argon2id hash of pw with a random salt.
// It waits for a slot as the Pool's documentation says.
func (p *Pool) Hash(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("reading salt: %w", err)
	}
	if err := p.acquire(ctx); err != nil {
		return "", err
	}
	defer p.release()
	key := p.key([]byte(pw), salt, p.passes, p.memory, threads, keyLen)
	return p.phc(salt, key), nil
}

// phc formats a hash made with the Pool's parameters.
func (p *Pool) phc(salt, key []byte) string {
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, p.memory, p.passes, threads,
		enc.EncodeToString(salt), enc.EncodeToString(key))
}

// Decoy returns a hash with the Pool's parameters that no known password
// matches, for checking a password against when there is no account, so
// that the answer takes as long as for a real one. A caller that checks
// against it must still refuse when Verify says it matched.
func (p *Pool) Decoy() string { return p.phc(decoySalt, decoyKey) }

// The salt and key of Decoy: those of an argon2id hash of a random
// password, long forgotten.
var decoySalt, decoyKey = mustDecode("AqHSPjAd0P5pokvZKMSSlQ"), mustDecode("sJeOv3uPCMbLbahRyiWsfbpX6F8I/tm91A7hzw8NLr8")

func mustDecode(s string) []byte {
	b, err := base64.RawStdEncoding.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Verify reports whether pw matches the PHC string hash, in constant time,
// with the parameters the hash names. It waits for a slot as the Pool's
// documentation says; a malformed hash fails at once. Hashes asking for
// more memory than the Pool's Hash uses, or more than four times its
// passes, are malformed too: the Pool's bound assumes Hash's parameters.
func (p *Pool) Verify(ctx context.Context, pw, hash string) (bool, error) {
	ph, err := p.parse(hash)
	if err != nil {
		return false, err
	}
	if err := p.acquire(ctx); err != nil {
		return false, err
	}
	defer p.release()
	got := p.key([]byte(pw), ph.salt, ph.t, ph.m, ph.p, uint32(len(ph.key)))
	return subtle.ConstantTimeCompare(got, ph.key) == 1, nil
}

// phc is a parsed argon2id PHC string.
type phc struct {
	m, t      uint32
	p         uint8
	salt, key []byte
}

// parse reads a PHC string, refusing costs beyond the Pool's (Verify).
func (p *Pool) parse(hash string) (phc, error) {
	var h phc
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return h, ErrMalformed
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return h, ErrMalformed
	}
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &h.m, &h.t, &h.p); err != nil {
		return h, ErrMalformed
	}
	// RFC 9106 §3.1: at least one lane, at least 8 KiB per lane, at least
	// one pass (argon2 panics below these).
	if h.p < 1 || h.t < 1 || h.m < 8*uint32(h.p) || h.m > p.memory || h.t > 4*p.passes {
		return h, ErrMalformed
	}
	enc := base64.RawStdEncoding
	var err error
	if h.salt, err = enc.DecodeString(parts[4]); err != nil {
		return h, ErrMalformed
	}
	if h.key, err = enc.DecodeString(parts[5]); err != nil || len(h.key) == 0 {
		return h, ErrMalformed
	}
	return h, nil
}
