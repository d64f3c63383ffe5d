package node

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	cmtjson "github.com/cometbft/cometbft/libs/json"
	ctypes "github.com/cometbft/cometbft/rpc/core/types"
	rpctypes "github.com/cometbft/cometbft/rpc/jsonrpc/types"
	"github.com/gorilla/websocket"
)

// wsIdle is how long a websocket may stay silent before wsEvents gives it
// up as dead. A CometBFT node pings every 27 s (its read wait of 30 s,
// times 0.9), so only a hung node or a dead network stays silent this long.
const wsIdle = 90 * time.Second

// wsWriteWait bounds each write to the websocket.
const wsWriteWait = 5 * time.Second

// wsMaxMessage bounds one message from the node: a new-block-header event
// is a few KiB. A node (or whatever answers at its address) sending more
// ends the subscription instead of filling the client's memory.
const wsMaxMessage = 1 << 20

// wsEvents is one subscription to a node's events over its RPC websocket
// (CometBFT's /websocket endpoint). Unlike CometBFT's WSClient it never
// reconnects: on any error (the node closed the connection or died, an
// answer did not decode, the node reported an error) it closes Events and
// stops, and the caller opens a new one. One goroutine reads the
// connection; it alone sends on Events and closes it, so Close never races
// a send, and no goroutine is left once Close returns.
type wsEvents struct {
	conn   *websocket.Conn
	events chan ctypes.ResultEvent
	quit   chan struct{} // closed by Close
	done   chan struct{} // closed when the reader has returned
	once   sync.Once

	mu  sync.Mutex
	err error // why the reader stopped
}

// dialEvents opens a websocket to the node at remote (an address as Dial
// takes it: http://, https://, tcp://, ws://, wss:// or unix://) and
// subscribes to query; it returns once the node has accepted the
// subscription. ctx bounds the dial and the subscription, not the
// subscription's life: that lasts until Close or an error.
func dialEvents(ctx context.Context, remote, query string, capacity int) (*wsEvents, error) {
	u, err := url.Parse(remote)
	if err != nil {
		return nil, fmt.Errorf("cannot parse node address %q: %w", remote, err)
	}
	dialer := &websocket.Dialer{Proxy: http.ProxyFromEnvironment, HandshakeTimeout: 10 * time.Second}
	wsURL := url.URL{Path: strings.TrimSuffix(u.Path, "/") + "/websocket"}
	var nd net.Dialer
	netDial := nd.DialContext
	switch u.Scheme {
	case "http", "tcp", "ws", "":
		wsURL.Scheme, wsURL.Host = "ws", u.Host
	case "https", "wss":
		wsURL.Scheme, wsURL.Host = "wss", u.Host
	case "unix":
		sock := u.Host + u.Path
		wsURL.Scheme, wsURL.Host, wsURL.Path = "ws", "localhost", "/websocket"
		dialer.Proxy = nil
		netDial = func(ctx context.Context, _, _ string) (net.Conn, error) { return nd.DialContext(ctx, "unix", sock) }
	default:
		return nil, fmt.Errorf("cannot open a websocket to node address %q: scheme %q is not one of http, https, tcp, ws, wss, unix", remote, u.Scheme)
	}
	// The handshake honours ctx's deadline but not its cancellation:
	// close the connection when ctx ends before the handshake and the
	// subscription are done.
	var (
		mu    sync.Mutex
		stops []func() bool
	)
	dialer.NetDialContext = func(dctx context.Context, network, addr string) (net.Conn, error) {
		c, err := netDial(dctx, network, addr)
		if err != nil {
			return nil, err
		}
		mu.Lock() // ctx, not dctx: the dialer cancels dctx once it returns
		stops = append(stops, context.AfterFunc(ctx, func() { c.Close() }))
		mu.Unlock()
		return c, nil
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, stop := range stops {
			stop()
		}
	}()
	if wsURL.Host == "" {
		return nil, fmt.Errorf("cannot open a websocket to node address %q: no host", remote)
	}
	header := http.Header{}
	if u.User != nil {
		pass, _ := u.User.Password()
		header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pass)))
	}
	conn, resp, err := dialer.DialContext(ctx, wsURL.String(), header)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("cannot open a websocket to %s: %w (HTTP %s)", wsURL.Redacted(), err, resp.Status)
		}
		return nil, ctxErr(ctx, fmt.Errorf("cannot open a websocket to %s: %w", wsURL.Redacted(), err))
	}
	if err := subscribeOn(ctx, conn, query); err != nil {
		conn.Close()
		return nil, err
	}
	w := &wsEvents{
		conn:   conn,
		events: make(chan ctypes.ResultEvent, capacity),
		quit:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	conn.SetPingHandler(func(data string) error {
		_ = conn.SetReadDeadline(time.Now().Add(wsIdle))
		err := conn.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(wsWriteWait))
		if errors.Is(err, websocket.ErrCloseSent) {
			return nil
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return err
	})
	go w.read()
	return w, nil
}

// subscribeOn sends the subscribe request for query on conn and reads the
// node's answer, within ctx's deadline (dialEvents closes conn if ctx is
// cancelled).
func subscribeOn(ctx context.Context, conn *websocket.Conn, query string) error {
	deadline := time.Now().Add(wsWriteWait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	req, err := rpctypes.MapToRequest(rpctypes.JSONRPCIntID(0), "subscribe", map[string]any{"query": query})
	if err != nil {
		return err
	}
	conn.SetReadLimit(wsMaxMessage)
	_ = conn.SetWriteDeadline(deadline)
	if err := conn.WriteJSON(req); err != nil {
		return ctxErr(ctx, fmt.Errorf("cannot send the subscription to %q: %w", query, err))
	}
	_ = conn.SetReadDeadline(deadline)
	var resp rpctypes.RPCResponse
	if err := conn.ReadJSON(&resp); err != nil {
		return ctxErr(ctx, fmt.Errorf("no answer to the subscription to %q: %w", query, err))
	}
	if resp.Error != nil {
		return fmt.Errorf("the node refused the subscription to %q: %w", query, resp.Error)
	}
	_ = conn.SetReadDeadline(time.Now().Add(wsIdle))
	return nil
}

// ctxErr is err, or ctx's error with err if ctx ended (closing the
// connection made err).
func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return err
}

// Events delivers the subscription's events; it is closed when the
// subscription ends (Err says why).
func (w *wsEvents) Events() <-chan ctypes.ResultEvent { return w.events }

// Err is why the subscription ended: nil while it runs and after Close.
func (w *wsEvents) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// read reads events until the connection fails or Close, then closes
// Events.
func (w *wsEvents) read() {
	defer close(w.done)
	defer close(w.events)
	for {
		var resp rpctypes.RPCResponse
		if err := w.conn.ReadJSON(&resp); err != nil {
			w.fail(fmt.Errorf("the event websocket failed: %w", err))
			return
		}
		_ = w.conn.SetReadDeadline(time.Now().Add(wsIdle))
		if resp.Error != nil {
			// E.g. "CometBFT exited" when the node stops.
			w.fail(fmt.Errorf("the node ended the event subscription: %w", resp.Error))
			return
		}
		var ev ctypes.ResultEvent
		if err := cmtjson.Unmarshal(resp.Result, &ev); err != nil {
			w.fail(fmt.Errorf("cannot decode an event: %w", err))
			return
		}
		select {
		case w.events <- ev:
		case <-w.quit:
			return
		}
	}
}

// fail records why the reader stops, unless Close stopped it.
func (w *wsEvents) fail(err error) {
	select {
	case <-w.quit:
		return
	default:
	}
	w.mu.Lock()
	w.err = err
	w.mu.Unlock()
}

// Close ends the subscription: it tells the node (best effort), closes the
// connection and returns once the reader has returned and closed Events.
// It may be called any number of times, from any goroutine.
func (w *wsEvents) Close() {
	w.once.Do(func() {
		close(w.quit)
		_ = w.conn.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
		w.conn.Close()
	})
	<-w.done
}
