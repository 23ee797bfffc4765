-- +goose Up
-- Plans of SPEC.md §8: a team's monthly email volume and its price.
CREATE TABLE plan (
    name           text PRIMARY KEY,
    monthly_emails bigint NOT NULL CHECK (monthly_emails > 0),
    price_usd      int NOT NULL CHECK (price_usd >= 0)
);
INSERT INTO plan (name, monthly_emails, price_usd) VALUES
    ('free', 3000, 0), ('50k', 50000, 20), ('100k', 100000, 35), ('200k', 200000, 160),
    ('500k', 500000, 350), ('1m', 1000000, 650), ('1.5m', 1500000, 825), ('2.5m', 2500000, 1050);

ALTER TABLE team
    ADD COLUMN plan text NOT NULL DEFAULT 'free' REFERENCES plan (name),
    -- Requests per second (burst the same); NULL → POSTHASTE_DEFAULT_RATE_LIMIT.
    ADD COLUMN rate_limit int CHECK (rate_limit > 0);

-- Recipients of accepted emails per team and calendar month (UTC).
CREATE TABLE quota_usage (
    team_id uuid NOT NULL REFERENCES team (id) ON DELETE CASCADE,
    month   date NOT NULL,
    used    bigint NOT NULL CHECK (used >= 0),
    PRIMARY KEY (team_id, month)
);

-- quota_take adds n recipients to the team's usage of the month unless that
-- would pass the plan's volume, and returns the new usage. Over the quota it
-- raises SQLSTATE PH429 with the current usage as DETAIL, which aborts the
-- surrounding transaction: the email insert queued with it is rolled back.
-- The row lock of ON CONFLICT DO UPDATE serialises concurrent senders, and
-- the WHERE is re-checked on the newest row version, so the count is exact.
-- +goose StatementBegin
CREATE FUNCTION quota_take(p_team uuid, p_month date, p_n bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    lim      bigint;
    used_now bigint;
BEGIN
    SELECT p.monthly_emails INTO lim FROM team t JOIN plan p ON p.name = t.plan WHERE t.id = p_team;
    IF lim IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'foreign_key_violation', MESSAGE = 'team ' || p_team || ' does not exist';
    END IF;
    IF p_n <= lim THEN
        INSERT INTO quota_usage AS q (team_id, month, used) VALUES (p_team, p_month, p_n)
        ON CONFLICT (team_id, month) DO UPDATE SET used = q.used + p_n WHERE q.used + p_n <= lim
        RETURNING used INTO used_now;
    END IF;
    IF used_now IS NULL THEN
        SELECT used INTO used_now FROM quota_usage WHERE team_id = p_team AND month = p_month;
        RAISE EXCEPTION USING ERRCODE = 'PH429', MESSAGE = 'monthly quota exceeded',
            DETAIL = coalesce(used_now, 0)::text;
    END IF;
    RETURN used_now;
END $$;
-- +goose StatementEnd

-- The retention sweep finds emails that stopped changing.
CREATE INDEX email_updated_at ON email (updated_at);

-- Every API request, partitioned by day (UTC) of created_at. Partitions are
-- created ahead by the API at start and by the writer, and dropped whole by
-- the retention sweep. team_id is NULL for unauthenticated requests.
CREATE TABLE request_log (
    id            uuid NOT NULL,
    team_id       uuid,
    key_id        uuid,
    method        text NOT NULL,
    path          text NOT NULL,
    status        int NOT NULL,
    user_agent    text,
    client_addr   text NOT NULL,
    duration_us   bigint NOT NULL,
    request_body  text,
    response_body text,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
-- Log ids are UUIDv7, so id order is creation order.
CREATE INDEX request_log_team_id ON request_log (team_id, id DESC);

-- +goose Down
DROP TABLE request_log;
DROP INDEX email_updated_at;
DROP FUNCTION quota_take(uuid, date, bigint);
DROP TABLE quota_usage;
ALTER TABLE team DROP COLUMN rate_limit, DROP COLUMN plan;
DROP TABLE plan;
