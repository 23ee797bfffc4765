package delivery

import (
	"crypto"
	"crypto/sha256"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/ttlcache"
)

// maxCachedSigners bounds signerCache; a full cache drops the oldest.
const maxCachedSigners = 4096

// signerCache keeps the opened DKIM keys of domains, so that building a
// message does not unseal and parse its domain's key (with an RSA key's
// precomputation) every time: measured at about a tenth of the CPU of a
// real delivery's activities. An entry is keyed by the domain and a hash
// of its sealed key, so a rotated key is a new entry and an old one is
// never used for it; entries therefore never expire. It is shared by
// copies of Activities.
type signerCache struct {
	keys *ttlcache.Cache[signerKey, crypto.Signer]
}

type signerKey struct {
	domain uuid.UUID
	sealed [sha256.Size]byte
}

func newSignerCache() *signerCache {
	return &signerCache{keys: ttlcache.New[signerKey, crypto.Signer](ttlcache.Config{MaxEntries: maxCachedSigners})}
}

// get returns the cached signer of the sealed key of domain, or opens it
// with open and keeps it when that succeeds. open runs in the caller's
// goroutine; concurrent misses of one key each open it.
func (c *signerCache) get(domain uuid.UUID, sealed []byte, open func() (crypto.Signer, error)) (crypto.Signer, error) {
	k := signerKey{domain: domain, sealed: sha256.Sum256(sealed)}
	if s, ok := c.keys.Get(k); ok {
		return s, nil
	}
	s, err := open()
	if err != nil {
		return nil, err
	}
	c.keys.Set(k, s, ttlcache.NoExpiry)
	return s, nil
}
