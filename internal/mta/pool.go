package mta

import (
	"sync"
	"time"
)

const (
	// maxIdlePerHost bounds the idle connections kept per host.
	maxIdlePerHost = 4
	// maxConnAge stops reuse of old connections, so that a host's DNS or
	// certificate change is picked up and no server sees one session
	// forever.
	maxConnAge = 5 * time.Minute
)

// pool keeps idle sessions per key (Client.poolKey: source address and
// "host:port") for the next envelope.
type pool struct {
	idleTimeout time.Duration // <= 0: no pooling

	mu     sync.Mutex
	idle   map[string][]*idleConn
	closed bool
}

type idleConn struct {
	cn    *conn
	timer *time.Timer
}

func newPool(idleTimeout time.Duration) *pool {
	return &pool{idleTimeout: idleTimeout, idle: make(map[string][]*idleConn)}
}

// get takes the most recently used idle connection to key that accept
// takes (a session must meet the TLS policy of the envelope at hand, which
// may be stricter than the one it was opened under). It returns nil when
// there is none; the caller owns the connection.
func (p *pool) get(key string, accept func(*conn) bool) *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.idle[key]
	for i := len(list) - 1; i >= 0; i-- {
		ic := list[i]
		if !accept(ic.cn) {
			continue
		}
		p.idle[key] = append(list[:i:i], list[i+1:]...)
		if len(p.idle[key]) == 0 {
			delete(p.idle, key)
		}
		// If the timer already fired, expire finds the connection gone
		// and leaves it alone.
		ic.timer.Stop()
		return ic.cn
	}
	return nil
}

// put keeps cn for reuse, or ends it when the pool is closed, full or
// disabled, or the connection is too old.
func (p *pool) put(key string, cn *conn) {
	p.mu.Lock()
	if p.closed || p.idleTimeout <= 0 || len(p.idle[key]) >= maxIdlePerHost || time.Since(cn.created) > maxConnAge {
		p.mu.Unlock()
		cn.quit()
		return
	}
	cn.reused = true
	ic := &idleConn{cn: cn}
	ic.timer = time.AfterFunc(p.idleTimeout, func() { p.expire(key, ic) })
	p.idle[key] = append(p.idle[key], ic)
	p.mu.Unlock()
}

// expire ends an idle connection whose time is up, unless get took it.
func (p *pool) expire(key string, ic *idleConn) {
	p.mu.Lock()
	found := false
	list := p.idle[key]
	for i, x := range list {
		if x == ic {
			p.idle[key] = append(list[:i:i], list[i+1:]...)
			if len(p.idle[key]) == 0 {
				delete(p.idle, key)
			}
			found = true
			break
		}
	}
	p.mu.Unlock()
	if found {
		ic.cn.quit()
	}
}

// drop closes every idle connection to key.
func (p *pool) drop(key string) {
	p.mu.Lock()
	list := p.idle[key]
	delete(p.idle, key)
	p.mu.Unlock()
	for _, ic := range list {
		ic.timer.Stop()
		ic.cn.close()
	}
}

// close ends all idle connections and keeps no more.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var all []*idleConn
	for _, list := range p.idle {
		all = append(all, list...)
	}
	p.idle = make(map[string][]*idleConn)
	p.mu.Unlock()

	var wg sync.WaitGroup
	for _, ic := range all {
		ic.timer.Stop()
		wg.Go(ic.cn.quit)
	}
	wg.Wait()
}
