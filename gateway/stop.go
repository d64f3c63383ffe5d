package gateway

import "strings"

// stopper applies a request's stop sequences to text arriving in pieces:
// it passes text on as soon as no stop sequence can begin in it, holds
// back a tail that could be the start of one, and cuts at the first that
// matches. Greedy jobs generate to their end anyway (and are paid for it);
// stop sequences only shorten what the client is given.
type stopper struct {
	stops   []string
	held    string
	stopped bool
}

// push adds piece and returns the text now safe to emit.
func (s *stopper) push(piece string) string {
	if s.stopped {
		return ""
	}
	buf := s.held + piece
	if i := firstStop(buf, s.stops); i >= 0 {
		s.stopped, s.held = true, ""
		return buf[:i]
	}
	keep := 0
	for _, st := range s.stops {
		for n := min(len(st)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, st[:n]) {
				keep = n
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep]
}

// flush returns what is held back once the text is complete.
func (s *stopper) flush() string {
	out := s.held
	s.held = ""
	return out
}

// firstStop is the index of the earliest stop sequence in text, or -1.
func firstStop(text string, stops []string) int {
	first := -1
	for _, st := range stops {
		if i := strings.Index(text, st); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	return first
}

// cutAtStop cuts text at its first stop sequence; stopped says whether one
// matched.
func cutAtStop(text string, stops []string) (string, bool) {
	if i := firstStop(text, stops); i >= 0 {
		return text[:i], true
	}
	return text, false
}
