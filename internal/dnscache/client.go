package dnscache

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/miekg/dns"
)

// EDNSSize is the EDNS0 UDP payload size to ask for, which avoids IP
// fragmentation (DNS Flag Day 2020).
const EDNSSize = 1232

// Client sends queries to DNS servers, trying them in order: over UDP,
// and again over TCP when the answer is truncated (RFC 7766 §5). It keeps
// nothing; Resolver caches on top of it, and package dane asks its
// validating resolver through it. It is safe for concurrent use.
type Client struct {
	servers []string
	udp     *dns.Client
	tcp     *dns.Client
}

// NewClient returns a Client for servers ("host:port", at least one);
// timeout bounds each query to one server, 0 meaning 5 seconds.
func NewClient(servers []string, timeout time.Duration) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("dnscache: no DNS server")
	}
	for _, s := range servers {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return nil, fmt.Errorf("dnscache: server %q: want host:port", s)
		}
	}
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &Client{
		servers: servers,
		udp:     &dns.Client{Net: "udp", Timeout: timeout, UDPSize: EDNSSize},
		tcp:     &dns.Client{Net: "tcp", Timeout: timeout},
	}, nil
}

// Exchange sends m to the servers in turn and returns the first answer
// that is NOERROR or NXDOMAIN, with the server that gave it. Its errors
// are *net.DNSError, as net.Resolver's: temporary for SERVFAIL (the text
// says so), timeouts and network errors.
func (c *Client) Exchange(ctx context.Context, m *dns.Msg) (*dns.Msg, string, error) {
	name := ""
	if len(m.Question) > 0 {
		name = m.Question[0].Name
	}
	var last *net.DNSError
	for _, s := range c.servers {
		resp, _, err := c.udp.ExchangeContext(ctx, m, s)
		if err == nil && resp.Truncated {
			resp, _, err = c.tcp.ExchangeContext(ctx, m, s)
		}
		switch {
		case err != nil:
			last = &net.DNSError{Err: err.Error(), Name: name, Server: s, UnwrapErr: err, IsTemporary: true}
			var ne net.Error
			last.IsTimeout = errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded)
			if ctx.Err() != nil {
				return nil, "", last
			}
		case resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError:
			return resp, s, nil
		case resp.Rcode == dns.RcodeServerFailure:
			// A validating resolver answers SERVFAIL for bogus data too.
			last = &net.DNSError{Err: "server misbehaving (SERVFAIL)", Name: name, Server: s, IsTemporary: true}
		default:
			// REFUSED, NOTIMP, FORMERR: this server will not answer.
			last = &net.DNSError{Err: "server misbehaving (" + dns.RcodeToString[resp.Rcode] + ")", Name: name, Server: s}
		}
	}
	return nil, "", last
}
