package account_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/testkit/pgtest"
	"github.com/posthaste/posthaste/internal/testkit/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }

// TestOperatorCreatedUsersAreProven: the owner that `posthaste admin
// create-team` and the first run of `posthaste dev` create has a proven
// address (issue 14, point 2), so a provider sign-in with that verified
// email enters the account; an existing user is left as they are.
func TestOperatorCreatedUsersAreProven(t *testing.T) {
	ctx := context.Background()
	st := storetest.New(t)
	creds, created, err := account.Bootstrap(ctx, st, filepath.Join(t.TempDir(), "credentials.json"), "admin@example.com")
	require.NoError(t, err)
	require.True(t, created)
	u, err := st.Accounts.UserByEmail(ctx, creds.Email)
	require.NoError(t, err)
	require.NotNil(t, u.EmailVerifiedAt)

	creds, err = account.NewTeam(ctx, st, "Second", "owner@example.com")
	require.NoError(t, err)
	require.NotEmpty(t, creds.Password)
	u, err = st.Accounts.UserByEmail(ctx, "owner@example.com")
	require.NoError(t, err)
	require.NotNil(t, u.EmailVerifiedAt)

	unproven := store.User{ID: uuid.New(), Email: "unproven@example.com", PasswordHash: "hash"}
	require.NoError(t, st.Accounts.CreateUser(ctx, unproven))
	creds, err = account.NewTeam(ctx, st, "Third", "unproven@example.com")
	require.NoError(t, err)
	require.Empty(t, creds.Password, "an existing user keeps their password")
	u, err = st.Accounts.UserByEmail(ctx, "unproven@example.com")
	require.NoError(t, err)
	require.Nil(t, u.EmailVerifiedAt, "and their address's state")
}
