package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	tlog "go.temporal.io/sdk/log"

	"github.com/posthaste/posthaste/api"
	"github.com/posthaste/posthaste/internal/account"
	"github.com/posthaste/posthaste/internal/audience"
	"github.com/posthaste/posthaste/internal/auditlog"
	"github.com/posthaste/posthaste/internal/auth"
	"github.com/posthaste/posthaste/internal/automations"
	"github.com/posthaste/posthaste/internal/broadcast"
	"github.com/posthaste/posthaste/internal/codec"
	"github.com/posthaste/posthaste/internal/config"
	"github.com/posthaste/posthaste/internal/dane"
	"github.com/posthaste/posthaste/internal/dashboard"
	"github.com/posthaste/posthaste/internal/datareq"
	"github.com/posthaste/posthaste/internal/dnscache"
	"github.com/posthaste/posthaste/internal/domains"
	"github.com/posthaste/posthaste/internal/egress"
	"github.com/posthaste/posthaste/internal/faults"
	"github.com/posthaste/posthaste/internal/health"
	"github.com/posthaste/posthaste/internal/imports"
	"github.com/posthaste/posthaste/internal/inmail"
	"github.com/posthaste/posthaste/internal/keyring"
	"github.com/posthaste/posthaste/internal/mta"
	"github.com/posthaste/posthaste/internal/mtasts"
	"github.com/posthaste/posthaste/internal/outbox"
	"github.com/posthaste/posthaste/internal/ratelimit"
	"github.com/posthaste/posthaste/internal/receiving"
	"github.com/posthaste/posthaste/internal/records"
	"github.com/posthaste/posthaste/internal/reports"
	"github.com/posthaste/posthaste/internal/reqlog"
	"github.com/posthaste/posthaste/internal/seal"
	"github.com/posthaste/posthaste/internal/shaping"
	"github.com/posthaste/posthaste/internal/store"
	"github.com/posthaste/posthaste/internal/submit"
	"github.com/posthaste/posthaste/internal/submit/delivery"
	"github.com/posthaste/posthaste/internal/telemetry"
	"github.com/posthaste/posthaste/internal/templates"
	"github.com/posthaste/posthaste/internal/tracking"
	"github.com/posthaste/posthaste/internal/unsubscribe"
	"github.com/posthaste/posthaste/internal/unsubscribe/mailto"
	"github.com/posthaste/posthaste/internal/usage"
	"github.com/posthaste/posthaste/internal/webhook"
	"github.com/posthaste/posthaste/smtpgw"
	"github.com/posthaste/posthaste/worker"
	"github.com/posthaste/posthaste/workflows"
)

// shutdownBudget bounds a graceful stop.
const shutdownBudget = 10 * time.Second

// keyCacheTTL bounds how long a key revoked on another process keeps
// working, and how long a team's sending pause (or its lifting) takes to
// reach this process.
const keyCacheTTL = time.Second

func openStore(ctx context.Context, url string, logger *slog.Logger) (*store.Store, error) {
	return openStoreWith(ctx, store.Config{URL: url}, logger)
}

// openSealedStore opens the store of a process that serves (api, worker,
// mx, smtp, dev): on url, migrated first when migrate is set, sealing mail
// content at rest (bodies, built and submitted messages, attachments,
// inbound and received mail) with each team's data key, sealed in turn
// with the master key (masterRing: the configuration's, else devKeyFile's).
// keys is that master keyring pinned to the installation (pinMasterKey).
// Without a master key (production before any domain exists) keys is nil,
// content is stored as it is, and a warning says so.
func openSealedStore(ctx context.Context, cfg config.Domains, url, devKeyFile string, migrate bool,
	logger *slog.Logger) (st *store.Store, keys *seal.Box, err error) {
	box, err := masterRing(cfg, devKeyFile, true)
	if err != nil {
		return nil, nil, err
	}
	rc := recordsConfig(cfg)
	scfg := store.Config{URL: url, DomainRecords: func(d store.Domain) any { return domains.RecordsJSON(rc, d) }}
	if box != nil { // never a nil *seal.Box in the interface
		scfg.MasterKey = box
	}
	if st, err = openStoreWith(ctx, scfg, logger); err != nil {
		return nil, nil, err
	}
	if migrate {
		err = st.Migrate(ctx)
	}
	if err == nil {
		keys, err = pinMasterKey(ctx, st, box)
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	if keys == nil {
		logger.Warn("no master key (POSTHASTE_MASTER_KEY): message bodies, attachments and received mail are stored unencrypted")
	}
	return st, keys, nil
}

// openStoreWith opens the store of cfg (its URL, sealing and domain
// records), with the server's pool size and logger.
func openStoreWith(ctx context.Context, cfg store.Config, logger *slog.Logger) (*store.Store, error) {
	if cfg.URL == "" {
		return nil, errors.New("DATABASE_URL is not set")
	}
	cfg.MaxConns, cfg.Logger = 32, logger.With("component", "store")
	st, err := store.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := st.Ping(ctx); err != nil {
		st.Close()
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	return st, nil
}

// dialTemporal connects to the Temporal frontend. hostPort "" reads
// Temporal's own TEMPORAL_* variables and config file (envconfig). pc,
// when not nil, encrypts the personal data of every payload the client
// writes (codec.NewDataConverter).
func dialTemporal(ctx context.Context, hostPort, namespace string, pc *codec.Codec, logger *slog.Logger) (client.Client, error) {
	opts := client.Options{HostPort: hostPort, Namespace: namespace}
	if hostPort == "" {
		var err error
		if opts, err = envconfig.LoadDefaultClientOptions(); err != nil {
			return nil, fmt.Errorf("reading Temporal client configuration: %w", err)
		}
	}
	if pc != nil {
		opts.DataConverter = codec.NewDataConverter(opts.DataConverter, pc)
	}
	opts.Logger = tlog.NewStructuredLogger(logger.With("component", "temporal-sdk"))
	c, err := client.DialContext(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("connecting to Temporal at %s: %w", opts.HostPort, err)
	}
	return c, nil
}

// newResolver returns the resolver of lookups that keep nothing (domain
// verification, webhook and policy hosts): the one DNS server of
// POSTHASTE_DNS_SERVER, or nil for the system's. Delivery has its own,
// which keeps answers for their TTL (deliveryResolver).
func newResolver(cfg config.Delivery) *net.Resolver {
	if cfg.DNSServer == "" {
		return nil
	}
	server := cfg.DNSServer
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, server)
	}}
}

// dnsServers returns the DNS servers delivery asks: the one of
// POSTHASTE_DNS_SERVER, else the nameservers of /etc/resolv.conf.
func dnsServers(cfg config.Delivery) ([]string, error) {
	if cfg.DNSServer != "" {
		return []string{cfg.DNSServer}, nil
	}
	servers, err := dnscache.ServersFromResolvConf("/etc/resolv.conf")
	if err == nil && len(servers) == 0 {
		err = errors.New("/etc/resolv.conf lists no nameserver")
	}
	return servers, err
}

// deliveryResolver returns the caching resolver of outbound delivery (MX
// records, MX hosts' addresses, _mta-sts records), asking servers; without
// any (no usable /etc/resolv.conf) it asks a resolver on localhost, as Go's
// and the C library's do.
func deliveryResolver(servers []string, serversErr error, logger *slog.Logger) (*dnscache.Resolver, error) {
	if serversErr != nil {
		servers = []string{"127.0.0.1:53", "[::1]:53"}
		logger.Warn("no DNS server configured, asking localhost", "err", serversErr)
	}
	return dnscache.New(dnscache.Config{Servers: servers})
}

// rootCAs is the system's roots plus those of POSTHASTE_TLS_CA_FILE; nil
// (the system's) when the variable is unset.
func rootCAs(cfg config.Delivery) (*x509.CertPool, error) {
	if cfg.TLSCAFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(cfg.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("POSTHASTE_TLS_CA_FILE: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("POSTHASTE_TLS_CA_FILE=%s holds no PEM certificate", cfg.TLSCAFile)
	}
	return pool, nil
}

// pinMasterKey checks the master keyring box against st and returns it
// with the installation's stored token keys (tokenKeyPurposes) pinned
// (keyring.Pin), which a rotation of the master key leaves as they are. A
// nil box is refused when st holds secrets sealed with a master key, else
// nil.
func pinMasterKey(ctx context.Context, st *store.Store, box *seal.Box) (*seal.Box, error) {
	if box == nil {
		has, err := st.Sessions.HasSealedSecrets(ctx)
		if err != nil {
			return nil, fmt.Errorf("checking for sealed secrets: %w", err)
		}
		if has {
			return nil, errors.New("POSTHASTE_MASTER_KEY (or POSTHASTE_MASTER_KEY_FILE) is required: DKIM keys, TOTP secrets, data keys or subject keys sealed with it exist")
		}
		return nil, nil
	}
	return keyring.Pin(ctx, st, box, tokenKeyPurposes())
}

// masterRing is the master keyring that seals DKIM keys, webhook and
// TOTP secrets and the teams' data keys: POSTHASTE_MASTER_KEY (the current
// key) and POSTHASTE_MASTER_KEY_PREVIOUS, else (dev only, devKeyFile set)
// a key file made on first run when create is set, whose first line is
// the current key, else nil. Without either, a process may run as long as
// no domain exists; domains cannot be added then.
func masterRing(cfg config.Domains, devKeyFile string, create bool) (*seal.Box, error) {
	var keys [][]byte
	switch {
	case cfg.MasterKey != "":
		for _, text := range append([]string{cfg.MasterKey}, cfg.PreviousMasterKeys...) {
			k, err := seal.ParseKey(text) // config.Load checked them
			if err != nil {
				return nil, fmt.Errorf("master key: %w", err)
			}
			keys = append(keys, k)
		}
	case devKeyFile != "":
		var err error
		if create {
			keys, err = seal.LoadOrCreateKeyFile(devKeyFile)
		} else {
			keys, err = seal.ReadKeyFile(devKeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
	default:
		return nil, nil
	}
	box, err := seal.NewRing(keys[0], keys[1:]...)
	if err != nil {
		return nil, fmt.Errorf("master key: %w", err)
	}
	return box, nil
}

// tokenKeyPurposes are the purposes of every key derived from the master
// key (seal.Box.DeriveKey): each is stored once, sealed, and then kept
// across rotations of the master key, because what it signs or seals is
// in mail already sent. A new purpose must be listed here.
func tokenKeyPurposes() []string {
	return []string{unsubscribe.KeyPurpose, mailto.KeyPurpose, tracking.KeyPurpose,
		reports.VERPKeyPurpose, api.DownloadKeyPurpose, codec.SubjectIDPurpose}
}

// payloadCodec is the codec that encrypts the personal data in Temporal
// payloads under subject keys sealed with the master key; nil (payloads
// in the clear, with a warning) without a master key.
func payloadCodec(cfg config.Codec, keys *seal.Box, st *store.Store, logger *slog.Logger) (*codec.Codec, error) {
	if keys == nil {
		if cfg.Token != "" {
			return nil, usageError{errors.New("POSTHASTE_CODEC_TOKEN needs a master key (POSTHASTE_MASTER_KEY)")}
		}
		logger.Warn("no master key: recipient addresses in Temporal histories are not encrypted")
		return nil, nil
	}
	k, err := codec.NewKeys(codec.Config{CacheTTL: cfg.CacheTTL}, keys, st.Privacy)
	if err != nil {
		return nil, err
	}
	return codec.New(k), nil
}

// codecHandler is the Temporal codec endpoint: nil (off) without
// POSTHASTE_CODEC_TOKEN or a codec.
func codecHandler(cfg config.Codec, pc *codec.Codec) http.Handler {
	if cfg.Token == "" || pc == nil {
		return nil
	}
	return codec.Handler(codec.HandlerConfig{Token: cfg.Token, Origins: cfg.Origins}, pc)
}

// unsubscribeKey is the key of unsubscribe tokens, derived from the
// master key for that purpose only; nil without a master key.
func unsubscribeKey(keys *seal.Box) []byte {
	if keys == nil {
		return nil
	}
	return keys.DeriveKey(unsubscribe.KeyPurpose)
}

var _ api.UnsubscribeHandler = (*unsubscribe.Handler)(nil)

func verifySchedule(cfg config.Config) workflows.VerifySchedule {
	v := cfg.Domains.Verify
	return workflows.VerifySchedule{Interval: v.Interval, FastPeriod: v.FastPeriod,
		MaxInterval: v.MaxInterval, Expire: v.Expire, Recheck: v.Recheck, Steps: stepPolicy(cfg.Steps)}
}

// crasher is the crash point of POSTHASTE_TEST_CRASH_AT (config.Load
// checked it), nil when unset.
func crasher(cfg config.Config) *faults.Crasher {
	c, _ := faults.Parse(cfg.CrashAt)
	return c
}

func stepPolicy(cfg config.Steps) workflows.StepPolicy {
	return workflows.StepPolicy{Window: cfg.Window, MaxInterval: cfg.MaxInterval}
}

func recordsConfig(cfg config.Domains) records.Config {
	return records.Config{BounceHost: cfg.BounceHost, SPFInclude: cfg.SPFInclude, TrackingHost: cfg.TrackingHost,
		LocalTracking: cfg.LocalTracking}
}

// sharedTrackingHost is the host that serves every tracking token: the
// operator's tracking host, or in dev without one the host of its own
// address (config.Domains.LocalTracking).
func sharedTrackingHost(cfg config.Domains) string {
	if cfg.LocalTracking != "" {
		if u, err := url.Parse(cfg.LocalTracking); err == nil {
			return strings.ToLower(u.Hostname())
		}
	}
	return cfg.TrackingHost
}

// mtaConfig is what the MTA clients of every IP pool share (each gets its
// address's source IP and EHLO name): MX hosts are reached under the
// egress policy (POSTHASTE_ALLOW_PRIVATE_EGRESS, POSTHASTE_EGRESS_ALLOW),
// the relay whatever its address; recipient domains' MTA-STS policies are
// fetched through the egress guard (POSTHASTE_MTA_STS) and their MX hosts'
// TLSA records looked up (POSTHASTE_DANE), with one policy cache for all;
// traffic to them is shaped by sh (nil: not shaped), shared by all.
//
// One resolver, which keeps answers for their TTL (package dnscache),
// answers the lookups of delivery.
func mtaConfig(cfg config.Delivery, eg config.Egress, sh *shaping.Shaper, logger *slog.Logger) (mta.Config, error) {
	roots, err := rootCAs(cfg)
	if err != nil {
		return mta.Config{}, err
	}
	servers, serversErr := dnsServers(cfg)
	resolver, err := deliveryResolver(servers, serversErr, logger)
	if err != nil {
		return mta.Config{}, err
	}
	mcfg := mta.Config{
		Hostname: cfg.Hostname,
		Resolver: resolver,
		RootCAs:  roots,
		Port:     cfg.MXPort,
		SourceIP: cfg.SourceIP,
		Relay:    cfg.Relay,
		Egress:   egress.Policy{AllowPrivate: eg.AllowPrivate, Allow: eg.Allow},
		Shaping:  sh,
		Logger:   logger.With("component", "mta"),
	}
	if cfg.MTASTS {
		fetch := egress.New(egress.Config{AllowPrivate: eg.AllowPrivate, Allow: eg.Allow,
			Resolver: newResolver(cfg), RootCAs: roots, Timeout: 30 * time.Second})
		mcfg.STS, err = mtasts.New(mtasts.Config{Resolver: resolver, HTTP: fetch.HTTPClient(),
			Port: cfg.MTASTSPort, Logger: logger.With("component", "mta-sts")})
		if err != nil {
			return mta.Config{}, err
		}
	}
	if cfg.DANE {
		err := serversErr
		if err == nil {
			mcfg.DANE, err = dane.New(dane.Config{Servers: servers})
		}
		if err != nil {
			// Without a resolver to ask, DANE cannot apply; delivery
			// goes on under the other policies.
			logger.Warn("DANE is off: no DNS server to ask", "err", err)
		}
	}
	return mcfg, nil
}

func deliveryPolicy(cfg config.Config) workflows.DeliveryPolicy {
	d := cfg.Delivery
	return workflows.DeliveryPolicy{Initial: d.RetryInitial, Backoff: 2, Max: d.RetryMax, Expire: d.RetryExpire,
		Steps: stepPolicy(cfg.Steps), Heartbeat: d.Heartbeat}
}

// intake is what accepts mail in a process, shared by the HTTP API and
// the SMTP gateway: the submit service, the key authenticator, the rate
// limiter, the request log writer and the outbox dispatcher.
type intake struct {
	submit     *submit.Service
	auth       *auth.Authenticator
	limiter    api.Limiter
	logs       *reqlog.Writer
	dispatcher *outbox.Dispatcher
	// close writes the buffered request log and releases Redis; call it
	// after the servers finished their requests.
	close func()
}

func newIntake(ctx context.Context, cfg config.Config, st *store.Store, tc client.Client,
	metrics *telemetry.Metrics, logger *slog.Logger) (*intake, error) {
	// Today's and the coming week's request log partitions; the writer
	// and the retention sweep keep creating them ahead.
	if err := st.Insights.EnsureRequestLogPartitions(ctx, time.Now(), 8); err != nil {
		return nil, err
	}
	var limiter api.Limiter = ratelimit.NewLocal(ratelimit.LocalConfig{})
	closeRedis := func() error { return nil }
	if cfg.Limits.RedisURL != "" {
		rl, closeFn, err := ratelimit.NewRedis(ratelimit.RedisConfig{URL: cfg.Limits.RedisURL}, logger.With("component", "ratelimit"))
		if err != nil {
			return nil, err
		}
		limiter, closeRedis = rl, closeFn
	}
	logs := reqlog.New(reqlog.Config{Dropped: metrics.RequestLogDropped, Logger: logger.With("component", "reqlog")}, st.Insights)
	disp := newDispatcher(cfg, st, tc, metrics, logger)
	sub := submit.New(submit.Config{
		Store:    submit.StoreOf(st),
		Notifier: disp,
		Fetcher:  egress.New(egress.Config{AllowPrivate: cfg.Egress.AllowPrivate, Allow: cfg.Egress.Allow}),
		Waker:    worker.NewWaker(tc),
		Logger:   logger.With("component", "submit"),
		Crash:    crasher(cfg),
		// Unsubscribe links of sends with a topic lead here.
		PublicURL: cfg.HTTP.PublicURL,
		// Teams paused for their account health are refused; a pause, or
		// its lifting, reaches this process within a second.
		Health: health.NewPauseCache(st.Insights, keyCacheTTL),
	})
	closeAll := func() {
		sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
		defer cancel()
		if err := logs.Close(sctx); err != nil {
			logger.Warn("request log not fully written at shutdown", "err", err)
		}
		_ = closeRedis()
	}
	return &intake{submit: sub, auth: auth.NewAuthenticator(st.Accounts, keyCacheTTL), limiter: limiter, logs: logs,
		dispatcher: disp, close: closeAll}, nil
}

// newFrontDoor returns the HTTP handler: the API, the dashboard and the
// operations endpoints.
// publicMetrics is what the public HTTP listener serves at /metrics: in
// `dev` the registry, open as before; in `api`, whose port faces every
// client, the registry only when POSTHASTE_METRICS_TOKEN is set (then
// /metrics requires it), and no /metrics otherwise (404).
func publicMetrics(reg *prometheus.Registry, token string, dev bool) prometheus.Gatherer {
	if !dev && token == "" {
		return nil
	}
	return reg
}

func newFrontDoor(cfg config.Config, st *store.Store, tc client.Client, in *intake, keys *seal.Box, pc *codec.Codec,
	gatherer prometheus.Gatherer, metrics *telemetry.Metrics, ready []api.Check, temporalUI string,
	logger *slog.Logger) (http.Handler, error) {
	verifier := worker.NewVerifier(tc, verifySchedule(cfg))
	mail, err := newSystemMailer(cfg.SystemFrom, st, in.submit, logger)
	if err != nil {
		return nil, usageError{err}
	}
	var mailer dashboard.Mailer
	if mail != nil {
		mailer = mail
	}
	// The use cases the API and the dashboard share, built once for both.
	broadcasts := broadcast.NewService(broadcast.Config{Store: st, Submit: in.submit, Waker: worker.NewBroadcastWaker(tc),
		Outbox: in.dispatcher, Logger: logger})
	domainSvc := domains.New(domains.Config{Keys: keys, DKIMSelector: cfg.Domains.DKIMSelector, Verifier: verifier,
		Logger: logger}, st)
	webhookWaker := worker.NewWebhookWaker(tc, stepPolicy(cfg.Steps))
	hookClient := webhookClient(cfg)
	endpoints := webhook.NewEndpoints(webhook.EndpointsConfig{Keys: keys, Client: hookClient, Waker: webhookWaker,
		AllowHTTP: cfg.Egress.AllowPrivate, Logger: logger}, st)
	importSvc := imports.New(imports.Config{Outbox: in.dispatcher}, st)
	audienceSvc := audience.New(st.Audience)
	dataRequests := datareq.New(datareq.Config{Keys: keys, Outbox: in.dispatcher}, st)
	auditLog := auditlog.New(st)
	// Reading sent emails and the suppression list; reading received mail.
	emails, received := submit.NewEmails(st.Emails), receiving.New(st.Received)
	accounts := account.New(account.Config{Store: st})
	templateSvc := templates.New(st)
	automationSvc := automations.NewService(st)
	// The request log, email metrics, quota used and account health.
	usageSvc := usage.New(st.Insights, st.Accounts)
	// The default inbound budget, which the Receiving page shows nearly spent
	// (the MX enforces it: mx.go).
	inboundBudget := inmail.Budget{DailyMessages: cfg.Inbound.DailyMessages, StorageBytes: cfg.Inbound.StorageBytes}
	dash, err := dashboard.New(dashboard.Config{InboundBudget: inboundBudget, Auth: in.auth, TemporalUIURL: temporalUI,
		Emails: emails, Received: received, Usage: usageSvc,
		Domains: domainSvc, Webhooks: endpoints, Imports: importSvc, DataRequests: dataRequests, Broadcasts: broadcasts,
		Audience: audienceSvc, Templates: templateSvc, AuditLog: auditLog, Records: recordsConfig(cfg.Domains), Keys: keys,
		OAuth: oauthConfig(cfg.OAuth), PublicURL: cfg.HTTP.PublicURL, Mailer: mailer,
		Namespace: cfg.Temporal.Namespace, SecureCookies: cfg.HTTP.SecureCookies, SessionIdleTimeout: cfg.HTTP.SessionIdleTimeout,
		TrustedProxies: cfg.HTTP.TrustedProxies, Logger: logger, SMTP: dashboardSMTP(smtpListeners(cfg.SMTP, config.DefaultSMTPListen)),
		Warmup: cfg.Delivery.Warmup, WarmupOverflow: cfg.Delivery.WarmupOverflow, DefaultPool: cfg.Delivery.DefaultPool,
		Accounts: accounts, Automations: automationSvc})
	if err != nil {
		return nil, fmt.Errorf("loading the dashboard: %w", err)
	}
	var unsub api.UnsubscribeHandler
	if keys != nil {
		sealer, err := unsubscribe.NewSealer(unsubscribeKey(keys))
		if err != nil {
			return nil, err
		}
		uh, err := unsubscribe.NewHandler(unsubscribe.Config{Sealer: sealer, PublicURL: cfg.HTTP.PublicURL,
			Limiter: in.limiter, Logger: logger}, st.Audience)
		if err != nil {
			return nil, err
		}
		unsub = uh
	}
	var track api.TrackingHandler
	if keys != nil {
		sealer, err := tracking.NewSealer(keys.DeriveKey(tracking.KeyPurpose))
		if err != nil {
			return nil, err
		}
		// The operator's host is normalised by config.Load.
		th, err := tracking.NewHandler(tracking.Config{Sealer: sealer, Limiter: in.limiter, Outbox: in.dispatcher,
			SharedHost: sharedTrackingHost(cfg.Domains), TeamHost: st.Emails.IsTeamTrackingHost, Logger: logger}, st.Emails)
		if err != nil {
			return nil, err
		}
		track = th
	}
	h, err := api.New(api.Config{
		Auth:         in.auth,
		Submit:       in.submit,
		Emails:       emails,
		Received:     received,
		Usage:        usageSvc,
		Domains:      domainSvc,
		Webhooks:     endpoints,
		Imports:      importSvc,
		Audience:     audienceSvc,
		DataRequests: dataRequests,
		Broadcasts:   broadcasts,
		Templates:    templateSvc,
		Automations:  automationSvc,
		Accounts:     accounts,
		AuditLog:     auditLog,
		Records:      recordsConfig(cfg.Domains),
		Keys:         keys,
		Metrics:      metrics,
		Gatherer:     gatherer,
		Ready:        ready,
		// The base of the download URLs of received emails.
		PublicURL:        cfg.HTTP.PublicURL,
		Dashboard:        dash,
		Unsubscribe:      unsub,
		Tracking:         track,
		Codec:            codecHandler(cfg.Codec, pc),
		Logger:           logger,
		Limiter:          in.limiter,
		DefaultRateLimit: cfg.Limits.DefaultRate,
		RequestLog:       in.logs,
		TrustedProxies:   cfg.HTTP.TrustedProxies,
		KeyLookupRate:    cfg.HTTP.KeyLookupRate,
		MetricsToken:     cfg.MetricsToken,
		HSTS:             cfg.HTTP.HSTS(),
	})
	if err != nil {
		return nil, usageError{fmt.Errorf("POSTHASTE_TRUSTED_PROXIES: %w", err)}
	}
	return h, nil
}

// dashboardSMTP is what the dashboard's quick start tells mail clients:
// the ports of the SMTP gateway's listeners (POSTHASTE_SMTP_LISTEN) and
// the user name; the dashboard shows the public URL's host.
func dashboardSMTP(listeners []config.SMTPListener) dashboard.SMTPSettings {
	s := dashboard.SMTPSettings{Username: smtpgw.Username}
	for _, l := range listeners {
		_, p, err := net.SplitHostPort(l.Addr)
		if err != nil {
			continue
		}
		port, err := strconv.Atoi(p)
		if err != nil || port == 0 {
			continue
		}
		if l.ImplicitTLS {
			s.TLSPorts = append(s.TLSPorts, port)
		} else {
			s.STARTTLSPorts = append(s.STARTTLSPorts, port)
		}
	}
	return s
}

func oauthConfig(c config.OAuth) dashboard.OAuth {
	return dashboard.OAuth{Signup: c.Signup,
		Google: dashboard.Provider{ClientID: c.GoogleClientID, ClientSecret: c.GoogleClientSecret, Issuer: c.GoogleIssuer},
		GitHub: dashboard.Provider{ClientID: c.GitHubClientID, ClientSecret: c.GitHubClientSecret, URL: c.GitHubURL, APIURL: c.GitHubAPIURL}}
}

// reconcileInput is the input of the reconciler's runs: emails sent are
// given the delivery window plus a margin to reach an outcome.
func reconcileInput(cfg config.Config) workflows.ReconcileInput {
	return workflows.ReconcileInput{QueuedAfter: cfg.Dispatch.ReconcileQueuedAfter,
		DeliveryWindow: cfg.Delivery.RetryExpire + cfg.Dispatch.ReconcileMargin,
		MaxRestarts:    cfg.Dispatch.ReconcileMaxRestarts, Limit: 500}
}

// keepSchedules makes sure the retention, reconcile and account health
// Schedules exist and are up to date (worker.KeepSchedules); call the
// result to stop.
func keepSchedules(cfg config.Config, tc client.Client, logger *slog.Logger) (stop func()) {
	return worker.KeepSchedules(logger.With("component", "schedules"),
		func(ctx context.Context) error {
			return worker.EnsureRetentionSchedule(ctx, tc, retentionInput(cfg.Retention))
		},
		func(ctx context.Context) error {
			return worker.EnsureReconcileSchedule(ctx, tc, cfg.Dispatch.ReconcileInterval, reconcileInput(cfg))
		},
		func(ctx context.Context) error {
			return worker.EnsureHealthSchedule(ctx, tc, cfg.Health.Interval, healthInput(cfg.Health))
		})
}

func retentionInput(cfg config.Retention) workflows.RetentionInput {
	return workflows.RetentionInput{Period: cfg.Period, AuditPeriod: cfg.Audit, BatchSize: 500, Pause: 50 * time.Millisecond}
}

// startDispatcher runs the outbox dispatcher until the returned stop
// function is called; stop waits for it.
func startDispatcher(d *outbox.Dispatcher) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	return func() { cancel(); <-done }
}

func readyChecks(st *store.Store, tc client.Client) []api.Check {
	return []api.Check{
		{Name: "postgres", Check: st.Ping},
		{Name: "temporal", Check: func(ctx context.Context) error {
			_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
			return err
		}},
	}
}

// webhookClient posts webhooks through the egress guard with the
// configured attempt timeout.
func webhookClient(cfg config.Config) *webhook.Client {
	return webhook.NewClient(egress.New(egress.Config{
		AllowPrivate: cfg.Egress.AllowPrivate,
		Allow:        cfg.Egress.Allow,
		Resolver:     newResolver(cfg.Delivery),
		Timeout:      cfg.Webhooks.Timeout,
	}), webhook.ClientConfig{Timeout: cfg.Webhooks.Timeout})
}

// newActivities wires the activities, each workflow's built once by the
// package of its area. outbox (may be nil) is the outbox dispatcher of
// this process, poked when events queue webhook messages; tc is the
// Temporal client the reconciler and erasures ask about and restart
// workflows with. POSTHASTE_IP_POOLS is synced into the database first;
// the activities deliver from the IP pools named in pools (nil: all, see
// newSenders), which it returns as worker.Config.Pools names them.
func newActivities(ctx context.Context, cfg config.Config, st *store.Store, tc client.Client, keys *seal.Box,
	pc *codec.Codec, metrics *telemetry.Metrics, outbox delivery.Notifier, pools []string,
	logger *slog.Logger) (worker.Activities, []string, func(), error) {
	var none worker.Activities
	if err := syncPools(ctx, st, cfg.Delivery.Pools); err != nil {
		return none, nil, nil, err
	}
	sh, err := newShaper(cfg, metrics, logger)
	if err != nil {
		return none, nil, nil, err
	}
	base, err := mtaConfig(cfg.Delivery, cfg.Egress, sh, logger)
	if err != nil {
		closeShaper(sh)
		return none, nil, nil, err
	}
	d, err := newSenders(ctx, cfg.Delivery, base, st, pools, logger)
	if err != nil {
		closeShaper(sh)
		return none, nil, nil, err
	}
	sub := submit.New(submit.Config{Store: submit.StoreOf(st), Notifier: outbox, Logger: logger.With("component", "submit")})
	notices, err := newSystemMailer(cfg.SystemFrom, st, sub, logger)
	if err != nil {
		d.Close()
		closeShaper(sh)
		return none, nil, nil, err
	}
	wcfg := webhook.ActivitiesConfig{
		Client:       webhookClient(cfg),
		Keys:         keys,
		Schedule:     cfg.Webhooks.Retry,
		DisableAfter: cfg.Webhooks.DisableAfter,
		Metrics:      metrics,
		Logger:       logger,
	}
	if notices != nil {
		wcfg.Notices = notices
	}
	links, err := unsubscribe.NewLinks(cfg.HTTP.PublicURL, unsubscribeKey(keys))
	if err != nil {
		d.Close()
		closeShaper(sh)
		return none, nil, nil, err
	}
	starter, crash := worker.NewStarter(tc, deliveryPolicy(cfg)), crasher(cfg)
	acts := worker.Activities{
		Sending: delivery.NewWithSenders(delivery.Config{
			Hostname:      cfg.Delivery.Hostname,
			Keys:          keys,
			Outbox:        outbox,
			Crash:         crash,
			Unsubscribe:   links,
			DefaultPool:   cfg.Delivery.DefaultPool,
			LocalTracking: cfg.Domains.LocalTracking,
		}, st, d, metrics, logger),
		Reconciler: delivery.NewReconciler(delivery.ReconcilerConfig{Workflows: starter, Metrics: metrics,
			Logger: logger}, st.Emails),
		Retention: datareq.NewRetention(st),
		Inbound: receiving.NewActivities(receiving.ActivitiesConfig{VERPKey: verpKey(keys),
			UnsubscribeMailtoKey: mailtoKey(keys), FBLDomains: cfg.Inbound.FBLDomains, Outbox: outbox,
			Metrics: metrics, Logger: logger}, st),
		Domains: domains.NewActivities(domains.ActivitiesConfig{Records: recordsConfig(cfg.Domains),
			Resolver: newResolver(cfg.Delivery), Logger: logger}, st.Domains),
		Imports: imports.NewActivities(st.Audience),
		Broadcasts: broadcast.NewActivities(broadcast.ActivitiesConfig{Rate: float64(cfg.Delivery.BroadcastRate),
			Outbox: outbox, Crash: crash}, st),
		DataRequests: datareq.NewActivities(datareq.ActivitiesConfig{Eraser: subjectEraser(pc),
			Waker: worker.NewWaker(tc), Workflows: starter, RestartDelay: cfg.Delivery.Heartbeat, Logger: logger},
			datareq.New(datareq.Config{Keys: keys, ArchiveTTL: cfg.Delivery.DataExportTTL}, st)),
		Webhooks: webhook.NewActivities(wcfg, st.Webhooks),
		// Automation runs send through the API's send path: topics'
		// unsubscribe links lead to the public URL, and a team paused for
		// its account health waits.
		Automations: automations.NewActivities(st, submit.New(submit.Config{Store: submit.StoreOf(st),
			Notifier: outbox, Logger: logger.With("component", "automations"), PublicURL: cfg.HTTP.PublicURL,
			Health: health.NewPauseCache(st.Insights, keyCacheTTL)})),
	}
	return acts, d.queues, func() { d.Close(); closeShaper(sh) }, nil
}

// subjectEraser is what erases an address from Temporal histories: the
// payload codec's keys; nil (nothing to erase, payloads are in the clear)
// without a codec.
func subjectEraser(pc *codec.Codec) datareq.SubjectEraser {
	if pc == nil {
		return nil
	}
	return pc.Keys()
}

// eraseWait is how long an erasure waits after destroying the address's
// key before it completes: the codec's key-cache bound, after which no
// process can decode the address any more, plus a margin that also
// covers the request log's write interval (a second).
func eraseWait(cfg config.Config) time.Duration { return cfg.Codec.CacheTTL + 5*time.Second }

// newStarter is the outbox's workflow starter with the configured
// workflow settings; every dispatcher (api, mx) uses one, since any of
// them may start any entry.
func newStarter(cfg config.Config, tc client.Client) *worker.Starter {
	starter := worker.NewStarter(tc, deliveryPolicy(cfg))
	starter.BroadcastRecheck = cfg.Delivery.BroadcastRecheck
	starter.EraseWait = eraseWait(cfg)
	starter.AutomationRecheck = cfg.Delivery.BroadcastRecheck
	return starter
}

// serveHTTP listens on addr and serves h until ctx ends, then shuts down
// gracefully: requests in flight finish within the shutdown budget. The
// returned channel yields once they have finished (or Serve failed).
func serveHTTP(ctx context.Context, addr string, h http.Handler, limits config.HTTP, logger *slog.Logger) (net.Addr, <-chan error, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("listening on %s: %w", addr, err)
	}
	srv := newHTTPServer(h, limits, logger)
	done := make(chan error, 1)
	shutDown := make(chan struct{})
	go func() {
		err := srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			// Serve returns at once; the requests in flight finish in Shutdown.
			<-shutDown
			err = nil
		}
		done <- err
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
		defer cancel()
		_ = srv.Shutdown(sctx)
		close(shutDown)
	}()
	return ln.Addr(), done, nil
}

// newHTTPServer is the http.Server of every listener: a client gets
// config.ReadHeaderTimeout for its headers, the read timeout for the whole
// request (a body trickled in cannot hold a connection and its buffers),
// the write timeout from its headers to the end of the answer, and idle
// keep-alive connections close after the idle timeout.
func newHTTPServer(h http.Handler, limits config.HTTP, logger *slog.Logger) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: config.ReadHeaderTimeout, ReadTimeout: limits.ReadTimeout,
		WriteTimeout: limits.WriteTimeout, IdleTimeout: limits.IdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
}

func newRegistry() (*prometheus.Registry, *telemetry.Metrics) {
	reg := prometheus.NewRegistry()
	return reg, telemetry.NewMetrics(reg)
}
