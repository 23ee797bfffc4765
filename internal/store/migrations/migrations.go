// Package migrations holds the store's goose migrations (NNNNN_name.sql),
// embedded, so that the store applies them and test helpers can tell one
// migration set from another (see storetest).
package migrations

import "embed"

// FS holds the migration files at its root.
//
//go:embed *.sql
var FS embed.FS
