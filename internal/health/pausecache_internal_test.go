package health

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
)

// pauses is a PauseSource that counts its reads.
type pauses struct {
	paused map[uuid.UUID]*Pause
	err    error
	reads  int
}

func (p *pauses) SendingPause(_ context.Context, team uuid.UUID) (*Pause, error) {
	p.reads++
	if p.err != nil {
		return nil, p.err
	}
	return p.paused[team], nil
}

func TestPauseCacheKeepsAnswersForItsTTL(t *testing.T) {
	team, other := uuid.New(), uuid.New()
	src := &pauses{paused: map[uuid.UUID]*Pause{}}
	c := NewPauseCache(src, time.Second)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	ctx := context.Background()

	get := func(team uuid.UUID) *Pause {
		t.Helper()
		p, err := c.SendingPause(ctx, team)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if get(team) != nil || get(team) != nil || src.reads != 1 {
		t.Fatalf("not paused, read %d times, want once", src.reads)
	}
	src.paused[team] = &Pause{Metric: "bounce_rate"}
	now = now.Add(999 * time.Millisecond)
	if get(team) != nil {
		t.Fatal("a pause reached the cache before its ttl passed")
	}
	now = now.Add(time.Millisecond)
	if p := get(team); p == nil || p.Metric != "bounce_rate" {
		t.Fatalf("after the ttl: %v, want the pause", p)
	}
	if get(other) != nil || src.reads != 3 {
		t.Fatalf("another team is read on its own: %d reads, want 3", src.reads)
	}
	delete(src.paused, team)
	now = now.Add(time.Second)
	if get(team) != nil {
		t.Fatal("a lifted pause is lifted after the ttl")
	}
}

func TestPauseCacheKeepsNoError(t *testing.T) {
	team := uuid.New()
	src := &pauses{err: errors.New("database down")}
	c := NewPauseCache(src, time.Minute)
	if _, err := c.SendingPause(context.Background(), team); err == nil {
		t.Fatal("want the source's error")
	}
	src.err = nil
	src.paused = map[uuid.UUID]*Pause{team: {Metric: "complaint_rate"}}
	if p, err := c.SendingPause(context.Background(), team); err != nil || p == nil {
		t.Fatalf("after a failed read the team is read again: %v, %v", p, err)
	}
}
