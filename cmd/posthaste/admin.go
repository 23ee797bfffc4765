package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audit"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/pgcluster"
	"github.com/posthaste/posthaste/internal/store"
)

const adminUsage = `usage:
  posthaste admin create-team --name NAME --email OWNER_EMAIL
  posthaste admin create-key  --team TEAM_ID --name NAME [--sending-only]
  posthaste admin revoke-key  --team TEAM_ID --id KEY_ID
  posthaste admin set-plan    --team TEAM_ID --plan free|50k|100k|200k|500k|1m|1.5m|2.5m
  posthaste admin set-rate-limit --team TEAM_ID --rate REQUESTS_PER_SECOND (0: the default)
  posthaste admin health      --team TEAM_ID [--resume]
  posthaste admin list-teams
  posthaste admin create-pool --name NAME --address IP@EHLO_NAME[,IP@EHLO_NAME...]
  posthaste admin list-pools
  posthaste admin assign-pool --team TEAM_ID|--domain DOMAIN_ID --pool NAME|--default
  posthaste admin warmup      --ip IP --start|--done
  posthaste admin audit verify
  posthaste admin rotate-master-key [--check|--generate|--drop-previous] [--batch-size N]

Without DATABASE_URL, admin uses the private PostgreSQL of the posthaste dev
running on POSTHASTE_DATA_DIR.`

// runAdmin creates teams and keys and manages IP pools; it prints its
// results (tokens among them) as JSON on stdout.
func runAdmin(ctx context.Context, cfg config.Config, logger *slog.Logger, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError{fmt.Errorf("missing admin command\n%s", adminUsage)}
	}
	if args[0] == "rotate-master-key" {
		return runRotateMasterKey(ctx, cfg, logger, args[1:], stdout)
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
	domain := fs.String("domain", "", "domain id")
	pool := fs.String("pool", "", "IP pool name")
	toDefault := fs.Bool("default", false, "send from the default IP pool")
	address := fs.String("address", "", "comma-separated IP@EHLO_NAME source addresses")
	ip := fs.String("ip", "", "source address of an IP pool")
	warmStart := fs.Bool("start", false, "start (or restart) the address's warm-up today")
	warmDone := fs.Bool("done", false, "end the address's warm-up: it sends without limit")
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
	st, err := openAdminStore(ctx, cfg, logger)
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
		teamID := uuid.MustParse(creds.TeamID)
		if err := adminAudit(ctx, st, &teamID, audit.TeamCreate, "team", creds.TeamID, nil); err != nil {
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
		// The operator makes keys for the team's first owner, whose they
		// are (removing that owner revokes them).
		var owner *uuid.UUID
		switch id, err := st.Accounts.FirstOwner(ctx, teamID); {
		case err == nil:
			owner = &id
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("finding the owner of team %s: %w", teamID, err)
		}
		token, keyID, err := account.NewKey(ctx, st, teamID, owner, *name, perm)
		if errors.Is(err, store.ErrOwnersOnly) {
			return fmt.Errorf("team %s has no owner to hold a full_access key; use --sending-only", teamID)
		}
		if err != nil {
			return err
		}
		if err := adminAudit(ctx, st, &teamID, audit.APIKeyCreate, "api_key", keyID.String(),
			map[string]any{"permission": perm}); err != nil {
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
		if _, err := st.Accounts.RevokeAPIKey(ctx, teamID, keyID); err != nil {
			return fmt.Errorf("revoking key %s: %w", keyID, err)
		}
		if err := adminAudit(ctx, st, &teamID, audit.APIKeyRevoke, "api_key", keyID.String(), nil); err != nil {
			return err
		}
		return out.Encode(map[string]any{"id": keyID.String(), "deleted": true})
	case "set-plan":
		teamID, err := parseID(*team, "team")
		if err != nil {
			return err
		}
		plans, err := st.Accounts.Plans(ctx)
		if err != nil {
			return err
		}
		var names []string
		for _, p := range plans {
			if p.Name == *plan {
				if err := st.Accounts.SetPlan(ctx, teamID, p.Name); err != nil {
					return fmt.Errorf("setting the plan of team %s: %w", teamID, err)
				}
				if err := adminAudit(ctx, st, &teamID, audit.TeamSetPlan, "team", teamID.String(),
					map[string]any{"plan": p.Name}); err != nil {
					return err
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
		if err := st.Accounts.SetRateLimit(ctx, teamID, *rateLimit); err != nil {
			return fmt.Errorf("setting the rate limit of team %s: %w", teamID, err)
		}
		if err := adminAudit(ctx, st, &teamID, audit.TeamSetRateLimit, "team", teamID.String(),
			map[string]any{"rate_limit": *rateLimit}); err != nil {
			return err
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
	case "list-teams":
		teams, err := st.Domains.ListTeams(ctx)
		if err != nil {
			return err
		}
		list := make([]map[string]any, len(teams))
		for i, t := range teams {
			list[i] = map[string]any{"id": t.ID.String(), "name": t.Name, "created_at": t.CreatedAt,
				"ip_pool": poolOrDefault(t.IPPool, cfg.Delivery.DefaultPool)}
		}
		return out.Encode(list)
	case "create-pool":
		if err := need(name, "name"); err != nil {
			return err
		}
		if err := need(address, "address"); err != nil {
			return err
		}
		p, err := ippool.Parse(*name + "=" + *address)
		if err != nil || len(p) != 1 {
			return usageError{fmt.Errorf("--name and --address: %v\n%s", err, adminUsage)}
		}
		stored, err := st.Domains.AddIPPool(ctx, storePool(p[0]))
		if err != nil {
			return fmt.Errorf("creating IP pool %s: %w", *name, err)
		}
		if err := adminAudit(ctx, st, nil, audit.PoolCreate, "ip_pool", stored.Name, nil); err != nil {
			return err
		}
		return out.Encode(poolJSON(stored, cfg.Delivery.DefaultPool))
	case "list-pools":
		pools, err := st.Domains.IPPools(ctx)
		if err != nil {
			return err
		}
		list := make([]map[string]any, len(pools))
		for i, p := range pools {
			list[i] = poolJSON(p, cfg.Delivery.DefaultPool)
		}
		return out.Encode(list)
	case "assign-pool":
		return adminAssignPool(ctx, st, cfg.Delivery.DefaultPool, *team, *domain, *pool, *toDefault, out)
	case "warmup":
		return adminWarmup(ctx, st, cfg.Delivery.Warmup, *ip, *warmStart, *warmDone, out)
	case "audit":
		if fs.Arg(0) != "verify" || fs.NArg() != 1 {
			return usageError{fmt.Errorf("unknown audit command %q\n%s", strings.Join(fs.Args(), " "), adminUsage)}
		}
		n, err := st.Privacy.VerifyAudit(ctx)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"verified": true, "entries": n})
	default:
		return usageError{fmt.Errorf("unknown admin command %q\n%s", args[0], adminUsage)}
	}
}

// openAdminStore opens the store of an admin command, on
// adminDatabaseURL.
func openAdminStore(ctx context.Context, cfg config.Config, logger *slog.Logger) (*store.Store, error) {
	dbURL, err := adminDatabaseURL(cfg)
	if err != nil {
		return nil, err
	}
	return openStore(ctx, dbURL, logger)
}

// adminDatabaseURL is DATABASE_URL, else the URL of the private cluster of
// the `posthaste dev` running on POSTHASTE_DATA_DIR.
func adminDatabaseURL(cfg config.Config) (string, error) {
	if cfg.DatabaseURL != "" {
		return cfg.DatabaseURL, nil
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return "", err
	}
	u, err := pgcluster.RunningURL(devClusterDir(dataDir))
	if err != nil {
		return "", fmt.Errorf("DATABASE_URL is not set and no posthaste dev runs on POSTHASTE_DATA_DIR=%s: %w", dataDir, err)
	}
	return u, nil
}

// adminAssignPool gives a team or a domain its IP pool (or the default).
func adminAssignPool(ctx context.Context, st *store.Store, defaultPool, team, domain, pool string, toDefault bool,
	out *json.Encoder) error {
	if (team == "") == (domain == "") {
		return usageError{fmt.Errorf("give one of --team and --domain\n%s", adminUsage)}
	}
	if (pool == "") == !toDefault {
		return usageError{fmt.Errorf("give one of --pool and --default\n%s", adminUsage)}
	}
	if pool != "" {
		if err := ippool.ValidName(pool); err != nil {
			return usageError{err}
		}
	}
	what, idText, set := "team", team, st.Domains.SetTeamIPPool
	if domain != "" {
		what, idText, set = "domain", domain, st.Domains.SetDomainIPPool
	}
	id, err := uuid.Parse(idText)
	if err != nil {
		return usageError{fmt.Errorf("--%s must be a UUID", what)}
	}
	err = set(ctx, id, pool)
	if errors.Is(err, store.ErrUnknownPool) {
		pools, lerr := st.Domains.IPPools(ctx)
		if lerr != nil {
			return lerr
		}
		names := make([]string, len(pools))
		for i, p := range pools {
			names[i] = p.Name
		}
		return usageError{fmt.Errorf("unknown IP pool %q (known: %s; create it with create-pool or POSTHASTE_IP_POOLS)",
			pool, strings.Join(names, ", "))}
	}
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("no %s %s", what, id)
	}
	if err != nil {
		return fmt.Errorf("assigning the IP pool of %s %s: %w", what, id, err)
	}
	var teamID *uuid.UUID
	if what == "team" {
		teamID = &id
	}
	if err := adminAudit(ctx, st, teamID, audit.PoolAssign, what, id.String(),
		map[string]any{"ip_pool": pool}); err != nil {
		return err
	}
	shown := poolOrDefault(pool, defaultPool)
	if pool == "" && what == "domain" {
		shown = "(the team's)"
	}
	return out.Encode(map[string]any{what: id.String(), "ip_pool": shown})
}

// adminWarmup starts an address's warm-up again today (start) or ends it
// (done).
func adminWarmup(ctx context.Context, st *store.Store, schedule ippool.Schedule, ipText string, start, done bool,
	out *json.Encoder) error {
	if start == done {
		return usageError{fmt.Errorf("give one of --start and --done\n%s", adminUsage)}
	}
	ip, err := ippool.ParseIP(strings.TrimSpace(ipText))
	if err != nil {
		return usageError{fmt.Errorf("--ip: %w", err)}
	}
	var at *time.Time
	if start {
		now := time.Now()
		at = &now
	}
	err = st.Domains.SetWarmup(ctx, ip, at)
	if errors.Is(err, store.ErrNotFound) {
		return usageError{fmt.Errorf("no IP pool has the address %s (see list-pools)", ip)}
	}
	if err != nil {
		return fmt.Errorf("setting the warm-up of %s: %w", ip, err)
	}
	if err := adminAudit(ctx, st, nil, audit.IPWarmup, "ip_address", ip.String(),
		map[string]any{"start": start}); err != nil {
		return err
	}
	if done {
		return out.Encode(map[string]any{"address": ip.String(), "warmup": "done"})
	}
	if len(schedule) == 0 {
		return out.Encode(map[string]any{"address": ip.String(), "warmup": "warming", "started_at": at,
			"note": "POSTHASTE_WARMUP_SCHEDULE is off: the workers set no limit"})
	}
	return out.Encode(map[string]any{"address": ip.String(), "warmup": "warming", "started_at": at,
		"schedule": schedule.String()})
}

// poolOrDefault names the pool of a team: the default pool's name for "".
func poolOrDefault(pool, defaultPool string) string {
	if pool == "" {
		return defaultPool
	}
	return pool
}

func poolJSON(p store.IPPool, defaultPool string) map[string]any {
	addrs := make([]map[string]string, len(p.Addresses))
	for i, a := range p.Addresses {
		addrs[i] = map[string]string{"id": a.ID.String(), "address": a.IP.String(), "ehlo_name": a.EHLOName}
	}
	return map[string]any{"id": p.ID.String(), "name": p.Name, "default": p.Name == defaultPool, "addresses": addrs}
}

// adminAudit records a successful admin action in the audit log; team is
// nil for installation-level actions. The action has already taken effect
// when this fails, and the error says so.
func adminAudit(ctx context.Context, st *store.Store, team *uuid.UUID, action audit.Action, targetType, targetID string,
	detail map[string]any) error {
	e := audit.Entry{TeamID: team, ActorType: audit.ActorAdmin, Action: action, TargetType: targetType,
		TargetID: targetID, UserAgent: "posthaste admin", Outcome: audit.Success}
	if detail != nil {
		b, err := json.Marshal(detail)
		if err != nil {
			return err
		}
		e.Detail = string(b)
	}
	if _, err := st.Privacy.AppendAudit(ctx, e); err != nil {
		return fmt.Errorf("done, but not recorded in the audit log: %w", err)
	}
	return nil
}
