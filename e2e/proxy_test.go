package e2e

import (
	"bufio"
	"io"
	"net"
	"testing"
	"time"
)

// echo serves a line echo on loopback and returns its address.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

// roundTrip sends a line through addr's connection c and reads it back.
func roundTrip(c net.Conn, r *bufio.Reader, s string) error {
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte(s + "\n")); err != nil {
		return err
	}
	got, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if got != s+"\n" {
		return io.ErrUnexpectedEOF
	}
	return nil
}

func dialLine(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// TestProxyPartitionHeal: a partition closes the partitioned node's
// connections both ways and refuses new ones (a node cut off cannot slip
// a vote through a fresh connection), leaves the other links alone, and a
// heal lets new connections through.
func TestProxyPartitionHeal(t *testing.T) {
	p := NewProxy()
	t.Cleanup(p.Close)
	to1, to2 := echo(t), echo(t)
	l01, err := p.Link(0, 1, to1)
	if err != nil {
		t.Fatal(err)
	}
	l02, err := p.Link(0, 2, to2)
	if err != nil {
		t.Fatal(err)
	}
	c01, r01 := dialLine(t, l01)
	c02, r02 := dialLine(t, l02)
	for _, c := range []struct {
		c net.Conn
		r *bufio.Reader
	}{{c01, r01}, {c02, r02}} {
		if err := roundTrip(c.c, c.r, "hello"); err != nil {
			t.Fatalf("before the partition: %v", err)
		}
	}
	if n := p.Open(1); n != 1 {
		t.Fatalf("%d open connections of node1, want 1", n)
	}

	p.Partition(1)
	if err := roundTrip(c01, r01, "cut"); err == nil {
		t.Fatal("a connection to the partitioned node still carries data")
	}
	if err := roundTrip(c02, r02, "other link"); err != nil {
		t.Fatalf("a link not touching the partitioned node broke: %v", err)
	}
	c, r := dialLine(t, l01)
	if err := roundTrip(c, r, "new"); err == nil {
		t.Fatal("a new connection to the partitioned node was let through")
	}
	if p.Refused() == 0 {
		t.Fatal("the refused connection was not counted")
	}

	p.Heal(1)
	c, r = dialLine(t, l01)
	if err := roundTrip(c, r, "healed"); err != nil {
		t.Fatalf("after the heal: %v", err)
	}
}
