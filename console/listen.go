package console

import (
	"fmt"
	"io"
	"net"

	"github.com/ogpu-network/ogpu/node"
)

// Listen opens the console's listener on laddr (host:port; port 0 picks
// a free one). A non-loopback address is allowed, with a warning on warn:
// anyone who reaches it reads the node's data, and only the token stands
// between them and the actions.
func Listen(laddr string, warn io.Writer) (net.Listener, error) {
	if _, _, err := net.SplitHostPort(laddr); err != nil {
		return nil, fmt.Errorf("console address %q: want HOST:PORT, e.g. 127.0.0.1:8080 (%v)", laddr, err)
	}
	l, err := net.Listen("tcp", laddr)
	if err != nil {
		return nil, fmt.Errorf("console cannot listen on %s: %w (pick a free port, e.g. 127.0.0.1:0)", laddr, err)
	}
	if ip, ok := l.Addr().(*net.TCPAddr); ok && !ip.IP.IsLoopback() && warn != nil {
		fmt.Fprintf(warn, "warning: the console listens on %s, not loopback: anyone who reaches it reads this node's data\n", l.Addr())
	}
	return l, nil
}

// Open makes a console reading through c with o, listening on laddr (see
// Listen), and prints the address to open, with the token, on out as
// "console: open URL". Serve it with s.Serve(ctx, l).
func Open(c *node.Client, o Options, laddr string, out, warn io.Writer) (*Server, net.Listener, error) {
	s, err := New(c, o)
	if err != nil {
		return nil, nil, err
	}
	l, err := Listen(laddr, warn)
	if err != nil {
		return nil, nil, err
	}
	if a, ok := l.Addr().(*net.TCPAddr); ok && a.IP.IsUnspecified() {
		// Every interface: the names a browser may use for this machine.
		port := fmt.Sprint(a.Port)
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			s.AllowHost(net.JoinHostPort(h, port))
		}
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, ia := range addrs {
				if n, ok := ia.(*net.IPNet); ok {
					s.AllowHost(net.JoinHostPort(n.IP.String(), port))
				}
			}
		}
	}
	fmt.Fprintf(out, "console: open %s\n", s.URL(l.Addr()))
	return s, l, nil
}
