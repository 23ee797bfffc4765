package health

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
)

// PauseSource says whether a team's sending is paused (*store.Store reads
// one row).
type PauseSource interface {
	SendingPause(ctx context.Context, teamID uuid.UUID) (*Pause, error)
}

// maxCachedPauses bounds a PauseCache; a full cache starts again empty.
const maxCachedPauses = 100_000

// PauseCache answers SendingPause from what it read for the team within
// its ttl, so that a process does not read the team's state on every send
// (measured: a fifth of the SMTP gateway's rate over one connection). A
// pause, or its lifting, therefore reaches a process within ttl. Errors
// are not kept. It is safe for concurrent use.
type PauseCache struct {
	src PauseSource
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	teams map[uuid.UUID]cachedPause
}

type cachedPause struct {
	pause *Pause
	until time.Time
}

// NewPauseCache returns a PauseCache over src keeping answers for ttl.
func NewPauseCache(src PauseSource, ttl time.Duration) *PauseCache {
	return &PauseCache{src: src, ttl: ttl, now: time.Now, teams: map[uuid.UUID]cachedPause{}}
}

// SendingPause returns why the team's sending is paused, nil when it is
// not, as read at most ttl ago.
func (c *PauseCache) SendingPause(ctx context.Context, teamID uuid.UUID) (*Pause, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.teams[teamID]
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.pause, nil
	}
	p, err := c.src.SendingPause(ctx, teamID)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if len(c.teams) >= maxCachedPauses {
		clear(c.teams)
	}
	c.teams[teamID] = cachedPause{pause: p, until: now.Add(c.ttl)}
	c.mu.Unlock()
	return p, nil
}
