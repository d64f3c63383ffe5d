package session

import "fmt"

// UnmarshalText reads a status printed by MarshalText (a dispute read
// back from a query).
func (s *DisputeStatus) UnmarshalText(b []byte) error {
	for v := DisputeOpen; v <= DisputeUnresolved; v++ {
		if v.String() == string(b) {
			*s = v
			return nil
		}
	}
	return fmt.Errorf("unknown dispute status %q", b)
}
