package clocktest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClockMovesOnlyForward(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(start)
	require.Equal(t, start, c.Now())
	require.Equal(t, start, c.Now(), "reading does not move it")
	require.Equal(t, start.Add(time.Second), c.Advance(time.Second))
	require.Equal(t, start.Add(time.Second), c.AdvanceTo(start), "never back")
	require.Equal(t, start.Add(time.Minute), c.AdvanceTo(start.Add(time.Minute)))
	require.Equal(t, start.Add(time.Minute), c.Now())
}
