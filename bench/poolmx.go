package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/mail"
	"net/textproto"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/posthaste/posthaste/internal/shaping"
)

// The recipients' side of the pools step (pools.go): one go-smtp server
// listening on one port of several loopback addresses, one per MX host
// name, that records per (source address, MX host) how many connections
// were open at once, how many messages each carried and when each
// message began, so that the step can hold them against the shaping
// limits of the host's provider.

// shapeKey is what the limits are kept by at the MX: the client's source
// address and the MX host it reached.
type shapeKey struct {
	source string // the client's address, as dev bound it
	host   string // the MX host name of the address it dialled
}

// shapeTrack is what the MX saw of one shapeKey.
type shapeTrack struct {
	open, maxOpen int
	maxPerConn    int
	conns         int
	// starts holds when each message accepted began (its MAIL command,
	// the first thing the client sends once the shaper let it go).
	starts []time.Time
}

// shapeRecorder counts what the pools step's MX receives. It is safe for
// concurrent use.
type shapeRecorder struct {
	now func() time.Time
	// poolOf maps a source address to its pool; wantPool a sender domain
	// to the pool its mail must leave from.
	poolOf, wantPool map[string]string

	mu        sync.Mutex
	tracks    map[shapeKey]*shapeTrack
	byID      map[string]int       // email id → copies
	lastAt    map[string]time.Time // pool → when its last message arrived
	perPool   map[string]int       // pool → messages
	misrouted int                  // messages from an address outside their sender domain's pool
	unknown   int                  // messages without our Message-ID or sender domain
	total     int
}

func newShapeRecorder(poolOf, wantPool map[string]string) *shapeRecorder {
	return &shapeRecorder{now: time.Now, poolOf: poolOf, wantPool: wantPool,
		tracks: map[shapeKey]*shapeTrack{}, byID: map[string]int{}, lastAt: map[string]time.Time{}, perPool: map[string]int{}}
}

func (r *shapeRecorder) track(k shapeKey) *shapeTrack {
	t := r.tracks[k]
	if t == nil {
		t = &shapeTrack{}
		r.tracks[k] = t
	}
	return t
}

func (r *shapeRecorder) opened(k shapeKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.track(k)
	t.open++
	t.conns++
	t.maxOpen = max(t.maxOpen, t.open)
}

func (r *shapeRecorder) closed(k shapeKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.track(k).open--
}

// message records a message accepted over a connection of k that began
// at start and was the connection's nth; msg is its content.
func (r *shapeRecorder) message(k shapeKey, start time.Time, nth int, msg []byte) {
	id, domain := messageIDAndSender(msg)
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total++
	t := r.track(k)
	t.starts = append(t.starts, start)
	t.maxPerConn = max(t.maxPerConn, nth)
	pool := r.poolOf[k.source]
	r.perPool[pool]++
	r.lastAt[pool] = now
	if id == "" || domain == "" {
		r.unknown++
		return
	}
	r.byID[id]++
	if r.wantPool[domain] != pool {
		r.misrouted++
	}
}

// received returns the messages received and the distinct emails among
// them.
func (r *shapeRecorder) received() (total, distinct int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.total, len(r.byID)
}

// messageIDAndSender returns the email id of the Message-ID field
// ("<id@domain>") and the domain of the From address; "" for what is
// missing.
func messageIDAndSender(msg []byte) (id, domain string) {
	id, _ = chaosHeaders(msg)
	h, err := textproto.NewReader(bufio.NewReader(bytes.NewReader(msg))).ReadMIMEHeader()
	if err != nil && len(h) == 0 {
		return id, ""
	}
	if a, err := mail.ParseAddress(h.Get("From")); err == nil {
		if _, d, ok := strings.Cut(a.Address, "@"); ok {
			domain = strings.ToLower(d)
		}
	}
	return id, domain
}

// shapeMX is the pools step's MX: one SMTP server on several listeners,
// each an address of one MX host name.
type shapeMX struct {
	rec  *shapeRecorder
	srv  *smtp.Server
	lns  []net.Listener
	port int
}

// startShapeMX listens on hosts' addresses (MX host name → IP), all on one
// free port, and serves until close.
func startShapeMX(hosts map[string]string, rec *shapeRecorder) (*shapeMX, error) {
	m := &shapeMX{rec: rec}
	m.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		tc, ok := c.Conn().(*trackedConn)
		if !ok {
			return nil, fmt.Errorf("connection of type %T", c.Conn())
		}
		return &shapeSession{mx: m, conn: tc}, nil
	}))
	m.srv.Domain = "mx.pools.bench.test"
	m.srv.ReadTimeout = time.Minute
	m.srv.WriteTimeout = time.Minute
	m.srv.ErrorLog = log.New(io.Discard, "", 0)
	names := slices.Sorted(func(yield func(string) bool) {
		for h := range hosts {
			if !yield(h) {
				return
			}
		}
	})
	// Another process may hold the port on one of the addresses: try a
	// few.
	for range 10 {
		if err := m.listen(names, hosts); err == nil {
			for _, ln := range m.lns {
				go func() { _ = m.srv.Serve(ln) }()
			}
			return m, nil
		}
	}
	return nil, fmt.Errorf("no port free on all of %v", hosts)
}

// listen opens one listener per host on a port free on the first one.
func (m *shapeMX) listen(names []string, hosts map[string]string) error {
	m.lns = nil
	for i, name := range names {
		ln, err := net.Listen("tcp", net.JoinHostPort(hosts[name], fmt.Sprint(m.port)))
		if err != nil {
			for _, l := range m.lns {
				l.Close()
			}
			m.port = 0
			return err
		}
		if i == 0 {
			m.port = ln.Addr().(*net.TCPAddr).Port
		}
		m.lns = append(m.lns, &trackingListener{Listener: ln, host: name, rec: m.rec})
	}
	return nil
}

func (m *shapeMX) close() {
	_ = m.srv.Close()
	for _, ln := range m.lns {
		ln.Close()
	}
}

// trackingListener records each connection it accepts as open for
// (client address, host).
type trackingListener struct {
	net.Listener
	host string
	rec  *shapeRecorder
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	src, _, _ := net.SplitHostPort(c.RemoteAddr().String())
	tc := &trackedConn{Conn: c, key: shapeKey{source: src, host: l.host}, rec: l.rec}
	l.rec.opened(tc.key)
	return tc, nil
}

// trackedConn is a connection the MX counts as open until the client
// says QUIT, the client's side ends or the server closes it. The QUIT is
// seen as it is read, before the 221 goes out, so the count drops before
// the client (which frees its shaping slot after the 221) can open
// another connection: a connection that overlaps the next is one the
// client really held.
type trackedConn struct {
	net.Conn
	key      shapeKey
	rec      *shapeRecorder
	once     sync.Once
	messages int // accepted over this connection; used by its session only
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil || isQuit(b[:n]) {
		c.end()
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.end()
	return c.Conn.Close()
}

func (c *trackedConn) end() { c.once.Do(func() { c.rec.closed(c.key) }) }

// isQuit reports whether what a client sent ends with a QUIT command.
func isQuit(b []byte) bool {
	b = bytes.TrimRight(b, "\r\n")
	i := bytes.LastIndexByte(b, '\n')
	return strings.EqualFold(string(b[i+1:]), "QUIT")
}

// shapeSession is one SMTP session of the pools step's MX.
type shapeSession struct {
	mx    *shapeMX
	conn  *trackedConn
	start time.Time // of the transaction's MAIL
}

var _ smtp.Session = (*shapeSession)(nil)

func (s *shapeSession) Mail(string, *smtp.MailOptions) error { s.start = s.mx.rec.now(); return nil }

func (s *shapeSession) Rcpt(string, *smtp.RcptOptions) error { return nil }

// Data records the message once it has been read whole, just before the
// 250 goes out.
func (s *shapeSession) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.conn.messages++
	s.mx.rec.message(s.conn.key, s.start, s.conn.messages, data)
	return nil
}

func (s *shapeSession) Reset() {}

func (s *shapeSession) Logout() error { return nil }

// shapeObserved is what the MX saw of one (source address, MX host).
type shapeObserved struct {
	provider, source, host string
	messages               int
	conns                  int // connections opened
	maxConns               int // open at once
	maxPerConn             int
	maxPerSecond           int     // messages begun in any one-second window
	meanPerSecond          float64 // messages over the span from the first to the last, per second
	burst                  float64 // the bucket the messages needed at the limit's rate (burstNeeded)
}

// rateJitter is how much earlier than the MX saw it a message may have
// passed the shaper: the MAIL command follows the shaper's decision after
// a write (and, over a pooled connection, an RSET round trip) whose time
// varies with the load. Each message's start may thus be that much late,
// which makes a burst look up to rate × rateJitter messages larger.
const rateJitter = 250 * time.Millisecond

// observe sums up tracks per (source, host).
func observe(tracks map[shapeKey]*shapeTrack, rules shaping.Rules) []shapeObserved {
	var out []shapeObserved
	for k, t := range tracks {
		starts := slices.Clone(t.starts)
		slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		provider := shaping.ProviderOf(k.host)
		o := shapeObserved{provider: provider, source: k.source, host: k.host, messages: len(starts),
			conns: t.conns, maxConns: t.maxOpen, maxPerConn: t.maxPerConn,
			maxPerSecond: maxInWindow(starts, time.Second), meanPerSecond: meanRate(starts)}
		if lim := rules[provider]; lim.PerSecond > 0 {
			o.burst = burstNeeded(starts, float64(lim.PerSecond))
		}
		out = append(out, o)
	}
	slices.SortFunc(out, func(a, b shapeObserved) int {
		return strings.Compare(a.provider+" "+a.source, b.provider+" "+b.source)
	})
	return out
}

// maxInWindow returns the most of times (sorted) that fall in any window
// [t, t+w).
func maxInWindow(times []time.Time, w time.Duration) int {
	best, i := 0, 0
	for j := range times {
		for times[j].Sub(times[i]) >= w {
			i++
		}
		best = max(best, j-i+1)
	}
	return best
}

// meanRate is the messages of times (sorted) per second over the span
// from the first to the last; 0 for fewer than two.
func meanRate(times []time.Time) float64 {
	if len(times) < 2 {
		return 0
	}
	span := times[len(times)-1].Sub(times[0])
	if span <= 0 {
		return 0
	}
	return float64(len(times)-1) / span.Seconds()
}

// burstNeeded returns the smallest bucket, refilled at rate per second,
// that lets all of times (sorted) through: the most any window [a, b]
// holds beyond rate × (b − a). A bucket that starts full with
// Limits.PerSecond messages and refills at that rate (package shaping)
// never needs more than PerSecond; a sender that goes faster for long
// needs ever more.
func burstNeeded(times []time.Time, rate float64) float64 {
	if len(times) == 0 {
		return 0
	}
	t0 := times[0]
	x := func(i int) float64 { return rate * times[i].Sub(t0).Seconds() }
	// The window from i to j holds j − i + 1 messages:
	// max over i ≤ j of (j − x_j) + (x_i − i) + 1.
	best, bestStart := math.Inf(-1), math.Inf(-1)
	for j := range times {
		bestStart = max(bestStart, x(j)-float64(j))
		best = max(best, float64(j)-x(j)+bestStart+1)
	}
	return best
}

// shapeVerdict holds o against lim: "held", or "exceeded" with what was.
func shapeVerdict(lim shaping.Limits, o shapeObserved) (string, []string) {
	var over []string
	if lim.Connections > 0 && o.maxConns > lim.Connections {
		over = append(over, fmt.Sprintf("%d connections open at once, limit %d", o.maxConns, lim.Connections))
	}
	if lim.PerConnection > 0 && o.maxPerConn > lim.PerConnection {
		over = append(over, fmt.Sprintf("%d messages over one connection, limit %d", o.maxPerConn, lim.PerConnection))
	}
	if lim.PerSecond > 0 && o.burst > burstAllowed(lim.PerSecond) {
		over = append(over, fmt.Sprintf("a burst of %.1f messages at %d a second, allowed %.1f",
			o.burst, lim.PerSecond, burstAllowed(lim.PerSecond)))
	}
	if len(over) > 0 {
		return "exceeded", over
	}
	return "held", nil
}

// burstAllowed is the bucket the shaper keeps at perSec messages a second
// (perSec, package shaping) plus what rateJitter may add.
func burstAllowed(perSec int) float64 {
	return float64(perSec) + float64(perSec)*rateJitter.Seconds()
}
