package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/store"
)

const adminUsage = `usage:
  posthaste admin create-team --name NAME --email OWNER_EMAIL
  posthaste admin create-key  --team TEAM_ID --name NAME [--sending-only]
  posthaste admin revoke-key  --team TEAM_ID --id KEY_ID
  posthaste admin set-plan    --team TEAM_ID --plan free|50k|100k|200k|500k|1m|1.5m|2.5m
  posthaste admin set-rate-limit --team TEAM_ID --rate REQUESTS_PER_SECOND (0: the default)
  posthaste admin health      --team TEAM_ID [--resume]`

// runAdmin creates teams and keys; it prints tokens as JSON on stdout.
func runAdmin(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("missing admin command\n%s", adminUsage)}
	}
	fs := flag.NewFlagSet("admin "+args[0], flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	name := fs.String("name", "", "team or key name")
	email := fs.String("email", "", "owner email")
	team := fs.String("team", "", "team id")
	id := fs.String("id", "", "key id")
	sendingOnly := fs.Bool("sending-only", false, "create a sending_access key")
	plan := fs.String("plan", "", "plan name")
	rateLimit := fs.Int("rate", -1, "requests per second; 0 for the default")
	resume := fs.Bool("resume", false, "lift the account-health pause of the team's sending")
	if err := fs.Parse(args[1:]); err != nil {
		return usageError{fmt.Errorf("%w\n%s", err, adminUsage)}
	}
	need := func(v *string, flagName string) error {
		if strings.TrimSpace(*v) == "" {
			return usageError{fmt.Errorf("--%s is required\n%s", flagName, adminUsage)}
		}
		return nil
	}
	parseID := func(v, flagName string) (uuid.UUID, error) {
		u, err := uuid.Parse(v)
		if err != nil {
			return uuid.Nil, usageError{fmt.Errorf("--%s must be a UUID", flagName)}
		}
		return u, nil
	}
	st, err := openStore(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	switch args[0] {
	case "create-team":
		if err := need(name, "name"); err != nil {
			return err
		}
		if err := need(email, "email"); err != nil {
			return err
		}
		creds, err := account.NewTeam(ctx, st, *name, strings.ToLower(*email))
		if err != nil {
			return err
		}
		return out.Encode(creds)
	case "create-key":
		if err := need(name, "name"); err != nil {
			return err
		}
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		perm := store.PermissionFullAccess
		if *sendingOnly {
			perm = store.PermissionSendingAccess
		}
		token, keyID, err := account.NewKey(ctx, st, teamID, *name, perm)
		if err != nil {
			return err
		}
		return out.Encode(map[string]string{"id": keyID.String(), "token": token})
	case "revoke-key":
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		keyID, err := parseID(*id, "id")
		if err != nil {
			return err
		}
		if _, err := st.RevokeAPIKey(ctx, teamID, keyID); err != nil {
			return fmt.Errorf("revoking key %s: %w", keyID, err)
		}
		return out.Encode(map[string]any{"id": keyID.String(), "deleted": true})
	case "set-plan":
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		plans, err := st.Plans(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range plans {
			if p.Name == *plan {
				if err := st.SetPlan(ctx, teamID, p.Name); err != nil {
					return fmt.Errorf("setting the plan of team %s: %w", teamID, err)
				}
				return out.Encode(map[string]any{"team": teamID.String(), "plan": p.Name,
					"monthly_emails": p.MonthlyEmails, "price_usd": p.PriceUSD})
			}
			names = append(names, p.Name)
		}
		return usageError{fmt.Errorf("--plan must be one of %s", strings.Join(names, ", "))}
	case "set-rate-limit":
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		if *rateLimit < 0 || *rateLimit > 1_000_000 {
			return usageError{fmt.Errorf("--rate must be a number of requests per second from 0 (the default) to 1000000\n%s", adminUsage)}
		}
		if err := st.SetRateLimit(ctx, teamID, *rateLimit); err != nil {
			return fmt.Errorf("setting the rate limit of team %s: %w", teamID, err)
		}
		rate := any(*rateLimit)
		if *rateLimit == 0 {
			rate = cfg.Limits.DefaultRate
		}
		return out.Encode(map[string]any{"team": teamID.String(), "rate_limit": rate, "default": *rateLimit == 0})
	case "health":
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		return adminHealth(ctx, st, cfg.Health, teamID, *resume, stdout)
	default:
		return usageError{fmt.Errorf("unknown admin command %q\n%s", args[0], adminUsage)}
	}
}
