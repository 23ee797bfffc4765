-- +goose Up
-- IP pools: named sets of source addresses, each with the EHLO name its
-- PTR record gives. POSTHASTE_IP_POOLS is synced into these tables at
-- startup and `posthaste admin create-pool` adds to them; they are the
-- truth about which addresses a pool has and which pool a team or domain
-- sends from. An address is a row of its own with an id, so that later
-- state per address (warm-up counters, per-destination shaping) can refer
-- to it. Rows are never deleted: an address left out of the
-- configuration is retired (retired_at) and keeps its history.
CREATE TABLE ip_pool (
    id         uuid PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9-]{1,32}$'),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE ip_address (
    id         uuid PRIMARY KEY,
    pool_id    uuid NOT NULL REFERENCES ip_pool (id),
    -- One host address (no prefix); an address belongs to one pool.
    address    inet NOT NULL UNIQUE CHECK (masklen(address) = CASE family(address) WHEN 4 THEN 32 ELSE 128 END),
    ehlo_name  text NOT NULL CHECK (ehlo_name ~ '^[a-z0-9.-]{3,253}$'),
    created_at timestamptz NOT NULL DEFAULT now(),
    retired_at timestamptz
);
CREATE INDEX ip_address_pool ON ip_address (pool_id);
-- The pool a team's mail leaves from, and a domain's, which wins over
-- its team's; NULL: the default pool (POSTHASTE_IP_POOLS).
ALTER TABLE team ADD COLUMN ip_pool_id uuid REFERENCES ip_pool (id);
ALTER TABLE domain ADD COLUMN ip_pool_id uuid REFERENCES ip_pool (id);

-- +goose Down
ALTER TABLE domain DROP COLUMN ip_pool_id;
ALTER TABLE team DROP COLUMN ip_pool_id;
DROP TABLE ip_address;
DROP TABLE ip_pool;
