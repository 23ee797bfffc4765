package devstack

import (
	"fmt"

	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/log"
	"go.temporal.io/server/common/metrics"
	"go.temporal.io/server/common/persistence/sql"
	"go.temporal.io/server/common/persistence/sql/sqlplugin"
	"go.temporal.io/server/common/resolver"
)

// unusedVisibilityIndexes are the indexes of the SQLite visibility schema
// on search attributes Posthaste never sets or lists by: the pre-allocated
// custom attributes (Bool01...Keyword10, mapped only when an operator
// registers a custom search attribute), the pre-allocated system ones
// (TemporalBool01...), and the features Posthaste does not use (batch
// operations, schedules' pause, worker deployments and versioning, pause
// info, history size and length, durations and transition counts).
//
// Every visibility write (a workflow's start and close, the close being a
// delete and an insert) updates every index, and each of these is on a
// column generated from the search-attribute JSON, so every index costs a
// JSON extraction per write. With all 58 indexes the visibility writes
// were a third of dev's CPU while it delivered mail; the workflow list,
// its filters by id, type, status, task queue, parent and root, execution
// time and schedule keep their indexes, and a query on a dropped one still
// works, by scanning.
var unusedVisibilityIndexes = func() []string {
	names := []string{
		"by_history_length", "by_history_size_bytes", "by_execution_duration", "by_state_transition_count",
		"by_batcher_user", "by_temporal_scheduled_start_time", "by_temporal_schedule_paused",
		"by_temporal_pause_info", "by_temporal_worker_deployment_version",
		"by_temporal_workflow_versioning_behavior", "by_temporal_worker_deployment",
		"by_temporal_bool_01", "by_temporal_bool_02", "by_temporal_datetime_01", "by_temporal_datetime_02",
		"by_temporal_double_01", "by_temporal_double_02", "by_temporal_int_01", "by_temporal_int_02",
		"by_temporal_keyword_01", "by_temporal_keyword_02", "by_temporal_keyword_03", "by_temporal_keyword_04",
		"by_temporal_low_cardinality_keyword_01",
	}
	for _, kind := range []string{"bool", "datetime", "double", "int"} {
		for i := 1; i <= 3; i++ {
			names = append(names, fmt.Sprintf("by_%s_%02d", kind, i))
		}
	}
	for i := 1; i <= 10; i++ {
		names = append(names, fmt.Sprintf("by_keyword_%02d", i))
	}
	return names
}()

// leanVisibility drops unusedVisibilityIndexes from the SQLite file of
// conf. Dropping a missing index is not an error, so it runs on every
// start, on new files and on files made before it existed.
func leanVisibility(conf *config.SQL) error {
	db, err := sql.NewSQLAdminDB(sqlplugin.DbKindUnknown, conf, resolver.NewNoopResolver(), log.NewNoopLogger(), metrics.NoopMetricsHandler)
	if err != nil {
		return fmt.Errorf("opening %s: %w", conf.DatabaseName, err)
	}
	defer func() { _ = db.Close() }()
	for _, name := range unusedVisibilityIndexes {
		if err := db.Exec("DROP INDEX IF EXISTS " + name); err != nil {
			return fmt.Errorf("dropping visibility index %s: %w", name, err)
		}
	}
	return nil
}
