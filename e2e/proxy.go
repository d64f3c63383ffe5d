package e2e

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Proxy forwards the P2P connections between validators on loopback: one
// listener per ordered pair (from, to), dialled by node from and connected
// to node to's P2P port. Partition(i) closes every connection of node i
// and refuses new ones until Heal(i).
type Proxy struct {
	mu    sync.Mutex
	links map[[2]int]*link
	cut   map[int]bool
	conns map[*pipe]struct{}
	wg    sync.WaitGroup
	// refused counts connections closed at accept because an end was
	// partitioned.
	refused int
}

type link struct {
	from, to int
	target   string
	ln       net.Listener
}

// pipe is one proxied connection: the accepted side and the dialled side.
type pipe struct {
	from, to int
	a, b     net.Conn
}

// NewProxy returns a proxy with no links.
func NewProxy() *Proxy {
	return &Proxy{links: map[[2]int]*link{}, cut: map[int]bool{}, conns: map[*pipe]struct{}{}}
}

// Link listens on a free loopback port for node from's connections to node
// to, whose P2P listener is target (host:port), and returns that port's
// address.
func (p *Proxy) Link(from, to int, target string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("cannot listen for the link node%d -> node%d: %w", from, to, err)
	}
	l := &link{from: from, to: to, target: target, ln: ln}
	p.mu.Lock()
	p.links[[2]int{from, to}] = l
	p.mu.Unlock()
	p.wg.Add(1)
	go p.accept(l)
	return ln.Addr().String(), nil
}

func (p *Proxy) accept(l *link) {
	defer p.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		p.mu.Lock()
		refused := p.cut[l.from] || p.cut[l.to]
		if refused {
			p.refused++
		}
		p.mu.Unlock()
		if refused {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", l.target)
		if err != nil { // the target is down (killed): the dialler retries
			c.Close()
			continue
		}
		pp := &pipe{from: l.from, to: l.to, a: c, b: up}
		p.mu.Lock()
		if p.cut[l.from] || p.cut[l.to] { // partitioned while dialling
			p.mu.Unlock()
			c.Close()
			up.Close()
			continue
		}
		p.conns[pp] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.copy(pp, pp.a, pp.b)
		go p.copy(pp, pp.b, pp.a)
	}
}

// copy moves bytes from src to dst until either side ends, then closes
// both.
func (p *Proxy) copy(pp *pipe, dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	pp.a.Close()
	pp.b.Close()
	p.mu.Lock()
	delete(p.conns, pp)
	p.mu.Unlock()
}

// Partition cuts node i off: its proxied connections are closed (both
// ways) and new ones refused until Heal(i).
func (p *Proxy) Partition(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut[i] = true
	for pp := range p.conns {
		if pp.from == i || pp.to == i {
			pp.a.Close()
			pp.b.Close()
		}
	}
}

// Heal lets node i's connections through again; the nodes reconnect on
// their own (persistent peers).
func (p *Proxy) Heal(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.cut, i)
}

// Open counts the proxied connections touching node i.
func (p *Proxy) Open(i int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for pp := range p.conns {
		if pp.from == i || pp.to == i {
			n++
		}
	}
	return n
}

// Refused counts the connections refused because an end was partitioned.
func (p *Proxy) Refused() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}

// Close stops every listener and connection and waits for the copies.
func (p *Proxy) Close() {
	p.mu.Lock()
	for _, l := range p.links {
		l.ln.Close()
	}
	for pp := range p.conns {
		pp.a.Close()
		pp.b.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
