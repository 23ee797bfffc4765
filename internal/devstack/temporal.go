// Package devstack runs the development infrastructure in-process: an
// embedded Temporal server persisted in a SQLite file, with the Temporal Web
// UI, for `posthaste dev`, `posthaste temporal` and the end-to-end tests.
//
// It follows the approach of the Temporal CLI's development server
// (`temporal server start-dev`): all four Temporal services in one process
// on local ports found by static host lists, one SQLite store for both the
// default and the visibility store, the schema and the namespace written
// into the file before the server starts. One task-queue partition instead
// of four makes a single-node server 1.5 to 4 times faster, and dropping
// the visibility indexes Posthaste never queries by (visibility.go) made
// real delivery about 1.4 times faster.
package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	uiserver "github.com/temporalio/ui-server/v2/server"
	uiconfig "github.com/temporalio/ui-server/v2/server/config"
	uiserveroptions "github.com/temporalio/ui-server/v2/server/server_options"
	"go.temporal.io/server/chasm/lib/activity"
	"go.temporal.io/server/common/authorization"
	"go.temporal.io/server/common/cluster"
	"go.temporal.io/server/common/config"
	"go.temporal.io/server/common/dynamicconfig"
	"go.temporal.io/server/common/membership/static"
	sqliteplugin "go.temporal.io/server/common/persistence/sql/sqlplugin/sqlite"
	"go.temporal.io/server/common/primitives"
	sqliteschema "go.temporal.io/server/schema/sqlite"
	"go.temporal.io/server/temporal"
	"google.golang.org/protobuf/types/known/durationpb"
)

const (
	defaultNamespace = "default"
	defaultRetention = 30 * 24 * time.Hour
	defaultIP        = "127.0.0.1"
	// internalHost is where the history, matching and worker services
	// listen; only the frontend (and the UI) listen on TemporalConfig.IP.
	internalHost = "127.0.0.1"
	clusterName  = "active"
	storeName    = "sqlite-default"
	// uiStartTimeout bounds the wait for the UI to accept connections.
	uiStartTimeout = 10 * time.Second
)

// TemporalConfig configures StartTemporal. Zero values pick the defaults
// named on each field.
type TemporalConfig struct {
	// DBPath is the SQLite file holding all Temporal state. A new file (and
	// missing parent directories) is created with the schema. Required.
	DBPath string
	// Namespace is created if missing; "" means "default".
	Namespace string
	// Retention is how long closed workflows of a namespace created here are
	// kept; 0 means 30 days. An existing namespace keeps its retention.
	Retention time.Duration
	// IP is the address the frontend and the UI listen on; "" means
	// 127.0.0.1. The internal services always listen on 127.0.0.1.
	IP string
	// FrontendPort is the gRPC port of the frontend; 0 picks a free one.
	FrontendPort int
	// UIPort is the port of the Web UI; 0 means no UI.
	UIPort int
	// CodecEndpoint is the codec server the Web UI decodes payloads
	// with (Temporal's codec-server protocol); "" means none. The UI
	// hands it to every browser that loads it.
	CodecEndpoint string
	// HistoryCache is how many workflows the history service keeps the
	// state of in memory; 0 means DefaultHistoryCache.
	HistoryCache int
	// Logger receives the server's warnings and errors and devstack's own
	// lines; nil discards them.
	Logger *slog.Logger
}

// DefaultHistoryCache is TemporalConfig.HistoryCache when unset: the CLI
// development server's 8096 kept every one of 10,000 automation runs
// waiting on their timers in memory (bench -automations); a workflow
// dropped from it is read from SQLite at its next task.
const DefaultHistoryCache = 2000

// Temporal is a running embedded Temporal server. Stop it with Stop.
type Temporal struct {
	log      *slog.Logger
	server   temporal.Server
	ui       *uiserver.Server
	frontend string
	uiAddr   string
	level    *slog.LevelVar // minimum level of server log lines

	stopOnce sync.Once
}

// StartTemporal prepares the SQLite file, starts the Temporal services and,
// when cfg.UIPort is set, the Web UI, and returns once the frontend accepts
// requests. If ctx ends first, the half-started server is stopped and the
// context's error returned.
func StartTemporal(ctx context.Context, cfg TemporalConfig) (*Temporal, error) {
	begin := time.Now()
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t := &Temporal{log: logger.With("component", "devstack"), level: new(slog.LevelVar)}
	t.level.Set(slog.LevelWarn)

	if cfg.DBPath == "" {
		return nil, errors.New("temporal: DBPath is empty")
	}
	if cfg.Namespace == "" {
		cfg.Namespace = defaultNamespace
	}
	if cfg.Retention == 0 {
		cfg.Retention = defaultRetention
	}
	if cfg.IP == "" || cfg.IP == "localhost" {
		cfg.IP = defaultIP
	}
	ip := net.ParseIP(cfg.IP)
	if ip == nil {
		return nil, fmt.Errorf("temporal: IP %q is not an IP address", cfg.IP)
	}
	// Other services and the UI reach an unspecified address over loopback.
	reachIP := cfg.IP
	if ip.IsUnspecified() {
		reachIP = "127.0.0.1"
		if ip.To4() == nil {
			reachIP = "::1"
		}
	}
	if cfg.FrontendPort == 0 {
		port, err := freePort(cfg.IP)
		if err != nil {
			return nil, err
		}
		cfg.FrontendPort = port
	} else if err := checkPortFree(cfg.IP, cfg.FrontendPort); err != nil {
		return nil, fmt.Errorf("checking frontend port: %w", err)
	}
	if cfg.UIPort != 0 {
		if err := checkPortFree(cfg.IP, cfg.UIPort); err != nil {
			return nil, fmt.Errorf("checking UI port: %w", err)
		}
	}
	t.frontend = net.JoinHostPort(reachIP, strconv.Itoa(cfg.FrontendPort))

	sqlConf, err := prepareDatabase(cfg.DBPath, cfg.Namespace, cfg.Retention)
	if err != nil {
		return nil, err
	}
	conf, err := serverConfig(cfg, reachIP, sqlConf)
	if err != nil {
		return nil, err
	}
	opts, err := t.serverOptions(logger, conf, cfg.HistoryCache)
	if err != nil {
		return nil, err
	}
	if t.server, err = newServer(opts); err != nil {
		return nil, fmt.Errorf("creating temporal server: %w", err)
	}
	if err := t.startServer(ctx); err != nil {
		return nil, err
	}
	if cfg.UIPort != 0 {
		if err := t.startUI(ctx, cfg); err != nil {
			t.Stop()
			return nil, err
		}
	}
	t.log.Info("temporal started", "frontend", t.frontend, "ui", t.uiAddr,
		"namespace", cfg.Namespace, "db", cfg.DBPath, "duration", time.Since(begin).Round(time.Millisecond))
	return t, nil
}

// FrontendAddress returns the host:port of the frontend's gRPC endpoint,
// for client.Options.HostPort.
func (t *Temporal) FrontendAddress() string { return t.frontend }

// UIAddress returns the host:port of the Web UI, or "" when it is off.
func (t *Temporal) UIAddress() string { return t.uiAddr }

// Stop stops the UI and the server. The server's complaints while shutting
// down are not logged. Calling Stop again does nothing.
func (t *Temporal) Stop() {
	t.stopOnce.Do(func() {
		begin := time.Now()
		if t.ui != nil {
			t.ui.Stop()
		}
		if err := t.stopServer(); err != nil {
			t.log.Warn("stopping temporal", "err", err)
		}
		t.log.Info("temporal stopped", "duration", time.Since(begin).Round(time.Millisecond))
	})
}

// startServer runs the blocking Start of the server, giving up when ctx
// ends first.
func (t *Temporal) startServer(ctx context.Context) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				f, ok := r.(serverFailure)
				if !ok {
					panic(r)
				}
				done <- f
			}
		}()
		done <- t.server.Start()
	}()
	select {
	case err := <-done:
		if err != nil {
			_ = t.stopServer()
			return fmt.Errorf("starting temporal server: %w", err)
		}
		return nil
	case <-ctx.Done():
		go func() {
			if err := <-done; err == nil {
				_ = t.stopServer()
			}
		}()
		return fmt.Errorf("starting temporal server: %w", ctx.Err())
	}
}

// stopServer stops the server with its log lines silenced: the services
// routinely warn about closed connections and cancelled polls while they go
// down one after the other. A fatal log line during the stop of a server
// that failed to start is returned as an error.
func (t *Temporal) stopServer() (err error) {
	t.level.Set(slog.LevelError + 100)
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(serverFailure)
			if !ok {
				panic(r)
			}
			err = f
		}
	}()
	return t.server.Stop()
}

// newServer calls temporal.NewServer, turning a fatal log line of the
// server (see serverLogger) into an error.
func newServer(opts []temporal.ServerOption) (s temporal.Server, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(serverFailure)
			if !ok {
				panic(r)
			}
			err = f
		}
	}()
	return temporal.NewServer(opts...)
}

// startUI serves the Web UI in-process and waits until it accepts
// connections. The UI server exits the process when it cannot listen, so
// StartTemporal checks the port first.
func (t *Temporal) startUI(ctx context.Context, cfg TemporalConfig) error {
	// The UI server joins Host and Port with a plain colon.
	host := cfg.IP
	if ip := net.ParseIP(host); ip != nil && ip.To4() == nil {
		host = "[" + host + "]"
	}
	t.ui = uiserver.NewServer(uiserveroptions.WithConfigProvider(&uiconfig.Config{
		Host:                host,
		Port:                cfg.UIPort,
		TemporalGRPCAddress: t.frontend,
		EnableUI:            true,
		DefaultNamespace:    cfg.Namespace,
		CORS:                uiconfig.CORS{CookieInsecure: true},
		HideLogs:            true,
		DisableNewsFetch:    true,
		Codec:               uiconfig.Codec{Endpoint: cfg.CodecEndpoint},
	}))
	go func() {
		if err := t.ui.Start(); err != nil {
			t.log.Error("temporal UI stopped", "err", err)
		}
	}()
	reach := net.JoinHostPort(hostOf(t.frontend), strconv.Itoa(cfg.UIPort))
	ctx, cancel := context.WithTimeout(ctx, uiStartTimeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", reach)
		if err == nil {
			conn.Close()
			t.uiAddr = reach
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the UI on %s: %w", reach, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func hostOf(hostport string) string {
	h, _, _ := net.SplitHostPort(hostport)
	return h
}

// prepareDatabase returns the store configuration for the SQLite file at
// path, creating the file with the schema when it is new, and the namespace
// when it is missing.
func prepareDatabase(path, namespace string, retention time.Duration) (*config.SQL, error) {
	conf := &config.SQL{
		PluginName:   sqliteplugin.PluginName,
		DatabaseName: path,
		// Pragma keys carry no leading underscore: "_journal_mode" is
		// silently ignored by the driver.
		ConnectAttributes: map[string]string{
			"mode":         "rwc",
			"journal_mode": "wal",
			"synchronous":  "NORMAL",
		},
		// More connections were measured to be slower.
		MaxConns:     1,
		MaxIdleConns: 1,
	}
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0):
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("creating directory for %s: %w", path, err)
		}
		if err := sqliteschema.SetupSchema(conf); err != nil {
			return nil, fmt.Errorf("creating temporal schema in %s: %w", path, err)
		}
	case err != nil:
		return nil, fmt.Errorf("checking %s: %w", path, err)
	}
	if err := leanVisibility(conf); err != nil {
		return nil, err
	}
	ns, err := sqliteschema.NewNamespaceConfig(clusterName, namespace, false, nil)
	if err != nil {
		return nil, fmt.Errorf("preparing namespace %s: %w", namespace, err)
	}
	ns.Detail.Config.Retention = durationpb.New(retention)
	if err := sqliteschema.CreateNamespaces(conf, ns); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	return conf, nil
}

// serverConfig builds the static configuration of a one-node cluster whose
// services listen on free local ports.
func serverConfig(cfg TemporalConfig, reachIP string, sqlConf *config.SQL) (*config.Config, error) {
	httpPort, err := freePort(cfg.IP)
	if err != nil {
		return nil, err
	}
	conf := &config.Config{}
	conf.Global.Membership.MaxJoinDuration = 30 * time.Second
	conf.Global.Membership.BroadcastAddress = internalHost
	conf.Persistence.DefaultStore = storeName
	conf.Persistence.VisibilityStore = storeName
	conf.Persistence.NumHistoryShards = 1
	conf.Persistence.DataStores = map[string]config.DataStore{storeName: {SQL: sqlConf}}
	conf.ClusterMetadata = &cluster.Config{
		FailoverVersionIncrement: 10,
		MasterClusterName:        clusterName,
		CurrentClusterName:       clusterName,
		ClusterInformation: map[string]cluster.ClusterInformation{
			clusterName: {
				Enabled:                true,
				InitialFailoverVersion: 1,
				RPCAddress:             net.JoinHostPort(reachIP, strconv.Itoa(cfg.FrontendPort)),
				HTTPAddress:            net.JoinHostPort(reachIP, strconv.Itoa(httpPort)),
				// Only used when the file is new; the stored ID wins later.
				ClusterID: uuid.NewString(),
			},
		},
	}
	conf.DCRedirectionPolicy.Policy = "noop"
	conf.Services = map[string]config.Service{
		string(primitives.FrontendService): {RPC: config.RPC{
			GRPCPort: cfg.FrontendPort,
			HTTPPort: httpPort,
			BindOnIP: cfg.IP,
		}},
	}
	for _, svc := range []primitives.ServiceName{primitives.HistoryService, primitives.MatchingService, primitives.WorkerService} {
		port, err := freePort(internalHost)
		if err != nil {
			return nil, err
		}
		conf.Services[string(svc)] = config.Service{RPC: config.RPC{GRPCPort: port, BindOnIP: internalHost}}
	}
	conf.Archival.History.State = "disabled"
	conf.Archival.Visibility.State = "disabled"
	conf.NamespaceDefaults.Archival.History.State = "disabled"
	conf.NamespaceDefaults.Archival.Visibility.State = "disabled"
	conf.PublicClient.HostPort = net.JoinHostPort(reachIP, strconv.Itoa(cfg.FrontendPort))
	return conf, nil
}

// serverOptions returns the options for temporal.NewServer: the config,
// static hosts, the log adapter, the authorizer and claim mapper the config
// names (none by default) and the dynamic config.
func (t *Temporal) serverOptions(logger *slog.Logger, conf *config.Config, historyCache int) ([]temporal.ServerOption, error) {
	serverLog := &serverLogger{log: logger.With("component", "temporal"), level: t.level}
	authorizer, err := authorization.GetAuthorizerFromConfig(&conf.Global.Authorization)
	if err != nil {
		return nil, fmt.Errorf("creating temporal authorizer: %w", err)
	}
	claimMapper, err := authorization.GetClaimMapperFromConfig(&conf.Global.Authorization, serverLog)
	if err != nil {
		return nil, fmt.Errorf("creating temporal claim mapper: %w", err)
	}
	hosts := make(map[primitives.ServiceName]static.Hosts, len(conf.Services))
	for name, svc := range conf.Services {
		host := internalHost
		if name == string(primitives.FrontendService) {
			host = hostOf(conf.PublicClient.HostPort)
		}
		hosts[primitives.ServiceName(name)] = static.SingleLocalHost(net.JoinHostPort(host, strconv.Itoa(svc.RPC.GRPCPort)))
	}
	return []temporal.ServerOption{
		temporal.WithConfig(conf),
		temporal.ForServices(temporal.DefaultServices),
		temporal.WithStaticHosts(hosts),
		temporal.WithLogger(serverLog),
		temporal.WithAuthorizer(authorizer),
		temporal.WithClaimMapper(func(*config.Config) authorization.ClaimMapper { return claimMapper }),
		temporal.WithDynamicConfigClient(dynamicConfig(historyCache)),
	}, nil
}

// dynamicConfig returns the settings of the CLI's development server plus
// one task-queue partition, with a history cache of historyCache
// workflows (0: DefaultHistoryCache).
// queuePollRPS bounds how often a history queue of the embedded server
// loads new tasks (see dynamicConfig).
const queuePollRPS = 1000

func dynamicConfig(historyCache int) dynamicconfig.StaticClient {
	if historyCache <= 0 {
		historyCache = DefaultHistoryCache
	}
	return dynamicconfig.StaticClient{
		// One node: a single partition per task queue avoids forwarding
		// between partitions (measured 1.5-4x the throughput of the default 4).
		dynamicconfig.MatchingNumTaskqueueReadPartitions.Key():  1,
		dynamicconfig.MatchingNumTaskqueueWritePartitions.Key(): 1,

		// A history queue forgets its completed tasks only at a
		// checkpoint (30 s by default), and every batch of new tasks
		// walks all the tasks it still tracks (executableTracker.split):
		// at a few hundred tasks a second that walk took a quarter of
		// dev's CPU after a few minutes of load. A checkpoint a second
		// keeps the walk short for the price of one shard write a second
		// per queue.
		// A history queue loads new tasks at most MaxPollRPS times a
		// second per shard (20 by default), and this server has one
		// shard: a task that is not handed over inline (an activity, a
		// workflow task that no eager start took, a timer) waited up to
		// 50 ms for the next load. The bare one-activity workflow took
		// 50 ms one at a time; at 1000 it takes 15 (go run ./bench
		// -latency, issue 37).
		dynamicconfig.TransferProcessorMaxPollRPS.Key(): queuePollRPS,
		dynamicconfig.TimerProcessorMaxPollRPS.Key():    queuePollRPS,

		dynamicconfig.TransferProcessorUpdateAckInterval.Key():   time.Second,
		dynamicconfig.VisibilityProcessorUpdateAckInterval.Key(): time.Second,
		dynamicconfig.TimerProcessorUpdateAckInterval.Key():      time.Second,
		dynamicconfig.OutboundProcessorUpdateAckInterval.Key():   time.Second,

		// A smaller mutable state cache (historyCache), then the CLI
		// development server's settings: more visibility RPS, immediate visibility of new Nexus
		// endpoints (with persistence QPS raised to match), standalone
		// activity operator commands. Not its immediate visibility of new
		// search attributes (ForceSearchAttributesCacheRefreshOnRead):
		// that reads the cluster metadata from SQLite under a mutex on
		// every search-attribute lookup, several per workflow, and cost
		// about 6 % of real delivery's machine time. Posthaste defines no
		// search attributes; one an operator adds is seen by every
		// service within a minute (the cache's refresh interval).
		dynamicconfig.HistoryCacheHostLevelMaxSize.Key():                         historyCache,
		dynamicconfig.FrontendMaxNamespaceVisibilityRPSPerInstance.Key():         100,
		dynamicconfig.ForceNexusEndpointRefreshOnRead.Key():                      true,
		dynamicconfig.FrontendPersistenceMaxQPS.Key():                            10000,
		dynamicconfig.HistoryPersistenceMaxQPS.Key():                             45000,
		dynamicconfig.EnableChasm.Key():                                          true,
		activity.Enabled.Key():                                                   true,
		activity.EnableStandaloneActivityOperatorCommands.Key():                  true,
		dynamicconfig.FrontendEnableBatchOperationsForStandaloneActivities.Key(): true,
	}
}

// checkPortFree reports an error when something listens on host:port.
func checkPortFree(host string, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}

// freePort returns a TCP port on host that nothing listens on. Like the
// CLI's development server, it connects to the port once and closes the
// accepted side first: the port then sits in TIME_WAIT, which keeps the
// kernel from handing it to another bind(:0) for a while, while a listener
// with SO_REUSEADDR (Go's default) can still take it.
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("picking a free port: %w", err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	dialHost := host
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		dialHost = "127.0.0.1"
		if ip.To4() == nil {
			dialHost = "::1"
		}
	}
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", net.JoinHostPort(dialHost, strconv.Itoa(port)))
	if err != nil {
		return port, nil
	}
	defer client.Close()
	if server, ok := <-accepted; ok {
		server.Close()
	}
	return port, nil
}
