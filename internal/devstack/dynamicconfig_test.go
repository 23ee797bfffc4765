package devstack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/server/common/dynamicconfig"
)

// The settings measured to matter for throughput stay set: queue
// checkpoints every second, one task-queue partition, and no cluster
// metadata read on every search-attribute lookup.
func TestDynamicConfigKeepsMeasuredSettings(t *testing.T) {
	dc := dynamicConfig(0)
	for _, k := range []dynamicconfig.Key{
		dynamicconfig.TransferProcessorUpdateAckInterval.Key(),
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key(),
		dynamicconfig.TimerProcessorUpdateAckInterval.Key(),
		dynamicconfig.OutboundProcessorUpdateAckInterval.Key(),
	} {
		require.Equal(t, time.Second, dc[k], "%s", k)
	}
	require.Equal(t, queuePollRPS, dc[dynamicconfig.TransferProcessorMaxPollRPS.Key()])
	require.Equal(t, queuePollRPS, dc[dynamicconfig.TimerProcessorMaxPollRPS.Key()])
	require.Greater(t, queuePollRPS, dynamicconfig.TransferProcessorMaxPollRPS.Get(dynamicconfig.NewNoopCollection())(),
		"tasks not handed over inline wait less than the default's 50 ms")
	require.Equal(t, 1, dc[dynamicconfig.MatchingNumTaskqueueReadPartitions.Key()])
	require.Equal(t, 1, dc[dynamicconfig.MatchingNumTaskqueueWritePartitions.Key()])
	_, forced := dc[dynamicconfig.ForceSearchAttributesCacheRefreshOnRead.Key()]
	require.False(t, forced, "search attributes are read from the cache")
	require.Equal(t, DefaultHistoryCache, dc[dynamicconfig.HistoryCacheHostLevelMaxSize.Key()])
	require.Equal(t, 500, dynamicConfig(500)[dynamicconfig.HistoryCacheHostLevelMaxSize.Key()])
}
