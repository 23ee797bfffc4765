package submit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/store"
)

// Endpoints named in idempotency records: a key reused on another
// endpoint is a mismatch.
const (
	EndpointEmails = "POST /emails"
	EndpointBatch  = "POST /emails/batch"
)

const (
	// maxIdempotencyKey is the longest key accepted (API.md).
	maxIdempotencyKey = 256
	// idempotencyTTL is how long a key and its response are remembered.
	idempotencyTTL = 24 * time.Hour
	// idempotencyLease bounds how long the claim of a request that died
	// blocks its key (answering 409 concurrent_idempotent_requests). It is
	// longer than any request may take: attachment fetches time out after
	// 10 s each.
	idempotencyLease = 2 * time.Minute
)

// checkIdempotencyKey enforces 1..256 characters.
func checkIdempotencyKey(key string) error {
	if key == "" || len([]rune(key)) > maxIdempotencyKey {
		return Errorf(KindInvalidIdempotencyKey, "Idempotency-Key",
			"The `Idempotency-Key` header must be between 1 and %d characters long.", maxIdempotencyKey)
	}
	return nil
}

func inFlight() error {
	return Errorf(KindIdempotencyInFlight, "Idempotency-Key",
		"Another request with the same `Idempotency-Key` is still in progress. Retry once it has finished.")
}

// claimKey claims an idempotency key for a request, given as the parts
// hashRequest hashes (only when there is a key). It returns a nil claim
// and nil replay when there is no key, the claim when the request is the
// key's first, or the remembered response of an earlier identical request.
func (s *Service) claimKey(ctx context.Context, team uuid.UUID, key *string, endpoint string, request []any) (
	*store.IdempotencyClaim, []byte, error) {
	if key == nil {
		return nil, nil, nil
	}
	if err := checkIdempotencyKey(*key); err != nil {
		return nil, nil, err
	}
	hash := hashRequest(request...)
	c := store.IdempotencyClaim{TeamID: team, Key: *key, Endpoint: endpoint, Hash: hash, Token: uuid.New()}
	rec, err := s.store.ClaimIdempotencyKey(ctx, c, idempotencyLease, idempotencyTTL)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return &c, nil, nil
	}
	if rec.Endpoint != endpoint || !bytes.Equal(rec.Hash, hash) {
		return nil, nil, Errorf(KindIdempotencyMismatch, "Idempotency-Key",
			"This `Idempotency-Key` was already used with a different request body or endpoint in the last 24 hours. "+
				"Use a new key for a new request.")
	}
	if rec.State != store.IdempotencyCompleted {
		return nil, nil, inFlight()
	}
	return nil, rec.Response, nil
}

// claimOrReplay claims the request's key (see claimKey). When the key
// already holds the answer of an earlier identical request, it decodes
// that answer into res and reports replayed; nothing is claimed then.
func (s *Service) claimOrReplay(ctx context.Context, team uuid.UUID, key *string, endpoint string, request []any,
	res any) (claim *store.IdempotencyClaim, replayed bool, err error) {
	claim, replay, err := s.claimKey(ctx, team, key, endpoint, request)
	if err != nil || replay == nil {
		return claim, false, err
	}
	if err := json.Unmarshal(replay, res); err != nil {
		return nil, false, fmt.Errorf("reading remembered response: %w", err)
	}
	return nil, true, nil
}

// release gives up a claim whose request was not accepted, so that the
// caller can fix the request and retry with the same key.
// releaseUnless releases c unless *accepted; callers defer it right
// after claiming and set accepted once the request's rows are committed.
func (s *Service) releaseUnless(ctx context.Context, c *store.IdempotencyClaim, accepted *bool) {
	if !*accepted {
		s.release(ctx, c)
	}
}

func (s *Service) release(ctx context.Context, c *store.IdempotencyClaim) {
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.store.ReleaseIdempotencyKey(ctx, *c); err != nil {
		// The claim's lease frees the key later.
		s.logger.Warn("releasing idempotency key", "team_id", c.TeamID, "err", err)
	}
}

// hashRequest hashes the decoded form of a request, so that the same
// request serialized differently (key order, whitespace, base64 line
// breaks) hashes the same.
func hashRequest(parts ...any) []byte {
	h := sha256.New()
	enc := json.NewEncoder(h)
	for _, p := range parts {
		if err := enc.Encode(p); err != nil {
			// Decoded requests always encode; a failure would only make
			// two requests compare unequal.
			h.Write([]byte(err.Error()))
		}
	}
	return h.Sum(nil)
}
