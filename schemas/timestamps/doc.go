// Package timestamps reads event times: RFC 3339 text (a fast path for
// UTC), epoch numbers in a declared unit, and text in a Go layout read in
// an IANA zone. It knows nothing of specs; package schemas validates a
// field's layout and zone with it, and the codecs read with it.
package timestamps
