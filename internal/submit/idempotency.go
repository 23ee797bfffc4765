package submit

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
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
)

// Idempotency claims are leases renewed by a heartbeat. A request holds its
// key with a short lease (DefaultIdempotencyLease) that a goroutine renews
// every DefaultIdempotencyHeartbeat for as long as the request runs, however
// long that is (attachment fetches may take 10 s each), and stops renewing
// when the request ends. A process that dies under a request stops renewing
// with it, so its key frees at most one lease later and a client retrying
// after the crash is served instead of answered 409
// concurrent_idempotent_requests for minutes.
//
// The alternative, a claim held by a session advisory lock or an open
// transaction on a dedicated connection, frees the key only when PostgreSQL
// notices the connection is gone: at once for a killed process on a live
// host, but only after TCP keepalives time out when the host or the network
// dies, and not at all behind a transaction-pooling proxy. It would also
// pin a pooled connection for the whole request, so slow requests would
// starve fast ones. A lease needs one short UPDATE per heartbeat, only for
// requests that outlive a heartbeat interval.
//
// Renewing keeps the guarantees: while its holder renews, a claim is never
// taken over, so a second request with the key gets 409 (or, once the
// first completed, its response); a holder that could not renew in time
// (its database unreachable for a lease) may lose the key to another
// request, and then the token check of the accepting transaction
// (store.ErrClaimLost) keeps it from writing: it answers 409 and never
// accepts a second time. Leases run on the database's clock.
const (
	// DefaultIdempotencyLease bounds how long the claim of a request
	// whose process died blocks its key.
	DefaultIdempotencyLease = 4 * time.Second
	// DefaultIdempotencyHeartbeat is how often a running request renews
	// its claim: three renewals may fail or be late before it is lost.
	DefaultIdempotencyHeartbeat = DefaultIdempotencyLease / 4
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

// heldClaim is a request's claim on its idempotency key, renewed by a
// heartbeat until the request ends (see finish).
type heldClaim struct {
	claim store.IdempotencyClaim
	stop  func() // stops the heartbeat and waits for it
}

// stored is the claim to complete in the accepting transaction; nil for
// a request without a key.
func (h *heldClaim) stored() *store.IdempotencyClaim {
	if h == nil {
		return nil
	}
	return &h.claim
}

// claimKey claims an idempotency key for a request, given as the parts
// hashRequest hashes (only when there is a key). It returns a nil claim
// and nil replay when there is no key, the claim when the request is the
// key's first, or the remembered response of an earlier identical request.
// A returned claim is renewed until finish is called.
func (s *Service) claimKey(ctx context.Context, team uuid.UUID, key *string, endpoint string, request []any) (
	*heldClaim, []byte, error) {
	if key == nil {
		return nil, nil, nil
	}
	if err := checkIdempotencyKey(*key); err != nil {
		return nil, nil, err
	}
	hash := hashRequest(request...)
	c := store.IdempotencyClaim{TeamID: team, Key: *key, Endpoint: endpoint, Hash: hash, Token: uuid.New()}
	rec, err := s.store.ClaimIdempotencyKey(ctx, c, s.lease, idempotencyTTL)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return &heldClaim{claim: c, stop: s.heartbeat(ctx, c)}, nil, nil
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

// heartbeat renews c every heartbeat interval until the returned function
// is called; that function cancels a renewal under way and returns once
// the goroutine has ended. A renewal that fails is retried at the next
// tick; a claim found lost is not renewed again (the accepting transaction
// then reports it).
func (s *Service) heartbeat(ctx context.Context, c store.IdempotencyClaim) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(s.beat)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			rctx, rcancel := context.WithTimeout(ctx, s.lease)
			err := s.store.RenewIdempotencyClaim(rctx, c, s.lease)
			rcancel()
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, store.ErrClaimLost):
				// Completed as the request ended, or taken over after
				// renewals failed for a whole lease.
				s.logger.Debug("idempotency claim no longer held", "team_id", c.TeamID)
				return
			case err != nil:
				s.logger.Warn("renewing idempotency claim", "team_id", c.TeamID, "err", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// claimOrReplay claims the request's key (see claimKey). When the key
// already holds the answer of an earlier identical request, it decodes
// that answer into res and reports replayed; nothing is claimed then.
func (s *Service) claimOrReplay(ctx context.Context, team uuid.UUID, key *string, endpoint string, request []any,
	res any) (claim *heldClaim, replayed bool, err error) {
	claim, replay, err := s.claimKey(ctx, team, key, endpoint, request)
	if err != nil || replay == nil {
		return claim, false, err
	}
	if err := json.Unmarshal(replay, res); err != nil {
		return nil, false, fmt.Errorf("reading remembered response: %w", err)
	}
	return nil, true, nil
}

// finish ends a request's claim: it stops renewing it and, unless
// *accepted (the claim was completed in the accepting transaction),
// releases it so that the caller can fix the request and retry with the
// same key. Callers defer it right after claiming and set accepted once
// the request's rows are committed.
func (s *Service) finish(ctx context.Context, c *heldClaim, accepted *bool) {
	if c == nil {
		return
	}
	c.stop()
	if *accepted {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := s.store.ReleaseIdempotencyKey(ctx, c.claim); err != nil {
		// The lease frees the key soon: it is no longer renewed.
		s.logger.Warn("releasing idempotency key", "team_id", c.claim.TeamID, "err", err)
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
