// Package config reads Posthaste's configuration from the environment, once,
// in main. Every variable has a default; a bad value is an error naming the
// variable. Secrets may come from a file named by the variable plus _FILE.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/ippool"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/shaping"
)

var dnsLabel = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$`)

// Getenv reads a variable; os.Getenv in main, a map in tests.
type Getenv func(string) string

// Config is the whole configuration, split by component.
type Config struct {
	DataDir   string // POSTHASTE_DATA_DIR
	LogFormat string // POSTHASTE_LOG_FORMAT: json | text
	LogLevel  string // POSTHASTE_LOG_LEVEL

	DatabaseURL string // DATABASE_URL; empty in dev → private cluster
	MetricsAddr string // POSTHASTE_METRICS_ADDR: /metrics and /healthz of `worker`
	// MetricsToken (POSTHASTE_METRICS_TOKEN or _FILE), when set, is the
	// bearer token /metrics requires on every listener and that unlocks
	// the failed checks of /readyz on the API listener; "" leaves /metrics
	// open and shows /readyz's details only on the ops listeners.
	MetricsToken string
	// SystemFrom (POSTHASTE_SYSTEM_FROM) sends Posthaste's own emails:
	// invitations, password-reset links, notices to owners. "" → none are
	// sent (dev uses the sandbox sender).
	SystemFrom string

	HTTP      HTTP
	Limits    Limits
	Retention Retention
	Health    Health
	Temporal  Temporal
	Delivery  Delivery
	Domains   Domains
	Egress    Egress
	Admin     Admin
	OAuth     OAuth
	Webhooks  Webhooks
	Codec     Codec
	SMTP      SMTP
	Inbound   Inbound
	Steps     Steps
	Dispatch  Dispatch

	// CrashAt (POSTHASTE_TEST_CRASH_AT) makes the process SIGKILL itself
	// at a point of the send path, for crash tests and the chaos
	// benchmark (see package faults); "" in any real deployment.
	CrashAt string
}

// Steps is how long workflows retry their short database steps (Prepare,
// recording events, webhook passes, domain checks) before giving up: long
// enough to outlast a database outage.
type Steps struct {
	Window      time.Duration // POSTHASTE_STEP_RETRY_WINDOW
	MaxInterval time.Duration // POSTHASTE_STEP_RETRY_MAX: longest wait between tries
}

// SMTP configures the submission gateway of `smtp` and `dev`.
type SMTP struct {
	// Listen is POSTHASTE_SMTP_LISTEN: nil when unset (each command has
	// its default: DefaultSMTPListen or DevSMTPListen); empty when set to
	// "off" (no SMTP).
	Listen        []SMTPListener
	CertFile      string // POSTHASTE_TLS_CERT_FILE
	KeyFile       string // POSTHASTE_TLS_KEY_FILE
	MaxConnsPerIP int    // POSTHASTE_SMTP_MAX_CONNS_PER_IP
}

// Inbound configures the inbound MX (`mx` and `dev`): bounces and
// complaints to the return paths of sent mail.
type Inbound struct {
	// Listen is POSTHASTE_INBOUND_LISTEN, one host:port: "" when unset
	// (each command has its default: DefaultInboundListen or
	// DevInboundListen); "off" disables the MX of `dev`.
	Listen string
	// Hostname is POSTHASTE_INBOUND_HOSTNAME (POSTHASTE_HOSTNAME when
	// unset): the name in the greeting and the Received header.
	Hostname        string
	MaxMessageBytes int64 // POSTHASTE_INBOUND_MAX_MESSAGE_BYTES
	MaxRecipients   int   // POSTHASTE_INBOUND_MAX_RECIPIENTS
	MaxConns        int   // POSTHASTE_INBOUND_MAX_CONNS
	MaxConnsPerIP   int   // POSTHASTE_INBOUND_MAX_CONNS_PER_IP
	MaxConnsPerNet  int   // POSTHASTE_INBOUND_MAX_CONNS_PER_NET
	// ConnReservePercent is POSTHASTE_INBOUND_CONN_RESERVE_PERCENT.
	ConnReservePercent int
	SessionTimeout     time.Duration // POSTHASTE_INBOUND_SESSION_TIMEOUT
	MaxIdleCommands    int           // POSTHASTE_INBOUND_MAX_IDLE_COMMANDS
	// Message rates per minute (0: none): from one client address
	// (POSTHASTE_INBOUND_RATE_PER_ADDRESS), from its IPv4 /24 or IPv6 /48
	// (POSTHASTE_INBOUND_RATE_PER_NETWORK), and recipients at one team's
	// return paths and unsubscribe addresses
	// (POSTHASTE_INBOUND_RATE_RETURN_PATH).
	RatePerAddress, RatePerNetwork, RateReturnPath int
	// A team's default budget of received mail (0: none): messages per
	// UTC day (POSTHASTE_INBOUND_DAILY_MESSAGES) and bytes received in the
	// last 30 days (POSTHASTE_INBOUND_STORAGE_BYTES).
	DailyMessages, StorageBytes int64
	// FBLDomains is POSTHASTE_FBL_DOMAINS, lower-cased: the sender
	// domains of the feedback loops whose complaints are acted on when
	// authenticated (receiving.ActivitiesConfig.FBLDomains); nil acts on none.
	FBLDomains []string
	// WorkerSlots is POSTHASTE_INBOUND_WORKER_SLOTS: how many received
	// messages a worker (`dev`, `worker`) processes at once, on a task
	// queue of their own.
	WorkerSlots int
}

// Default inbound MX listeners: port 25 in production, a loopback port in
// development.
const (
	DefaultInboundListen = ":25"
	DevInboundListen     = "127.0.0.1:2525"
)

// SMTPListener is one SMTP listening address.
type SMTPListener struct {
	Addr        string
	ImplicitTLS bool // tls://; starttls:// otherwise
}

// Default SMTP listeners: STARTTLS on 25, 587 and 2587 and implicit TLS on
// 465 and 2465 in production; 2587 and 2465 in development.
const (
	DefaultSMTPListen = "starttls://0.0.0.0:25,starttls://0.0.0.0:587,starttls://0.0.0.0:2587," +
		"tls://0.0.0.0:465,tls://0.0.0.0:2465"
	DevSMTPListen = "starttls://0.0.0.0:2587,tls://0.0.0.0:2465"
)

// ParseSMTPListen reads a comma-separated list of starttls://host:port and
// tls://host:port; "off" is no listener.
func ParseSMTPListen(v string) ([]SMTPListener, error) {
	if strings.TrimSpace(v) == "off" {
		return []SMTPListener{}, nil
	}
	var out []SMTPListener
	for _, item := range strings.Split(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		scheme, addr, ok := strings.Cut(item, "://")
		if !ok || (scheme != "starttls" && scheme != "tls") {
			return nil, fmt.Errorf("%q must start with starttls:// or tls://", item)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("%q must be scheme://host:port", item)
		}
		out = append(out, SMTPListener{Addr: addr, ImplicitTLS: scheme == "tls"})
	}
	if len(out) == 0 {
		return nil, errors.New("names no listener (use off to disable SMTP)")
	}
	return out, nil
}

// Webhooks configures webhook delivery.
type Webhooks struct {
	Retry        []time.Duration // POSTHASTE_WEBHOOK_RETRY: delays before each retry
	Timeout      time.Duration   // POSTHASTE_WEBHOOK_TIMEOUT: one attempt
	DisableAfter time.Duration   // POSTHASTE_WEBHOOK_DISABLE_AFTER: failing this long disables
}

// Codec configures the Temporal payload codec (package codec) and its
// endpoint for the Temporal UI.
type Codec struct {
	// Token (POSTHASTE_CODEC_TOKEN or _FILE) is the operators' token of
	// /temporal-codec/; "" leaves the endpoint off.
	Token string
	// Origins (POSTHASTE_CODEC_ORIGINS) are the Temporal UI origins the
	// endpoint answers from browsers (CORS).
	Origins []string
	// CacheTTL (POSTHASTE_CODEC_CACHE_TTL) is how long a process keeps an
	// unsealed subject key: the bound within which an erasure reaches
	// every process.
	CacheTTL time.Duration
}

// HTTP configures the API listener.
type HTTP struct {
	Addr string // POSTHASTE_HTTP_ADDR
	// PublicURL (POSTHASTE_PUBLIC_URL) is where browsers reach the server:
	// the base of links in emails and of OAuth callbacks. "" → `dev`: its
	// own address; otherwise http://localhost:3000.
	PublicURL      string
	TrustedProxies []string // POSTHASTE_TRUSTED_PROXIES: comma-separated addresses or CIDRs
	// SecureCookies marks dashboard cookies Secure (POSTHASTE_SECURE_COOKIES);
	// the default is true when PublicURL is https.
	SecureCookies bool
	// ReadTimeout (POSTHASTE_HTTP_READ_TIMEOUT) bounds reading a whole
	// request, body included; the headers alone have ReadHeaderTimeout.
	ReadTimeout time.Duration
	// WriteTimeout (POSTHASTE_HTTP_WRITE_TIMEOUT) bounds a request from the
	// end of its headers to the end of its response: reading the body,
	// the handler and writing the answer. At least ReadTimeout.
	WriteTimeout time.Duration
	// IdleTimeout (POSTHASTE_HTTP_IDLE_TIMEOUT) closes a keep-alive
	// connection idle this long.
	IdleTimeout time.Duration
	// KeyLookupRate (POSTHASTE_KEY_LOOKUP_RATE) is how many API keys that
	// match no live key a client address may present per second (burst
	// the same) before its keys that are not cached are refused with 429
	// without a database lookup.
	KeyLookupRate int
	// SessionIdleTimeout (POSTHASTE_SESSION_IDLE_TIMEOUT) ends a dashboard
	// session unused this long, before its 14-day lifetime.
	SessionIdleTimeout time.Duration
}

// ReadHeaderTimeout bounds reading a request's headers (slowloris).
const ReadHeaderTimeout = 10 * time.Second

// HSTS reports whether responses carry Strict-Transport-Security: when
// browsers reach the server over https (RFC 6797).
func (h HTTP) HSTS() bool { return strings.HasPrefix(h.PublicURL, "https://") }

// Limits configures the API's rate limiter.
type Limits struct {
	DefaultRate int    // POSTHASTE_DEFAULT_RATE_LIMIT: requests/s of teams without their own
	RedisURL    string // REDIS_URL: share the limits between processes; empty → per process
}

// Dispatch configures the outbox dispatcher, which starts the workflows of
// accepted mail, and the reconciler, which finds the mail they left
// without an outcome.
type Dispatch struct {
	// RetryMax is the longest wait between two starts of an outbox entry
	// (POSTHASTE_OUTBOX_RETRY_MAX); the first retry waits a second.
	RetryMax time.Duration
	// GiveUp (POSTHASTE_OUTBOX_GIVE_UP): an entry whose start failed ten
	// times and for this long ends, its emails failed.
	GiveUp time.Duration
	// ReconcileInterval is how often the reconciler runs
	// (POSTHASTE_RECONCILE_INTERVAL).
	ReconcileInterval time.Duration
	// ReconcileQueuedAfter (POSTHASTE_RECONCILE_QUEUED_AFTER): an email
	// still queued this long after it was due, with no outbox entry and no
	// running workflow, is restarted.
	ReconcileQueuedAfter time.Duration
	// ReconcileMargin (POSTHASTE_RECONCILE_MARGIN): an email sent longer
	// ago than POSTHASTE_DELIVERY_EXPIRE plus this, with recipients
	// without an outcome and no running workflow, is ended failed.
	ReconcileMargin time.Duration
	// ReconcileMaxRestarts bounds the restarts of one email
	// (POSTHASTE_RECONCILE_MAX_RESTARTS); then it is ended failed.
	ReconcileMaxRestarts int
}

// Health configures account health: each team's bounce and complaint
// rates, evaluated by the worker (see package health).
type Health struct {
	// Window (POSTHASTE_HEALTH_WINDOW) is the rolling window the rates
	// cover; at most the retention period, which deletes older email (the
	// default, 30 days, is shortened to a shorter retention).
	Window time.Duration
	// Interval (POSTHASTE_HEALTH_INTERVAL) is how often the rates are
	// evaluated.
	Interval time.Duration
	// Pause (POSTHASTE_HEALTH_PAUSE) pauses a team's sending when a rate
	// crosses its threshold, until an operator resumes it.
	Pause bool
}

// Retention configures the daily retention sweep of the worker.
type Retention struct {
	Period time.Duration // POSTHASTE_RETENTION: data is deleted this long after it stops changing
	// Audit (POSTHASTE_AUDIT_RETENTION): audit log entries are deleted
	// this long after they were written.
	Audit time.Duration
}

// Temporal configures the embedded server of `dev` and `temporal` and the
// memory a worker keeps workflows in; the client of `api` and `worker` is
// configured by Temporal's own TEMPORAL_* variables (envconfig).
type Temporal struct {
	Port      int    // POSTHASTE_TEMPORAL_PORT
	UIPort    int    // POSTHASTE_TEMPORAL_UI_PORT (0 = no UI)
	IP        string // POSTHASTE_TEMPORAL_IP
	Namespace string // TEMPORAL_NAMESPACE (default "default")
	UIURL     string // POSTHASTE_TEMPORAL_UI_URL: where `api` links workflows
	// WorkflowCache (POSTHASTE_WORKFLOW_CACHE) is how many workflows a
	// worker process keeps in memory between their tasks (the SDK's
	// sticky cache); one it dropped replays its history at its next task.
	WorkflowCache int
	// HistoryCache (POSTHASTE_TEMPORAL_HISTORY_CACHE) is how many
	// workflows the embedded server keeps the state of in memory; one it
	// dropped is read from its SQLite file at its next task; 0 (unset)
	// leaves devstack.DefaultHistoryCache.
	HistoryCache int
}

// DefaultWorkflowCache is Temporal.WorkflowCache when unset (the SDK's
// own default is 10,000): a run waiting for days need not stay in
// memory, so 10,000 waiting automation runs cost little (bench
// -automations), while the emails and runs in flight stay.
const DefaultWorkflowCache = 2000

// Delivery configures outbound mail.
type Delivery struct {
	Hostname     string        // POSTHASTE_HOSTNAME: EHLO name
	DNSServer    string        // POSTHASTE_DNS_SERVER: host:port for every lookup
	MXPort       int           // POSTHASTE_MX_PORT
	SourceIP     net.IP        // POSTHASTE_SOURCE_IP
	Relay        string        // POSTHASTE_RELAY: smtp://host:port smarthost
	RetryInitial time.Duration // POSTHASTE_DELIVERY_RETRY_INITIAL
	RetryMax     time.Duration // POSTHASTE_DELIVERY_RETRY_MAX
	RetryExpire  time.Duration // POSTHASTE_DELIVERY_EXPIRE
	Heartbeat    time.Duration // POSTHASTE_DELIVERY_HEARTBEAT: a dead worker's delivery is retried after this
	TLSCAFile    string        // POSTHASTE_TLS_CA_FILE: extra roots for enforced TLS and MTA-STS
	// MTASTS (POSTHASTE_MTA_STS) applies recipient domains' MTA-STS
	// policies (RFC 8461); MTASTSPort (POSTHASTE_MTA_STS_PORT) is the port
	// their policies are fetched from, 443 but in tests.
	MTASTS     bool
	MTASTSPort int
	// DANE (POSTHASTE_DANE) checks MX hosts' DNSSEC-validated TLSA records
	// (RFC 7672), trusting the AD bit of POSTHASTE_DNS_SERVER (else of the
	// system's resolvers), which must then validate DNSSEC.
	DANE bool
	// BroadcastRate (POSTHASTE_BROADCAST_RATE) is the emails a second each
	// team's broadcasts hand to the send path, shared by all its
	// broadcasts and all workers.
	BroadcastRate int
	// BroadcastRecheck (POSTHASTE_BROADCAST_RECHECK) is how often a paused
	// broadcast (quota used up, sender domain not verified) looks whether
	// it may go on.
	BroadcastRecheck time.Duration
	// DataExportTTL (POSTHASTE_DATA_EXPORT_TTL) is how long the archive of
	// a data export can be downloaded.
	DataExportTTL time.Duration
	// Pools (POSTHASTE_IP_POOLS) are the IP pools to deliver from, synced
	// into the database at startup; nil when unset, the default pool
	// then being POSTHASTE_SOURCE_IP (or the system's choice) with
	// POSTHASTE_HOSTNAME.
	Pools []ippool.Pool
	// DefaultPool is the pool of teams and domains assigned none:
	// ippool.Default, or the first of Pools when none is named so.
	DefaultPool string
	// Shaping (POSTHASTE_SHAPING) are the traffic shaping limits per
	// destination provider and source address (package shaping); nil when
	// "off". They are shared through REDIS_URL when it is set.
	Shaping shaping.Rules
	// ShapingWait (POSTHASTE_SHAPING_WAIT) is how long a delivery waits
	// for room under them before its recipients are deferred; 0 defers
	// at once.
	ShapingWait time.Duration
	// Warmup (POSTHASTE_WARMUP_SCHEDULE) is the daily volume schedule of
	// new pool addresses (ippool.ParseSchedule); empty: no warm-up.
	Warmup ippool.Schedule
	// WarmupOverflow (POSTHASTE_WARMUP_OVERFLOW) is what becomes of mail
	// for which no address of its pool has allowance left:
	// WarmupWait or WarmupSpill.
	WarmupOverflow string
}

// POSTHASTE_WARMUP_OVERFLOW values: mail over a pool's warm-up allowance
// waits for the next UTC day (deferred, retried by the workflow), or
// spills to the default pool when the worker delivers from it.
const (
	WarmupWait  = "wait"
	WarmupSpill = "spill"
)

// Domains configures sender domains: their keys, records and verification.
type Domains struct {
	// MasterKey is the current master key, which seals secrets at rest
	// (POSTHASTE_MASTER_KEY or _FILE; of a value of several lines, the
	// first); empty when unset (dev then uses <data dir>/master.key).
	MasterKey string
	// PreviousMasterKeys still open what they sealed during a rotation:
	// POSTHASTE_MASTER_KEY_PREVIOUS (or _FILE), comma- or line-separated,
	// after the further lines of POSTHASTE_MASTER_KEY.
	PreviousMasterKeys []string
	DKIMSelector       string // POSTHASTE_DKIM_SELECTOR
	BounceHost         string // POSTHASTE_BOUNCE_HOST: MX of every return path
	SPFInclude         string // POSTHASTE_SPF_INCLUDE: included by every return path's SPF
	// TrackingHost (POSTHASTE_TRACKING_HOST) is where every domain's
	// tracking subdomain points (a CNAME): the host that serves tracked
	// links and open pixels; default the host of POSTHASTE_PUBLIC_URL.
	TrackingHost string
	// LocalTracking is set by `posthaste dev` only, never read from the
	// environment: its own address (e.g. http://localhost:3000) when it has
	// no tracking host but one on this machine. Tracked links and open
	// pixels then point at it and need no DNS record.
	LocalTracking string
	Verify        VerifySchedule
}

// VerifySchedule is when VerifyDomain looks records up.
type VerifySchedule struct {
	Interval    time.Duration // POSTHASTE_VERIFY_INTERVAL: first checks
	FastPeriod  time.Duration // POSTHASTE_VERIFY_FAST_PERIOD: checks at Interval for this long
	MaxInterval time.Duration // POSTHASTE_VERIFY_MAX_INTERVAL: then doubling up to this
	Expire      time.Duration // POSTHASTE_VERIFY_EXPIRE: give up (failed) after this
	Recheck     time.Duration // POSTHASTE_VERIFY_RECHECK: recheck of verified domains
}

// Egress configures the connections made on users' behalf: HTTP to the
// URLs they give (webhooks, attachment paths) and SMTP to the MX hosts of
// their recipients (not to POSTHASTE_RELAY, which the operator chose).
type Egress struct {
	AllowPrivate bool // POSTHASTE_ALLOW_PRIVATE_EGRESS: every address, and plain http
	// Allow (POSTHASTE_EGRESS_ALLOW) lists addresses and CIDR prefixes
	// that may be reached although they are private, loopback...
	Allow []netip.Prefix
}

// OAuth configures dashboard sign-in through Google and GitHub.
type OAuth struct {
	Signup             bool   // POSTHASTE_SIGNUP
	GoogleClientID     string // POSTHASTE_GOOGLE_CLIENT_ID
	GoogleClientSecret string // POSTHASTE_GOOGLE_CLIENT_SECRET
	GoogleIssuer       string // POSTHASTE_GOOGLE_ISSUER
	GitHubClientID     string // POSTHASTE_GITHUB_CLIENT_ID
	GitHubClientSecret string // POSTHASTE_GITHUB_CLIENT_SECRET
	GitHubURL          string // POSTHASTE_GITHUB_URL
	GitHubAPIURL       string // POSTHASTE_GITHUB_API_URL
}

// Admin configures the first-run account of `dev`.
type Admin struct {
	Email string // POSTHASTE_ADMIN_EMAIL
}

// Load reads the configuration.
func Load(getenv Getenv) (Config, error) {
	r := reader{getenv: getenv}
	host, _ := os.Hostname()
	c := Config{
		DataDir:      r.str("POSTHASTE_DATA_DIR", ".posthaste"),
		LogFormat:    r.oneOf("POSTHASTE_LOG_FORMAT", "json", "json", "text"),
		LogLevel:     r.oneOf("POSTHASTE_LOG_LEVEL", "info", "debug", "info", "warn", "error"),
		DatabaseURL:  r.secret("DATABASE_URL"),
		MetricsAddr:  r.str("POSTHASTE_METRICS_ADDR", ":9090"),
		MetricsToken: r.secret("POSTHASTE_METRICS_TOKEN"),
		SystemFrom:   r.str("POSTHASTE_SYSTEM_FROM", ""),
		HTTP: HTTP{Addr: r.str("POSTHASTE_HTTP_ADDR", ":3000"), TrustedProxies: r.list("POSTHASTE_TRUSTED_PROXIES"),
			PublicURL:          strings.TrimRight(r.str("POSTHASTE_PUBLIC_URL", ""), "/"),
			ReadTimeout:        r.duration("POSTHASTE_HTTP_READ_TIMEOUT", 2*time.Minute),
			WriteTimeout:       r.duration("POSTHASTE_HTTP_WRITE_TIMEOUT", 3*time.Minute),
			IdleTimeout:        r.duration("POSTHASTE_HTTP_IDLE_TIMEOUT", 2*time.Minute),
			KeyLookupRate:      r.positive("POSTHASTE_KEY_LOOKUP_RATE", 10),
			SessionIdleTimeout: r.duration("POSTHASTE_SESSION_IDLE_TIMEOUT", 12*time.Hour)},
		Limits: Limits{
			DefaultRate: r.positive("POSTHASTE_DEFAULT_RATE_LIMIT", 10),
			RedisURL:    r.secret("REDIS_URL"),
		},
		Retention: Retention{Period: r.duration("POSTHASTE_RETENTION", 30*24*time.Hour),
			Audit: r.duration("POSTHASTE_AUDIT_RETENTION", 365*24*time.Hour)},
		Health: Health{Window: r.duration("POSTHASTE_HEALTH_WINDOW", 30*24*time.Hour),
			Interval: r.duration("POSTHASTE_HEALTH_INTERVAL", 5*time.Minute), Pause: r.boolean("POSTHASTE_HEALTH_PAUSE", false)},
		Temporal: Temporal{
			Port:          r.port("POSTHASTE_TEMPORAL_PORT", 7233),
			UIPort:        r.port("POSTHASTE_TEMPORAL_UI_PORT", 8233),
			IP:            r.str("POSTHASTE_TEMPORAL_IP", "127.0.0.1"),
			Namespace:     r.str("TEMPORAL_NAMESPACE", "default"),
			UIURL:         r.str("POSTHASTE_TEMPORAL_UI_URL", ""),
			WorkflowCache: r.positive("POSTHASTE_WORKFLOW_CACHE", DefaultWorkflowCache),
			HistoryCache:  r.positive("POSTHASTE_TEMPORAL_HISTORY_CACHE", 0),
		},
		Delivery: Delivery{
			Hostname:     r.str("POSTHASTE_HOSTNAME", host),
			DNSServer:    r.str("POSTHASTE_DNS_SERVER", ""),
			MXPort:       r.port("POSTHASTE_MX_PORT", 25),
			SourceIP:     r.ip("POSTHASTE_SOURCE_IP"),
			Relay:        r.str("POSTHASTE_RELAY", ""),
			RetryInitial: r.duration("POSTHASTE_DELIVERY_RETRY_INITIAL", time.Minute),
			RetryMax:     r.duration("POSTHASTE_DELIVERY_RETRY_MAX", 2*time.Hour),
			RetryExpire:  r.duration("POSTHASTE_DELIVERY_EXPIRE", 72*time.Hour),
			Heartbeat:    r.duration("POSTHASTE_DELIVERY_HEARTBEAT", time.Minute),
			TLSCAFile:    r.str("POSTHASTE_TLS_CA_FILE", ""),
			MTASTS:       r.boolean("POSTHASTE_MTA_STS", true),
			MTASTSPort:   r.port("POSTHASTE_MTA_STS_PORT", 443),
			DANE:         r.boolean("POSTHASTE_DANE", true),
			// A broadcast to a big audience is paced so that it does not
			// crowd out a team's transactional mail for long.
			BroadcastRate:    r.positive("POSTHASTE_BROADCAST_RATE", 100),
			BroadcastRecheck: r.duration("POSTHASTE_BROADCAST_RECHECK", time.Hour),
			DataExportTTL:    r.duration("POSTHASTE_DATA_EXPORT_TTL", 7*24*time.Hour),
			Shaping:          r.shaping("POSTHASTE_SHAPING"),
			ShapingWait:      r.wait("POSTHASTE_SHAPING_WAIT", 5*time.Second),
			WarmupOverflow:   r.oneOf("POSTHASTE_WARMUP_OVERFLOW", WarmupWait, WarmupWait, WarmupSpill),
		},
		Domains: Domains{
			MasterKey:    r.secret("POSTHASTE_MASTER_KEY"),
			DKIMSelector: r.str("POSTHASTE_DKIM_SELECTOR", "posthaste"),
			Verify: VerifySchedule{
				Interval:    r.duration("POSTHASTE_VERIFY_INTERVAL", time.Minute),
				FastPeriod:  r.duration("POSTHASTE_VERIFY_FAST_PERIOD", 10*time.Minute),
				MaxInterval: r.duration("POSTHASTE_VERIFY_MAX_INTERVAL", time.Hour),
				Expire:      r.duration("POSTHASTE_VERIFY_EXPIRE", 72*time.Hour),
				Recheck:     r.duration("POSTHASTE_VERIFY_RECHECK", 24*time.Hour),
			},
		},
		Egress: Egress{AllowPrivate: r.boolean("POSTHASTE_ALLOW_PRIVATE_EGRESS", false),
			Allow: r.prefixes("POSTHASTE_EGRESS_ALLOW")},
		Codec: Codec{Token: r.secret("POSTHASTE_CODEC_TOKEN"), Origins: r.list("POSTHASTE_CODEC_ORIGINS"),
			CacheTTL: r.duration("POSTHASTE_CODEC_CACHE_TTL", 30*time.Second)},
		Webhooks: Webhooks{
			Retry:        r.durations("POSTHASTE_WEBHOOK_RETRY", "5s,5m,30m,2h,5h,10h,10h"),
			Timeout:      r.duration("POSTHASTE_WEBHOOK_TIMEOUT", 15*time.Second),
			DisableAfter: r.duration("POSTHASTE_WEBHOOK_DISABLE_AFTER", 5*24*time.Hour),
		},
		Admin: Admin{Email: strings.ToLower(r.str("POSTHASTE_ADMIN_EMAIL", "admin@posthaste.local"))},
		OAuth: OAuth{
			Signup:             r.boolean("POSTHASTE_SIGNUP", true),
			GoogleClientID:     r.str("POSTHASTE_GOOGLE_CLIENT_ID", ""),
			GoogleClientSecret: r.secret("POSTHASTE_GOOGLE_CLIENT_SECRET"),
			GoogleIssuer:       r.str("POSTHASTE_GOOGLE_ISSUER", "https://accounts.google.com"),
			GitHubClientID:     r.str("POSTHASTE_GITHUB_CLIENT_ID", ""),
			GitHubClientSecret: r.secret("POSTHASTE_GITHUB_CLIENT_SECRET"),
			GitHubURL:          r.str("POSTHASTE_GITHUB_URL", "https://github.com"),
			GitHubAPIURL:       r.str("POSTHASTE_GITHUB_API_URL", "https://api.github.com"),
		},
	}
	// Cookies of a dashboard reached over https are Secure unless told
	// otherwise (RFC 6265 §4.1.2.5).
	c.HTTP.SecureCookies = r.boolean("POSTHASTE_SECURE_COOKIES", c.HTTP.HSTS())
	if c.HTTP.WriteTimeout < c.HTTP.ReadTimeout {
		r.fail("POSTHASTE_HTTP_WRITE_TIMEOUT", c.HTTP.WriteTimeout.String(),
			"must be at least POSTHASTE_HTTP_READ_TIMEOUT: it also runs while the body is read")
	}
	c.CrashAt = r.str("POSTHASTE_TEST_CRASH_AT", "")
	if _, err := faults.Parse(c.CrashAt); err != nil {
		r.fail("POSTHASTE_TEST_CRASH_AT", c.CrashAt, err.Error())
	}
	c.Dispatch = Dispatch{
		RetryMax:             r.duration("POSTHASTE_OUTBOX_RETRY_MAX", 5*time.Minute),
		GiveUp:               r.duration("POSTHASTE_OUTBOX_GIVE_UP", 24*time.Hour),
		ReconcileInterval:    r.duration("POSTHASTE_RECONCILE_INTERVAL", 5*time.Minute),
		ReconcileQueuedAfter: r.duration("POSTHASTE_RECONCILE_QUEUED_AFTER", 15*time.Minute),
		ReconcileMargin:      r.duration("POSTHASTE_RECONCILE_MARGIN", time.Hour),
		ReconcileMaxRestarts: r.positive("POSTHASTE_RECONCILE_MAX_RESTARTS", 3),
	}
	c.Steps = Steps{Window: r.duration("POSTHASTE_STEP_RETRY_WINDOW", 24*time.Hour),
		MaxInterval: r.duration("POSTHASTE_STEP_RETRY_MAX", time.Minute)}
	c.SMTP = SMTP{CertFile: r.str("POSTHASTE_TLS_CERT_FILE", ""), KeyFile: r.str("POSTHASTE_TLS_KEY_FILE", ""),
		MaxConnsPerIP: r.positive("POSTHASTE_SMTP_MAX_CONNS_PER_IP", 20)}
	if v := r.str("POSTHASTE_SMTP_LISTEN", ""); v != "" {
		ls, err := ParseSMTPListen(v)
		if err != nil {
			r.fail("POSTHASTE_SMTP_LISTEN", v, err.Error())
		}
		c.SMTP.Listen = ls
	}
	c.Inbound = Inbound{Listen: r.str("POSTHASTE_INBOUND_LISTEN", ""),
		Hostname:           r.str("POSTHASTE_INBOUND_HOSTNAME", c.Delivery.Hostname),
		MaxMessageBytes:    int64(r.positive("POSTHASTE_INBOUND_MAX_MESSAGE_BYTES", 46137344)),
		MaxRecipients:      r.positive("POSTHASTE_INBOUND_MAX_RECIPIENTS", 100),
		MaxConns:           r.positive("POSTHASTE_INBOUND_MAX_CONNS", 200),
		MaxConnsPerIP:      r.positive("POSTHASTE_INBOUND_MAX_CONNS_PER_IP", 10),
		MaxConnsPerNet:     r.positive("POSTHASTE_INBOUND_MAX_CONNS_PER_NET", 40),
		ConnReservePercent: r.positive("POSTHASTE_INBOUND_CONN_RESERVE_PERCENT", 20),
		SessionTimeout:     r.duration("POSTHASTE_INBOUND_SESSION_TIMEOUT", 20*time.Minute),
		MaxIdleCommands:    r.positive("POSTHASTE_INBOUND_MAX_IDLE_COMMANDS", 30),
		RatePerAddress:     int(r.count("POSTHASTE_INBOUND_RATE_PER_ADDRESS", 30, 1_000_000)),
		RatePerNetwork:     int(r.count("POSTHASTE_INBOUND_RATE_PER_NETWORK", 120, 1_000_000)),
		RateReturnPath:     int(r.count("POSTHASTE_INBOUND_RATE_RETURN_PATH", 60, 1_000_000)),
		DailyMessages:      r.count("POSTHASTE_INBOUND_DAILY_MESSAGES", 10_000, 1_000_000_000),
		StorageBytes:       r.count("POSTHASTE_INBOUND_STORAGE_BYTES", 1<<30, 1<<50)}
	if p := c.Inbound.ConnReservePercent; p > 90 {
		r.fail("POSTHASTE_INBOUND_CONN_RESERVE_PERCENT", strconv.Itoa(p), "must be from 1 to 90")
	}
	for _, d := range r.list("POSTHASTE_FBL_DOMAINS") {
		c.Inbound.FBLDomains = append(c.Inbound.FBLDomains, strings.ToLower(strings.Trim(d, ".")))
	}
	c.Inbound.WorkerSlots = r.positive("POSTHASTE_INBOUND_WORKER_SLOTS", 4)
	if v := c.Inbound.Listen; v != "" && v != "off" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			r.fail("POSTHASTE_INBOUND_LISTEN", v, "must be host:port (like :25) or off")
		}
	}
	if c.Health.Window > c.Retention.Period {
		if v := r.getenv("POSTHASTE_HEALTH_WINDOW"); v != "" {
			r.fail("POSTHASTE_HEALTH_WINDOW", v, "must not be longer than POSTHASTE_RETENTION, which deletes older email")
		}
		c.Health.Window = c.Retention.Period // the default, 30 days, shortened to what is kept
	}
	if (c.SMTP.CertFile == "") != (c.SMTP.KeyFile == "") {
		r.fail("POSTHASTE_TLS_CERT_FILE", c.SMTP.CertFile, "and POSTHASTE_TLS_KEY_FILE must be set together")
	}
	if u := c.HTTP.PublicURL; u != "" && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		r.fail("POSTHASTE_PUBLIC_URL", c.HTTP.PublicURL, "must look like https://mail.example.com")
	}
	if v := r.getenv("POSTHASTE_IP_POOLS"); v != "" {
		pools, err := ippool.Parse(v)
		if err != nil {
			r.fail("POSTHASTE_IP_POOLS", v, "must look like shared=203.0.113.5@mta1.example.com;acme=203.0.113.9@mta9.example.com: "+err.Error())
		}
		c.Delivery.Pools = pools
	}
	c.Delivery.DefaultPool = ippool.DefaultName(c.Delivery.Pools)
	warmup := r.str("POSTHASTE_WARMUP_SCHEDULE", ippool.DefaultScheduleSpec)
	if sched, err := ippool.ParseSchedule(warmup); err != nil {
		r.fail("POSTHASTE_WARMUP_SCHEDULE", warmup, "must be off, a list of daily allowances such as 50,100,200 or START*FACTOR..CAP such as "+
			ippool.DefaultScheduleSpec+": "+err.Error())
	} else {
		c.Delivery.Warmup = sched
	}
	if c.Delivery.Relay != "" && !strings.HasPrefix(c.Delivery.Relay, "smtp://") {
		r.fail("POSTHASTE_RELAY", c.Delivery.Relay, "must look like smtp://host:port")
	}
	c.Domains.BounceHost = strings.TrimSuffix(strings.ToLower(r.str("POSTHASTE_BOUNCE_HOST", c.Delivery.Hostname)), ".")
	c.Domains.SPFInclude = strings.TrimSuffix(strings.ToLower(r.str("POSTHASTE_SPF_INCLUDE", "_spf."+c.Domains.BounceHost)), ".")
	var publicHost string
	if u, err := url.Parse(c.HTTP.PublicURL); err == nil {
		publicHost = u.Hostname()
	}
	c.Domains.TrackingHost = strings.TrimSuffix(strings.ToLower(r.str("POSTHASTE_TRACKING_HOST", publicHost)), ".")
	if h := c.Domains.TrackingHost; h != "" && h != publicHost && (strings.ContainsAny(h, ":/ ") || !strings.Contains(h, ".")) {
		r.fail("POSTHASTE_TRACKING_HOST", h, "must be a host name such as track.example.com")
	}
	if !dnsLabel.MatchString(c.Domains.DKIMSelector) {
		r.fail("POSTHASTE_DKIM_SELECTOR", c.Domains.DKIMSelector, "must be a DNS label (letters, digits, hyphens)")
	}
	c.Domains.MasterKey, c.Domains.PreviousMasterKeys = masterKeys(&r, c.Domains.MasterKey)
	if c.Limits.RedisURL != "" && !strings.HasPrefix(c.Limits.RedisURL, "redis://") &&
		!strings.HasPrefix(c.Limits.RedisURL, "rediss://") && !strings.HasPrefix(c.Limits.RedisURL, "unix://") {
		r.fail("REDIS_URL", redactURL(c.Limits.RedisURL), "must look like redis://host:port/db")
	}
	for _, p := range c.HTTP.TrustedProxies {
		if net.ParseIP(p) == nil {
			if _, _, err := net.ParseCIDR(p); err != nil {
				r.fail("POSTHASTE_TRUSTED_PROXIES", p, "must be IP addresses or CIDRs separated by commas")
			}
		}
	}
	if c.Delivery.DNSServer != "" {
		if _, _, err := net.SplitHostPort(c.Delivery.DNSServer); err != nil {
			r.fail("POSTHASTE_DNS_SERVER", c.Delivery.DNSServer, "must be host:port")
		}
	}
	return c, r.err
}

// LogAttrs returns the effective configuration for the startup log, with
// secrets redacted.
func (c Config) LogAttrs() []any {
	db := "private cluster"
	if c.DatabaseURL != "" {
		db = redactURL(c.DatabaseURL)
	}
	redis := "off (limits per process)"
	if c.Limits.RedisURL != "" {
		redis = redactURL(c.Limits.RedisURL)
	}
	return []any{
		slog.String("data_dir", c.DataDir), slog.String("database", db),
		slog.String("http_addr", c.HTTP.Addr), slog.Int("temporal_port", c.Temporal.Port),
		slog.Int("temporal_ui_port", c.Temporal.UIPort), slog.String("hostname", c.Delivery.Hostname),
		slog.String("dns_server", c.Delivery.DNSServer), slog.Int("mx_port", c.Delivery.MXPort),
		slog.String("relay", c.Delivery.Relay), slog.Bool("mta_sts", c.Delivery.MTASTS),
		slog.Int("mta_sts_port", c.Delivery.MTASTSPort), slog.Bool("dane", c.Delivery.DANE),
		slog.String("shaping", c.Delivery.Shaping.String()), slog.Duration("shaping_wait", c.Delivery.ShapingWait),
		slog.Bool("allow_private_egress", c.Egress.AllowPrivate),
		slog.Any("ip_pools", poolsAttr(c.Delivery.Pools)), slog.String("default_pool", c.Delivery.DefaultPool),
		slog.String("warmup_schedule", c.Delivery.Warmup.String()), slog.String("warmup_overflow", c.Delivery.WarmupOverflow),
		slog.Any("egress_allow", c.Egress.Allow),
		slog.Bool("master_key_set", c.Domains.MasterKey != ""), slog.Int("previous_master_keys", len(c.Domains.PreviousMasterKeys)),
		slog.String("dkim_selector", c.Domains.DKIMSelector),
		slog.String("bounce_host", c.Domains.BounceHost), slog.String("spf_include", c.Domains.SPFInclude),
		slog.String("tracking_host", c.Domains.TrackingHost), slog.String("local_tracking", c.Domains.LocalTracking),
		slog.Duration("verify_interval", c.Domains.Verify.Interval), slog.Duration("verify_expire", c.Domains.Verify.Expire),
		slog.Duration("verify_recheck", c.Domains.Verify.Recheck),
		slog.Duration("step_retry_window", c.Steps.Window), slog.Duration("step_retry_max", c.Steps.MaxInterval),
		slog.Int("default_rate_limit", c.Limits.DefaultRate), slog.String("redis", redis),
		slog.Any("trusted_proxies", c.HTTP.TrustedProxies), slog.Duration("retention", c.Retention.Period),
		slog.Duration("audit_retention", c.Retention.Audit),
		slog.Duration("health_window", c.Health.Window), slog.Duration("health_interval", c.Health.Interval),
		slog.Bool("health_pause", c.Health.Pause),
		slog.Any("webhook_retry", c.Webhooks.Retry), slog.Duration("webhook_timeout", c.Webhooks.Timeout),
		slog.Duration("webhook_disable_after", c.Webhooks.DisableAfter), slog.String("system_from", c.SystemFrom),
		slog.String("public_url", c.HTTP.PublicURL), slog.Bool("secure_cookies", c.HTTP.SecureCookies),
		slog.Bool("hsts", c.HTTP.HSTS()), slog.Duration("http_read_timeout", c.HTTP.ReadTimeout),
		slog.Duration("http_write_timeout", c.HTTP.WriteTimeout), slog.Duration("http_idle_timeout", c.HTTP.IdleTimeout),
		slog.Duration("session_idle_timeout", c.HTTP.SessionIdleTimeout),
		slog.Int("key_lookup_rate", c.HTTP.KeyLookupRate), slog.Bool("metrics_token_set", c.MetricsToken != ""),
		slog.Bool("codec_token_set", c.Codec.Token != ""), slog.Any("codec_origins", c.Codec.Origins),
		slog.Duration("codec_cache_ttl", c.Codec.CacheTTL),
		slog.Duration("outbox_retry_max", c.Dispatch.RetryMax), slog.Duration("outbox_give_up", c.Dispatch.GiveUp),
		slog.Duration("reconcile_interval", c.Dispatch.ReconcileInterval),
		slog.Duration("reconcile_queued_after", c.Dispatch.ReconcileQueuedAfter),
		slog.Duration("reconcile_margin", c.Dispatch.ReconcileMargin),
		slog.Int("reconcile_max_restarts", c.Dispatch.ReconcileMaxRestarts),
		slog.String("inbound_listen", c.Inbound.Listen), slog.String("inbound_hostname", c.Inbound.Hostname),
		slog.Int64("inbound_max_message_bytes", c.Inbound.MaxMessageBytes),
		slog.Int("inbound_max_recipients", c.Inbound.MaxRecipients), slog.Int("inbound_max_conns", c.Inbound.MaxConns),
		slog.Int("inbound_max_conns_per_ip", c.Inbound.MaxConnsPerIP),
		slog.Int("inbound_rate_per_address", c.Inbound.RatePerAddress),
		slog.Int("inbound_rate_per_network", c.Inbound.RatePerNetwork),
		slog.Int("inbound_rate_return_path", c.Inbound.RateReturnPath),
		slog.Int64("inbound_daily_messages", c.Inbound.DailyMessages),
		slog.Int64("inbound_storage_bytes", c.Inbound.StorageBytes),
	}
}

// poolsAttr shows pools as POSTHASTE_IP_POOLS spells them.
func poolsAttr(pools []ippool.Pool) []string {
	out := make([]string, 0, len(pools))
	for _, p := range pools {
		as := make([]string, len(p.Addresses))
		for i, a := range p.Addresses {
			as[i] = a.String()
		}
		out = append(out, p.Name+"="+strings.Join(as, ","))
	}
	return out
}

// redactURL hides the secrets of a URL: the password of its user
// information and the value of every query parameter named like a password,
// secret or token (libpq reads password= and sslpassword= from the query).
// What does not parse as a URL (a key=value connection string) is not shown.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return "(set)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "(redacted)"
		} else {
			for k := range q {
				if n := strings.ToLower(k); strings.Contains(n, "pass") || strings.Contains(n, "secret") ||
					strings.Contains(n, "token") {
					q[k] = []string{"xxxxx"}
				}
			}
			u.RawQuery = q.Encode()
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

type reader struct {
	getenv Getenv
	err    error
}

func (r *reader) fail(name, val, why string) {
	if r.err == nil {
		r.err = fmt.Errorf("%s=%q %s", name, val, why)
	}
}

func (r *reader) str(name, def string) string {
	if v := strings.TrimSpace(r.getenv(name)); v != "" {
		return v
	}
	return def
}

// secret reads name, or the file named by name_FILE.
// masterKeys splits the text of POSTHASTE_MASTER_KEY into the current key
// (its first line) and the previous keys (its further lines, then
// POSTHASTE_MASTER_KEY_PREVIOUS), checking that each one parses.
func masterKeys(r *reader, text string) (current string, previous []string) {
	split := func(s string) []string {
		var out []string
		for _, f := range strings.FieldsFunc(s, func(c rune) bool { return c == ',' || c == '\n' }) {
			if f = strings.TrimSpace(f); f != "" && !strings.HasPrefix(f, "#") {
				out = append(out, f)
			}
		}
		return out
	}
	keys := split(text)
	prev := split(r.secret("POSTHASTE_MASTER_KEY_PREVIOUS"))
	for i, k := range append(append([]string(nil), keys...), prev...) {
		name := "POSTHASTE_MASTER_KEY"
		if i >= len(keys) {
			name += "_PREVIOUS"
		}
		if _, err := seal.ParseKey(k); err != nil {
			r.fail(name, "(redacted)", err.Error())
		}
	}
	if len(keys) == 0 {
		if len(prev) > 0 {
			r.fail("POSTHASTE_MASTER_KEY_PREVIOUS", "(redacted)", "needs POSTHASTE_MASTER_KEY, the current key")
		}
		return "", nil
	}
	return keys[0], append(keys[1:], prev...)
}

func (r *reader) secret(name string) string {
	if v := r.getenv(name); v != "" {
		return v
	}
	if path := r.getenv(name + "_FILE"); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			r.fail(name+"_FILE", path, "cannot be read: "+err.Error())
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return ""
}

func (r *reader) oneOf(name, def string, allowed ...string) string {
	v := r.str(name, def)
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	r.fail(name, v, "must be one of "+strings.Join(allowed, ", "))
	return def
}

func (r *reader) port(name string, def int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > 65535 {
		r.fail(name, v, "must be a port number from 0 to 65535")
		return def
	}
	return n
}

func (r *reader) positive(name string, def int) int {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000 {
		r.fail(name, v, "must be a whole number from 1 to 1000000")
		return def
	}
	return n
}

// count reads a whole number from 0 (none, for a limit) to most.
func (r *reader) count(name string, def, most int64) int64 {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > most {
		r.fail(name, v, fmt.Sprintf("must be a whole number from 0 (no limit) to %d", most))
		return def
	}
	return n
}

// list reads a comma-separated list; empty items are dropped.
func (r *reader) list(name string) []string {
	var out []string
	for _, p := range strings.Split(r.getenv(name), ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// prefixes reads a comma-separated list of IP addresses and CIDR prefixes.
func (r *reader) prefixes(name string) []netip.Prefix {
	v := r.getenv(name)
	out, err := egress.ParseAllowList(v)
	if err != nil {
		r.fail(name, v, "must be IP addresses or CIDR prefixes separated by commas: "+err.Error())
	}
	return out
}

func (r *reader) boolean(name string, def bool) bool {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(name, v, "must be true or false")
		return def
	}
	return b
}

func (r *reader) duration(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		r.fail(name, v, "must be a positive duration such as 30s or 5m")
		return def
	}
	return d
}

// wait reads a duration that may be 0.
func (r *reader) wait(name string, def time.Duration) time.Duration {
	v := r.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		r.fail(name, v, "must be a duration such as 5s, or 0")
		return def
	}
	return d
}

// shaping reads traffic shaping rules (shaping.ParseRules).
func (r *reader) shaping(name string) shaping.Rules {
	v := r.getenv(name)
	rules, err := shaping.ParseRules(v)
	if err != nil {
		r.fail(name, v, err.Error())
		return shaping.DefaultRules()
	}
	return rules
}

func (r *reader) ip(name string) net.IP {
	v := r.getenv(name)
	if v == "" {
		return nil
	}
	ip := net.ParseIP(v)
	if ip == nil {
		r.fail(name, v, "must be an IP address")
	}
	return ip
}

// durations reads a comma-separated list of positive durations.
func (r *reader) durations(name, def string) []time.Duration {
	v := r.str(name, def)
	var out []time.Duration
	for _, f := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			r.fail(name, v, "must be a comma-separated list of positive durations such as 5s,5m,30m")
			return nil
		}
		out = append(out, d)
	}
	return out
}
