package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// IPPool is a named set of source addresses (package ippool).
type IPPool struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
	// Addresses are the pool's addresses in use (not retired), oldest
	// first.
	Addresses []IPAddress
}

// IPAddress is one source address of a pool and its EHLO name.
type IPAddress struct {
	ID        uuid.UUID
	IP        netip.Addr
	EHLOName  string
	CreatedAt time.Time
}

// ErrUnknownPool is returned (wrapped, with ErrNotFound) when a pool name
// names no pool.
var ErrUnknownPool = fmt.Errorf("%w: no such IP pool", ErrNotFound)

// AddIPPool creates the pool named p.Name unless it exists and adds
// p.Addresses to it; an address it already has takes the EHLO name given
// and is in use again if it was retired. An address of another pool is
// not moved: the error wraps ErrConflict. It returns the pool as stored.
func (s *Domains) AddIPPool(ctx context.Context, p IPPool) (IPPool, error) {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		_, err := upsertIPPool(ctx, tx, p, false)
		return err
	})
	if err != nil {
		return IPPool{}, err
	}
	return s.IPPool(ctx, p.Name)
}

// SyncIPPools makes the stored pools named in pools hold exactly their
// addresses (POSTHASTE_IP_POOLS at startup): missing pools and addresses
// are created, an address listed under another pool moves to this one,
// and addresses of these pools that are not listed are retired, never
// deleted. Pools not named are left as they are. One transaction.
func (s *Domains) SyncIPPools(ctx context.Context, pools []IPPool) error {
	if len(pools) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		for _, p := range pools {
			id, err := upsertIPPool(ctx, tx, p, true)
			if err != nil {
				return err
			}
			listed := make([]netip.Prefix, len(p.Addresses))
			for i, a := range p.Addresses {
				listed[i] = netip.PrefixFrom(a.IP, a.IP.BitLen())
			}
			if _, err := tx.Exec(ctx, `UPDATE ip_address SET retired_at = now()
				WHERE pool_id = @pool AND retired_at IS NULL AND NOT (address = ANY(@listed))`,
				pgx.NamedArgs{"pool": id, "listed": listed}); err != nil {
				return mapErr(err)
			}
		}
		return nil
	})
}

// upsertIPPool creates p's pool if missing and upserts its addresses;
// move lets an address of another pool move to this one. It returns the
// pool's id.
func upsertIPPool(ctx context.Context, tx pgx.Tx, p IPPool, move bool) (uuid.UUID, error) {
	newID, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, err
	}
	if _, err := tx.Exec(ctx, `INSERT INTO ip_pool (id, name) VALUES (@id, @name) ON CONFLICT (name) DO NOTHING`,
		pgx.NamedArgs{"id": newID, "name": p.Name}); err != nil {
		return uuid.Nil, mapErr(err)
	}
	var id uuid.UUID
	if err := tx.QueryRow(ctx, `SELECT id FROM ip_pool WHERE name = @name`, pgx.NamedArgs{"name": p.Name}).
		Scan(&id); err != nil {
		return uuid.Nil, mapErr(err)
	}
	for _, a := range p.Addresses {
		addrID, err := uuid.NewV7()
		if err != nil {
			return uuid.Nil, err
		}
		var got uuid.UUID
		err = tx.QueryRow(ctx, `INSERT INTO ip_address (id, pool_id, address, ehlo_name)
			VALUES (@id, @pool, @address, @ehlo)
			ON CONFLICT (address) DO UPDATE SET pool_id = EXCLUDED.pool_id, ehlo_name = EXCLUDED.ehlo_name, retired_at = NULL
			WHERE ip_address.pool_id = EXCLUDED.pool_id OR @move
			RETURNING id`,
			pgx.NamedArgs{"id": addrID, "pool": id, "address": netip.PrefixFrom(a.IP, a.IP.BitLen()),
				"ehlo": a.EHLOName, "move": move}).Scan(&got)
		if errors.Is(err, pgx.ErrNoRows) {
			return uuid.Nil, fmt.Errorf("%w: address %s belongs to another pool", ErrConflict, a.IP)
		}
		if err != nil {
			return uuid.Nil, mapErr(err)
		}
	}
	return id, nil
}

// IPPools returns every pool with its addresses in use, in the order they
// were created.
func (s *Domains) IPPools(ctx context.Context) ([]IPPool, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.id, p.name, p.created_at, a.id, a.address, a.ehlo_name, a.created_at
		FROM ip_pool p LEFT JOIN ip_address a ON a.pool_id = p.id AND a.retired_at IS NULL
		ORDER BY p.created_at, p.id, a.created_at, a.id`)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var out []IPPool
	for rows.Next() {
		var p IPPool
		var addrID *uuid.UUID
		var addr *netip.Prefix
		var ehlo *string
		var addrCreated *time.Time
		if err := rows.Scan(&p.ID, &p.Name, &p.CreatedAt, &addrID, &addr, &ehlo, &addrCreated); err != nil {
			return nil, mapErr(err)
		}
		if n := len(out); n == 0 || out[n-1].ID != p.ID {
			out = append(out, p)
		}
		if addrID != nil {
			last := &out[len(out)-1]
			last.Addresses = append(last.Addresses, IPAddress{ID: *addrID, IP: addr.Addr(), EHLOName: *ehlo,
				CreatedAt: *addrCreated})
		}
	}
	return out, mapErr(rows.Err())
}

// IPPool returns the pool of that name with its addresses in use; an
// unknown name is ErrUnknownPool.
func (s *Domains) IPPool(ctx context.Context, name string) (IPPool, error) {
	pools, err := s.IPPools(ctx)
	if err != nil {
		return IPPool{}, err
	}
	for _, p := range pools {
		if p.Name == name {
			return p, nil
		}
	}
	return IPPool{}, fmt.Errorf("%w: %q", ErrUnknownPool, name)
}

// SetTeamIPPool makes the team's mail leave from the named pool; "" is
// the default pool. An unknown pool is ErrUnknownPool, an unknown team
// ErrNotFound.
func (s *Domains) SetTeamIPPool(ctx context.Context, teamID uuid.UUID, pool string) error {
	return s.setIPPool(ctx, `UPDATE team SET ip_pool_id = @pool WHERE id = @id`, teamID, pool)
}

// SetDomainIPPool makes the mail of the domain (whatever its team) leave
// from the named pool, whatever its team's; "" follows the team's. An
// unknown pool is ErrUnknownPool, an unknown domain ErrNotFound.
func (s *Domains) SetDomainIPPool(ctx context.Context, domainID uuid.UUID, pool string) error {
	return s.setIPPool(ctx, `UPDATE domain SET ip_pool_id = @pool WHERE id = @id`, domainID, pool)
}

func (s *Domains) setIPPool(ctx context.Context, update string, id uuid.UUID, pool string) error {
	var poolID *uuid.UUID
	if pool != "" {
		var pid uuid.UUID
		err := s.pool.QueryRow(ctx, `SELECT id FROM ip_pool WHERE name = @name`, pgx.NamedArgs{"name": pool}).Scan(&pid)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: %q", ErrUnknownPool, pool)
		}
		if err != nil {
			return mapErr(err)
		}
		poolID = &pid
	}
	tag, err := s.pool.Exec(ctx, update, pgx.NamedArgs{"pool": poolID, "id": id})
	if err != nil {
		return mapErr(err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// TeamIPPools returns the names of the IP pools assigned to the team or
// to one of its live domains, in no order: with the default pool, those
// its mail can leave from.
func (s *Domains) TeamIPPools(ctx context.Context, teamID uuid.UUID) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT p.name FROM ip_pool p WHERE
		p.id = (SELECT ip_pool_id FROM team WHERE id = @team) OR
		p.id IN (SELECT ip_pool_id FROM domain WHERE team_id = @team AND deleted_at IS NULL)`,
		pgx.NamedArgs{"team": teamID})
	if err != nil {
		return nil, mapErr(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return names, mapErr(err)
}

// sendingIPPoolSQL selects the name of the IP pool that mail from the
// domain and team the two SQL expressions give leaves from: the domain's,
// else the team's, else "" (the default pool). EmailForSending runs it.
func sendingIPPoolSQL(team, domain string) string {
	return `SELECT coalesce(
			(SELECT p.name FROM domain d JOIN ip_pool p ON p.id = d.ip_pool_id WHERE d.id = ` + domain + ` AND d.team_id = ` + team + `),
			(SELECT p.name FROM team t JOIN ip_pool p ON p.id = t.ip_pool_id WHERE t.id = ` + team + `),
			'')`
}

// TeamSummary is a team as `posthaste admin list-teams` shows it.
type TeamSummary struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
	IPPool    string // "" for the default pool
}

// ListTeams returns every team, oldest first.
func (s *Domains) ListTeams(ctx context.Context) ([]TeamSummary, error) {
	rows, err := s.pool.Query(ctx, `SELECT t.id, t.name, t.created_at, coalesce(p.name, '')
		FROM team t LEFT JOIN ip_pool p ON p.id = t.ip_pool_id ORDER BY t.created_at, t.id`)
	if err != nil {
		return nil, mapErr(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (TeamSummary, error) {
		var t TeamSummary
		err := r.Scan(&t.ID, &t.Name, &t.CreatedAt, &t.IPPool)
		return t, err
	})
	return out, mapErr(err)
}
