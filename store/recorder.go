package store

import "bytes"

// Recorder is a KV over a parent that records, in order, the point reads
// that reach it (key and value) and the writes (key and value, nil for a
// delete), and whether anything iterated. Put under a transaction's own
// write buffers, it sees the reads of the state the transaction started
// from and the writes the transaction made: enough to tell, later and over
// another state, whether running it again would read the same values, and
// if so to apply the same writes (chain's execution records).
type Recorder struct {
	parent   KV
	reads    []Access
	writes   []Access
	iterated bool
}

// Access is one recorded read or write; Value nil is an absent key (a
// read) or a delete (a write).
type Access struct {
	Key, Value []byte
}

// NewRecorder returns a recorder over parent.
func NewRecorder(parent KV) *Recorder { return &Recorder{parent: parent} }

func (r *Recorder) Get(key []byte) []byte {
	v := r.parent.Get(key)
	r.reads = append(r.reads, Access{Key: bytes.Clone(key), Value: v})
	return v
}

func (r *Recorder) Iterate(start, end []byte, fn func(key, value []byte) bool) {
	r.iterated = true
	r.parent.Iterate(start, end, fn)
}

func (r *Recorder) Set(key, value []byte) {
	r.writes = append(r.writes, Access{Key: bytes.Clone(key), Value: bytes.Clone(value)})
	r.parent.Set(key, value)
}

func (r *Recorder) Delete(key []byte) {
	r.writes = append(r.writes, Access{Key: bytes.Clone(key)})
	r.parent.Delete(key)
}

// Reads, Writes and Iterated report what was recorded.
func (r *Recorder) Reads() []Access  { return r.reads }
func (r *Recorder) Writes() []Access { return r.writes }
func (r *Recorder) Iterated() bool   { return r.iterated }

// ReadsMatch reports whether kv holds, at every recorded read's key, the
// value that was read.
func ReadsMatch(kv Reader, reads []Access) bool {
	for _, a := range reads {
		if !bytes.Equal(kv.Get(a.Key), a.Value) {
			return false
		}
	}
	return true
}

// Apply makes writes, in order, to kv.
func Apply(kv KV, writes []Access) {
	for _, a := range writes {
		if a.Value == nil {
			kv.Delete(a.Key)
		} else {
			kv.Set(a.Key, a.Value)
		}
	}
}
