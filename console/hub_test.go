package console

import (
	"fmt"
	"strings"
	"testing"
	"time"

	abci "github.com/cometbft/cometbft/abci/types"

	"github.com/ogpu-network/ogpu/node"
	"github.com/ogpu-network/ogpu/types"
)

// TestHubDropsSlowBrowser: a browser that stops reading cannot hold the
// chain subscription back or grow the console's memory: after
// clientBuffer messages it is dropped (its channel closed, so its stream
// ends and EventSource reconnects), while a reading browser keeps its
// messages; streams beyond maxClients are refused.
func TestHubDropsSlowBrowser(t *testing.T) {
	h := newHub(nil)
	slow, ok := h.add(7)
	if !ok {
		t.Fatal("first client refused")
	}
	fast, _ := h.add(0)
	job7 := abci.Event{Type: "job_posted", Attributes: []abci.EventAttribute{{Key: "job", Value: "7"}}}
	job8 := abci.Event{Type: "job_posted", Attributes: []abci.EventAttribute{{Key: "job", Value: "8"}}}
	got := 0
	for i := range clientBuffer {
		h.broadcast(node.BlockEvents{Height: int64(i + 1), Time: time.Unix(0, 0), Events: []abci.Event{job7, job8}}, blockMsg{})
		<-fast.ch
		got++
	}
	if got != clientBuffer {
		t.Fatalf("reading client got %d", got)
	}
	if _, open := h.clients[slow]; open {
		t.Fatalf("a client with %d messages unread is still subscribed", clientBuffer)
	}
	n := 0
	for range slow.ch { // closed: drains what was buffered, then ends
		n++
	}
	if n != clientBuffer {
		t.Fatalf("slow client had %d buffered, want %d", n, clientBuffer)
	}
	if _, open := h.clients[fast]; !open {
		t.Fatal("the reading client was dropped")
	}
	h.remove(slow) // already gone: no double close
	for len(h.clients) < maxClients {
		h.add(0)
	}
	if _, ok := h.add(0); ok {
		t.Fatalf("stream %d accepted, want at most %d", maxClients+1, maxClients)
	}
}

// TestEntryOfFiltersJob: another job's events, and events that are not a
// job's, never reach a job's timeline.
func TestEntryOfFiltersJob(t *testing.T) {
	ev := func(typ, job string) abci.Event {
		return abci.Event{Type: typ, Attributes: []abci.EventAttribute{{Key: "job", Value: job}, {Key: "refund", Value: "1000000000000000000"}}}
	}
	if e, ok := entryOf(7, 1, time.Unix(0, 0), ev("job_cancelled", "7")); !ok || e.Step != "settled" || e.Detail != "refund=1ogpu" {
		t.Fatalf("job 7's cancel: %+v %v", e, ok)
	}
	for _, bad := range []abci.Event{ev("job_cancelled", "70"), ev("job_cancelled", "8"), ev("transfer", "7"), {Type: "job_posted"}} {
		if e, ok := entryOf(7, 1, time.Unix(0, 0), bad); ok {
			t.Fatalf("%+v became job 7's entry %+v", bad, e)
		}
	}
}

// TestEveryMessageHasAName: the explorer names every message type the
// chain defines (1 to the last, types.MaxMsgType), so a new one
// cannot show up as "type N" unnoticed; an unknown type still says its
// number.
func TestEveryMessageHasAName(t *testing.T) {
	seen := map[string]types.MsgType{}
	for m := types.MsgType(1); m <= types.MaxMsgType; m++ {
		n := MsgName(m)
		if strings.HasPrefix(n, "type ") {
			t.Errorf("message type %d has no name in the explorer", m)
		}
		if o, dup := seen[n]; dup {
			t.Errorf("types %d and %d are both %q", o, m, n)
		}
		seen[n] = m
	}
	if n := MsgName(types.MaxMsgType + 1); n != fmt.Sprintf("type %d", types.MaxMsgType+1) {
		t.Errorf("an unknown type reads %q", n)
	}
}
