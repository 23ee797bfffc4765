package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func env(m map[string]string) Getenv { return func(k string) string { return m[k] } }

func TestLoadDefaults(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, ".posthaste", c.DataDir)
	require.Equal(t, ":3000", c.HTTP.Addr)
	require.Equal(t, 7233, c.Temporal.Port)
	require.Equal(t, 8233, c.Temporal.UIPort)
	require.Equal(t, DefaultWorkflowCache, c.Temporal.WorkflowCache)
	require.Zero(t, c.Temporal.HistoryCache, "devstack's default")
	require.Equal(t, 25, c.Delivery.MXPort)
	require.Equal(t, 72*time.Hour, c.Delivery.RetryExpire)
	require.False(t, c.Egress.AllowPrivate)
	require.Empty(t, c.DatabaseURL)
	require.Equal(t, "posthaste", c.Domains.DKIMSelector)
	require.Equal(t, time.Minute, c.Domains.Verify.Interval)
	require.Equal(t, 10*time.Minute, c.Domains.Verify.FastPeriod)
	require.Equal(t, 72*time.Hour, c.Domains.Verify.Expire)
	require.Equal(t, 24*time.Hour, c.Domains.Verify.Recheck)
	require.Empty(t, c.Domains.MasterKey)
	require.Equal(t, 10, c.Limits.DefaultRate)
	require.Empty(t, c.Limits.RedisURL)
	require.Equal(t, 30*24*time.Hour, c.Retention.Period)
	require.Empty(t, c.HTTP.TrustedProxies)
	require.Empty(t, c.HTTP.PublicURL)
	require.Empty(t, c.SystemFrom)
	require.Equal(t, 7*24*time.Hour, c.Delivery.DataExportTTL)
}

func TestLoadDomains(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_HOSTNAME": "mta.example.com"}))
	require.NoError(t, err)
	require.Equal(t, "mta.example.com", c.Domains.BounceHost, "the bounce host defaults to the hostname")
	require.Equal(t, "_spf.mta.example.com", c.Domains.SPFInclude)

	key := "q6urq6urq6urq6urq6urq6urq6urq6urq6urq6urq6s="
	path := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(path, []byte(key+"\n"), 0o600))
	c, err = Load(env(map[string]string{"POSTHASTE_MASTER_KEY_FILE": path,
		"POSTHASTE_BOUNCE_HOST": "Bounces.Example.COM.", "POSTHASTE_SPF_INCLUDE": "spf.example.net"}))
	require.NoError(t, err)
	require.Equal(t, key, c.Domains.MasterKey)
	require.Equal(t, "bounces.example.com", c.Domains.BounceHost)
	require.Equal(t, "spf.example.net", c.Domains.SPFInclude)
	require.NotContains(t, fmt.Sprint(c.LogAttrs()...), key, "the key is never logged")
	require.Empty(t, c.Domains.PreviousMasterKeys)

	// A rotation: the new key current, older ones previous, from the
	// further lines of the file and from POSTHASTE_MASTER_KEY_PREVIOUS.
	k2, k3 := strings.Repeat("ab", 32), strings.Repeat("cd", 32)
	require.NoError(t, os.WriteFile(path, []byte(k2+"\n"+key+"\n"), 0o600))
	c, err = Load(env(map[string]string{"POSTHASTE_MASTER_KEY_FILE": path, "POSTHASTE_MASTER_KEY_PREVIOUS": " " + k3 + " "}))
	require.NoError(t, err)
	require.Equal(t, k2, c.Domains.MasterKey)
	require.Equal(t, []string{key, k3}, c.Domains.PreviousMasterKeys)
	require.NotContains(t, fmt.Sprint(c.LogAttrs()...), k3)
	c, err = Load(env(map[string]string{"POSTHASTE_MASTER_KEY": k2, "POSTHASTE_MASTER_KEY_PREVIOUS": key + "," + k3}))
	require.NoError(t, err)
	require.Equal(t, []string{key, k3}, c.Domains.PreviousMasterKeys)
	_, err = Load(env(map[string]string{"POSTHASTE_MASTER_KEY": k2, "POSTHASTE_MASTER_KEY_PREVIOUS": key + ",short"}))
	require.ErrorContains(t, err, "POSTHASTE_MASTER_KEY_PREVIOUS")
	_, err = Load(env(map[string]string{"POSTHASTE_MASTER_KEY_PREVIOUS": key}))
	require.ErrorContains(t, err, "needs POSTHASTE_MASTER_KEY")
}

func TestLoadLimits(t *testing.T) {
	c, err := Load(env(map[string]string{"POSTHASTE_DEFAULT_RATE_LIMIT": "25", "REDIS_URL": "redis://127.0.0.1:6379/0",
		"POSTHASTE_RETENTION": "168h", "POSTHASTE_TRUSTED_PROXIES": "10.0.0.0/8, 127.0.0.1"}))
	require.NoError(t, err)
	require.Equal(t, 25, c.Limits.DefaultRate)
	require.Equal(t, "redis://127.0.0.1:6379/0", c.Limits.RedisURL)
	require.Equal(t, 168*time.Hour, c.Retention.Period)
	require.Equal(t, 365*24*time.Hour, c.Retention.Audit, "the audit log outlives the 30-day retention")
	require.Equal(t, []string{"10.0.0.0/8", "127.0.0.1"}, c.HTTP.TrustedProxies)
	c, err = Load(env(map[string]string{"POSTHASTE_AUDIT_RETENTION": "17520h"}))
	require.NoError(t, err)
	require.Equal(t, 2*365*24*time.Hour, c.Retention.Audit)
}

func TestLoadSMTP(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Nil(t, c.SMTP.Listen, "unset: each command picks its default")
	require.Equal(t, 20, c.SMTP.MaxConnsPerIP)

	c, err = Load(env(map[string]string{"POSTHASTE_SMTP_LISTEN": "starttls://127.0.0.1:2587, tls://[::1]:2465",
		"POSTHASTE_TLS_CERT_FILE": "/c.pem", "POSTHASTE_TLS_KEY_FILE": "/k.pem"}))
	require.NoError(t, err)
	require.Equal(t, []SMTPListener{{Addr: "127.0.0.1:2587"}, {Addr: "[::1]:2465", ImplicitTLS: true}}, c.SMTP.Listen)
	require.Equal(t, "/c.pem", c.SMTP.CertFile)

	c, err = Load(env(map[string]string{"POSTHASTE_SMTP_LISTEN": "off"}))
	require.NoError(t, err)
	require.NotNil(t, c.SMTP.Listen)
	require.Empty(t, c.SMTP.Listen)

	for _, def := range []string{DefaultSMTPListen, DevSMTPListen} {
		ls, err := ParseSMTPListen(def)
		require.NoError(t, err)
		require.NotEmpty(t, ls)
	}
	for _, bad := range []string{"starttls://nohostport", ",", "tls:/x:1"} {
		_, err := ParseSMTPListen(bad)
		require.Error(t, err, bad)
	}
}

func TestLoadRejectsBadValuesNamingTheVariable(t *testing.T) {
	for name, val := range map[string]string{
		"POSTHASTE_TEMPORAL_PORT":          "70000",
		"POSTHASTE_ALLOW_PRIVATE_EGRESS":   "sometimes",
		"POSTHASTE_LOG_FORMAT":             "xml",
		"POSTHASTE_DELIVERY_RETRY_INITIAL": "-1s",
		"POSTHASTE_SOURCE_IP":              "not-an-ip",
		"POSTHASTE_RELAY":                  "http://x",
		"POSTHASTE_DNS_SERVER":             "127.0.0.1",
		"POSTHASTE_MASTER_KEY":             "too-short",
		"POSTHASTE_DKIM_SELECTOR":          "not a label",
		"POSTHASTE_VERIFY_INTERVAL":        "soon",
		"POSTHASTE_DEFAULT_RATE_LIMIT":     "0",
		"POSTHASTE_RETENTION":              "thirty days",
		"POSTHASTE_AUDIT_RETENTION":        "0s",
		"REDIS_URL":                        "localhost:6379",
		"POSTHASTE_TRUSTED_PROXIES":        "10.0.0.0/33",
		"POSTHASTE_SMTP_LISTEN":            "smtp://0.0.0.0:25",
		"POSTHASTE_TLS_CERT_FILE":          "/only/the/cert.pem",
		"POSTHASTE_SMTP_MAX_CONNS_PER_IP":  "none",
		"POSTHASTE_PUBLIC_URL":             "mail.example.com",
		"POSTHASTE_DATA_EXPORT_TTL":        "a week",
		"POSTHASTE_WORKFLOW_CACHE":         "0",
		"POSTHASTE_TEMPORAL_HISTORY_CACHE": "lots",
	} {
		_, err := Load(env(map[string]string{name: val}))
		require.ErrorContains(t, err, name, name)
	}
}

func TestSecretFromFileAndRedaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "db")
	require.NoError(t, os.WriteFile(path, []byte("postgres://app:hunter2@db:5432/posthaste\n"), 0o600))
	c, err := Load(env(map[string]string{"DATABASE_URL_FILE": path}))
	require.NoError(t, err)
	require.Equal(t, "postgres://app:hunter2@db:5432/posthaste", c.DatabaseURL)
	require.NotContains(t, redactURL(c.DatabaseURL), "hunter2")
	require.Contains(t, redactURL(c.DatabaseURL), "db:5432")
}

func TestLoadDispatch(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, Dispatch{RetryMax: 5 * time.Minute, GiveUp: 24 * time.Hour, ReconcileInterval: 5 * time.Minute,
		ReconcileQueuedAfter: 15 * time.Minute, ReconcileMargin: time.Hour, ReconcileMaxRestarts: 3}, c.Dispatch)
	c, err = Load(env(map[string]string{"POSTHASTE_OUTBOX_RETRY_MAX": "30s", "POSTHASTE_OUTBOX_GIVE_UP": "2h",
		"POSTHASTE_RECONCILE_INTERVAL": "1s", "POSTHASTE_RECONCILE_QUEUED_AFTER": "1m",
		"POSTHASTE_RECONCILE_MARGIN": "5m", "POSTHASTE_RECONCILE_MAX_RESTARTS": "1"}))
	require.NoError(t, err)
	require.Equal(t, Dispatch{RetryMax: 30 * time.Second, GiveUp: 2 * time.Hour, ReconcileInterval: time.Second,
		ReconcileQueuedAfter: time.Minute, ReconcileMargin: 5 * time.Minute, ReconcileMaxRestarts: 1}, c.Dispatch)
	_, err = Load(env(map[string]string{"POSTHASTE_RECONCILE_INTERVAL": "soon"}))
	require.ErrorContains(t, err, "POSTHASTE_RECONCILE_INTERVAL")
	_, err = Load(env(map[string]string{"POSTHASTE_RECONCILE_MAX_RESTARTS": "0"}))
	require.ErrorContains(t, err, "POSTHASTE_RECONCILE_MAX_RESTARTS")
}

// TestDatabasePasswordInTheQueryIsRedacted: libpq and pgx read password=
// (and sslpassword=) from the URL's query; the startup log never shows it.
func TestDatabasePasswordInTheQueryIsRedacted(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://app@db:5432/posthaste?password=hunter2&sslmode=disable": "postgres://app@db:5432/posthaste?password=xxxxx&sslmode=disable",
		"postgres://app:hunter2@db/posthaste?sslpassword=hunter2":           "postgres://app:xxxxx@db/posthaste?sslpassword=xxxxx",
		"postgres://app:hunter2@h1:5432,h2:5432/posthaste":                  "postgres://app:xxxxx@h1:5432,h2:5432/posthaste",
		"postgres://app:p%40ss@db/posthaste#hunter2":                        "postgres://app:xxxxx@db/posthaste",
		"postgres:///posthaste?host=/run/pg&PASSWORD=hunter2":               "postgres:///posthaste?PASSWORD=xxxxx&host=%2Frun%2Fpg",
		"host=db user=app password=hunter2":                                 "(set)",
		"redis://:hunter2@cache:6379/0":                                     "redis://:xxxxx@cache:6379/0",
		"redis://cache:6379/0?password=hunter2;x":                           "redis://cache:6379/0?(redacted)",
	} {
		require.Equal(t, want, redactURL(in), in)
	}
	c, err := Load(env(map[string]string{"DATABASE_URL": "postgres://app@db/posthaste?password=hunter2",
		"REDIS_URL": "redis://cache:6379/0?password=hunter2"}))
	require.NoError(t, err)
	require.NotContains(t, fmt.Sprint(c.LogAttrs()...), "hunter2")
}

// TestHTTPSPublicURLMeansSecureCookiesAndHSTS: a dashboard reached over
// https sets Secure cookies and sends HSTS unless told otherwise.
func TestHTTPSPublicURLMeansSecureCookiesAndHSTS(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.False(t, c.HTTP.SecureCookies)
	require.False(t, c.HTTP.HSTS())
	c, err = Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "http://localhost:3000"}))
	require.NoError(t, err)
	require.False(t, c.HTTP.SecureCookies)
	require.False(t, c.HTTP.HSTS())
	c, err = Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "https://mail.example.com/"}))
	require.NoError(t, err)
	require.True(t, c.HTTP.SecureCookies)
	require.True(t, c.HTTP.HSTS())
	c, err = Load(env(map[string]string{"POSTHASTE_PUBLIC_URL": "https://mail.example.com", "POSTHASTE_SECURE_COOKIES": "false"}))
	require.NoError(t, err)
	require.False(t, c.HTTP.SecureCookies, "an explicit setting wins")
	c, err = Load(env(map[string]string{"POSTHASTE_SECURE_COOKIES": "true"}))
	require.NoError(t, err)
	require.True(t, c.HTTP.SecureCookies)
}

func TestLoadHTTPLimits(t *testing.T) {
	c, err := Load(env(nil))
	require.NoError(t, err)
	require.Equal(t, 2*time.Minute, c.HTTP.ReadTimeout)
	require.Equal(t, 3*time.Minute, c.HTTP.WriteTimeout)
	require.Equal(t, 2*time.Minute, c.HTTP.IdleTimeout)
	require.Equal(t, 10, c.HTTP.KeyLookupRate)
	require.Equal(t, 12*time.Hour, c.HTTP.SessionIdleTimeout)
	require.Empty(t, c.MetricsToken)

	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("s3cret-scrape\n"), 0o600))
	c, err = Load(env(map[string]string{"POSTHASTE_HTTP_READ_TIMEOUT": "30s", "POSTHASTE_HTTP_WRITE_TIMEOUT": "45s",
		"POSTHASTE_HTTP_IDLE_TIMEOUT": "1m", "POSTHASTE_KEY_LOOKUP_RATE": "3", "POSTHASTE_METRICS_TOKEN_FILE": path,
		"POSTHASTE_SESSION_IDLE_TIMEOUT": "30m"}))
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, c.HTTP.ReadTimeout)
	require.Equal(t, 45*time.Second, c.HTTP.WriteTimeout)
	require.Equal(t, time.Minute, c.HTTP.IdleTimeout)
	require.Equal(t, 3, c.HTTP.KeyLookupRate)
	require.Equal(t, 30*time.Minute, c.HTTP.SessionIdleTimeout)
	require.Equal(t, "s3cret-scrape", c.MetricsToken)
	require.NotContains(t, fmt.Sprint(c.LogAttrs()...), "s3cret-scrape")

	for name, val := range map[string]string{
		"POSTHASTE_HTTP_READ_TIMEOUT":  "forever",
		"POSTHASTE_HTTP_WRITE_TIMEOUT": "1m", // shorter than the read timeout
		"POSTHASTE_HTTP_IDLE_TIMEOUT":  "0s",
		"POSTHASTE_KEY_LOOKUP_RATE":    "0",
	} {
		_, err := Load(env(map[string]string{name: val}))
		require.ErrorContains(t, err, name, name)
	}
}
