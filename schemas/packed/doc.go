// Package packed holds the binary forms of records: a record and a run of
// records as Beam's coders carry them (AppendBinary, AppendRecords and
// their decoders), and a stream's held readings as its state keeps them
// (AppendHeld, DecodeHeld), read with one byte Reader. It knows the spec
// only for its values' count.
package packed
