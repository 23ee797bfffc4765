package devstack

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"
)

// TestVisibilityIndexesDropped: a new SQLite file keeps the visibility
// indexes of the workflow list and its usual filters and none of the
// unused ones; preparing the file again (every start) changes nothing.
func TestVisibilityIndexesDropped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "temporal.db")
	indexes := func() map[string]bool {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'executions_visibility' AND name NOT LIKE 'sqlite_autoindex_%'`)
		require.NoError(t, err)
		defer rows.Close()
		got := map[string]bool{}
		for rows.Next() {
			var name string
			require.NoError(t, rows.Scan(&name))
			got[name] = true
		}
		require.NoError(t, rows.Err())
		return got
	}
	for range 2 {
		_, err := prepareDatabase(path, "default", 24*time.Hour)
		require.NoError(t, err)
		got := indexes()
		for _, kept := range []string{"default_idx", "by_execution_time", "by_workflow_id", "by_workflow_type",
			"by_status", "by_task_queue", "by_parent_workflow_id", "by_root_workflow_id", "by_temporal_scheduled_by_id"} {
			require.True(t, got[kept], "index %s is kept", kept)
		}
		for _, dropped := range unusedVisibilityIndexes {
			require.False(t, got[dropped], "index %s is dropped", dropped)
		}
		require.Len(t, got, 58-len(unusedVisibilityIndexes))
	}
}
