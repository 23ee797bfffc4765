package activities

import (
	"crypto"
	"crypto/sha256"
	"sync"

	"github.com/google/uuid"
)

// maxCachedSigners bounds signerCache; a full cache starts again empty.
const maxCachedSigners = 4096

// signerCache keeps the opened DKIM keys of domains, so that building a
// message does not unseal and parse its domain's key (with an RSA key's
// precomputation) every time: measured at about a tenth of the CPU of a
// real delivery's activities. An entry is keyed by the domain and a hash
// of its sealed key, so a rotated key is a new entry and an old one is
// never used for it. It is shared by copies of Activities.
type signerCache struct {
	mu   sync.Mutex
	keys map[signerKey]crypto.Signer
}

type signerKey struct {
	domain uuid.UUID
	sealed [sha256.Size]byte
}

func newSignerCache() *signerCache {
	return &signerCache{keys: map[signerKey]crypto.Signer{}}
}

// get returns the cached signer of the sealed key of domain, or opens it
// with open and keeps it when that succeeds.
func (c *signerCache) get(domain uuid.UUID, sealed []byte, open func() (crypto.Signer, error)) (crypto.Signer, error) {
	k := signerKey{domain: domain, sealed: sha256.Sum256(sealed)}
	c.mu.Lock()
	s, ok := c.keys[k]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := open()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.keys) >= maxCachedSigners {
		clear(c.keys)
	}
	c.keys[k] = s
	c.mu.Unlock()
	return s, nil
}
