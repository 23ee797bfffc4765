package faults

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		point Point
		nth   int64
		err   string
	}{
		{spec: ""},
		{spec: "prepare", point: InPrepare, nth: 1},
		{spec: "deliver-after-data:7", point: AfterData, nth: 7},
		{spec: "after-accept:1", point: AfterAccept, nth: 1},
		{spec: "nowhere", err: "unknown crash point"},
		{spec: "prepare:0", err: "whole number from 1"},
		{spec: "prepare:x", err: "whole number from 1"},
	} {
		c, err := Parse(tc.spec)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		if tc.point == "" {
			require.Nil(t, c)
			continue
		}
		require.Equal(t, tc.point, c.point)
		require.Equal(t, tc.nth, c.nth)
	}
}

func TestAtKillsOnceOnTheNthPassOfItsPoint(t *testing.T) {
	c, err := Parse("deliver-before-data:50")
	require.NoError(t, err)
	var mu sync.Mutex
	kills := 0
	c.kill = func() { mu.Lock(); kills++; mu.Unlock() }
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.At(AfterData) // another point never counts
			c.At(BeforeData)
		}()
	}
	wg.Wait()
	require.Equal(t, 1, kills)
	require.EqualValues(t, 100, c.seen.Load())

	var none *Crasher
	none.At(BeforeData) // a nil Crasher never crashes
}
