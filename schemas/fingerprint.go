package schemas

import "hash/fnv"

// Fingerprint hashes a prepared record's values: two firings that built the
// same reading with the same (imputed) values give the same fingerprint.
func (r *Record) Fingerprint() uint64 {
	h := fnv.New64a()
	var buf []byte
	for _, v := range r.Values {
		buf = append(buf[:0], v.Kind)
		buf = AppendText(buf, v)
		buf = append(buf, 0x1f)
		h.Write(buf)
	}
	return h.Sum64()
}
