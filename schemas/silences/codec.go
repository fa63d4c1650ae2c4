package silences

import (
	"encoding/binary"
	"fmt"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/hours"
	"github.com/sensorpipe/sensorpipe/schemas/packed"
)

// SilencesBigQuery describes the silences table: the identity fields,
// silence_id (the primary key), kind, last_seen, silent_since,
// detected_at and resumed_at (NULL in a silence record), partitioned by
// day of silent_since and clustered by identity.
func SilencesBigQuery(s *schemas.Spec) *schemas.BigQuerySpec {
	bq := &schemas.BigQuerySpec{
		Table:            SilencesTable,
		TimePartitioning: &schemas.PartitionSpec{Type: "DAY", Field: SilenceColSilentSince},
		Clustering:       append([]string(nil), s.Identity...),
		PrimaryKey:       []string{SilenceColID},
		MaxStaleness:     schemas.DefaultMaxStaleness.String(),
	}
	if s.BigQuery != nil && len(s.BigQuery.PrimaryKey) > 0 && s.BigQuery.MaxStaleness != "" {
		bq.MaxStaleness = s.BigQuery.MaxStaleness
	}
	add := func(name, typ, mode string) {
		bq.Columns = append(bq.Columns, schemas.BQColumnSpec{Name: name, Type: typ, Mode: mode, Value: name})
	}
	for _, name := range s.Identity {
		typ := "STRING"
		if fi := s.FieldIndex(name); fi >= 0 && fi < len(s.Fields) {
			typ = hours.BQType(s.Fields[fi].Type)
		}
		add(name, typ, "REQUIRED")
	}
	add(SilenceColID, "STRING", "REQUIRED")
	add(SilenceColKind, "STRING", "REQUIRED")
	add(SilenceColLastSeen, "TIMESTAMP", "REQUIRED")
	add(SilenceColSilentSince, "TIMESTAMP", "REQUIRED")
	add(SilenceColDetectedAt, "TIMESTAMP", "REQUIRED")
	add(SilenceColResumedAt, "TIMESTAMP", "")
	return bq
}

// SilenceBQRow is x as a row of SilencesBigQuery. Its change sequence is
// its detected_at, so a gap raised again replaces its row.
func SilenceBQRow(s *schemas.Spec, x Silence) hours.BQRow {
	vals := make([]schemas.Value, 0, len(x.Identity)+6)
	vals = append(vals, x.Identity...)
	resumed := schemas.Value{}
	if x.Kind == SilenceResumed {
		resumed = schemas.Value{Kind: schemas.KindTime, Int: x.ResumedAtMs}
	}
	vals = append(vals,
		schemas.Value{Kind: schemas.KindString, Str: SilenceID(s, x)},
		schemas.Value{Kind: schemas.KindString, Str: x.Kind},
		schemas.Value{Kind: schemas.KindTime, Int: x.LastSeenMs},
		schemas.Value{Kind: schemas.KindTime, Int: x.SilentSinceMs},
		schemas.Value{Kind: schemas.KindTime, Int: x.DetectedAtMs},
		resumed)
	return hours.BQRow{Values: vals, Origin: hours.Origin{Raw: string(SilenceJSON(s, x)), Source: SilencesTable}, Seq: hours.ChangeSeq{Micros: x.DetectedAtMs * 1000}}
}

// SilenceBatch is one bundle's readings of one sensor as the silence
// step takes them: the identity's values and the distinct event times,
// ascending, with each one's silent_after (SilentAfterOf, in
// milliseconds; nil when the spec's is the same for every reading).
type SilenceBatch struct {
	Identity []schemas.Value
	TimesMs  []int64
	AfterMs  []int64
	// History marks a restarted local stream's readings read back from
	// the store (SilenceTrack.Prepend), not read from the source.
	History bool
	// Stored are the sensor's silence and resumed records a History batch
	// read back from the silences table (SilenceTrack.Restore):
	// their kinds and times, not their identities.
	Stored []Silence
}

// AppendSilenceBatch appends b's compact form to dst: the identity as a
// record (packed.AppendRecords), then the times as varint deltas, a mark
// byte, the silent_afters when there are any, then the stored records
// when there are any (their count, then each one's kind, 0 silence or 1
// resumed, and its last_seen, silent_since and resumed_at as varints).
// DecodeSilenceBatch reads it.
func AppendSilenceBatch(dst []byte, b SilenceBatch) []byte {
	dst = appendIdentity(dst, b.Identity)
	dst = binary.AppendUvarint(dst, uint64(len(b.TimesMs)))
	prev := int64(0)
	for _, t := range b.TimesMs {
		dst = binary.AppendVarint(dst, t-prev)
		prev = t
	}
	var mark byte
	if b.History {
		mark = 2
	}
	if len(b.Stored) > 0 {
		mark |= 4
	}
	if b.AfterMs != nil {
		mark |= 1
	}
	dst = append(dst, mark)
	if b.AfterMs != nil {
		for i := range b.TimesMs {
			a := int64(0)
			if i < len(b.AfterMs) {
				a = b.AfterMs[i]
			}
			dst = binary.AppendVarint(dst, a)
		}
	}
	if len(b.Stored) > 0 {
		dst = binary.AppendUvarint(dst, uint64(len(b.Stored)))
		for _, x := range b.Stored {
			k := byte(0)
			if x.Kind == SilenceResumed {
				k = 1
			}
			dst = append(dst, k)
			dst = binary.AppendVarint(dst, x.LastSeenMs)
			dst = binary.AppendVarint(dst, x.SilentSinceMs)
			dst = binary.AppendVarint(dst, x.ResumedAtMs)
		}
	}
	return dst
}

// DecodeSilenceBatch decodes what AppendSilenceBatch wrote.
func DecodeSilenceBatch(p []byte) (SilenceBatch, error) {
	var b SilenceBatch
	id, rest, err := decodeIdentity(p)
	if err != nil {
		return b, err
	}
	b.Identity = id
	n, k := binary.Uvarint(rest)
	if k <= 0 || n > uint64(len(rest)) {
		return b, fmt.Errorf("%w: silence batch: bad count", packed.ErrCodec)
	}
	rest = rest[k:]
	b.TimesMs = make([]int64, n)
	prev := int64(0)
	for i := range b.TimesMs {
		d, k := binary.Varint(rest)
		if k <= 0 {
			return b, fmt.Errorf("%w: silence batch: bad time %d", packed.ErrCodec, i)
		}
		rest = rest[k:]
		prev += d
		b.TimesMs[i] = prev
	}
	if len(rest) == 0 {
		return b, fmt.Errorf("%w: silence batch: truncated", packed.ErrCodec)
	}
	mark := rest[0]
	rest = rest[1:]
	if mark > 7 {
		return b, fmt.Errorf("%w: silence batch: bad mark", packed.ErrCodec)
	}
	b.History = mark&2 != 0
	if mark&1 != 0 {
		b.AfterMs = make([]int64, n)
		for i := range b.AfterMs {
			a, k := binary.Varint(rest)
			if k <= 0 {
				return b, fmt.Errorf("%w: silence batch: bad silent_after %d", packed.ErrCodec, i)
			}
			rest = rest[k:]
			b.AfterMs[i] = a
		}
	}
	if mark&4 != 0 {
		n, k := binary.Uvarint(rest)
		if k <= 0 || n > uint64(len(rest)) {
			return b, fmt.Errorf("%w: silence batch: bad stored count", packed.ErrCodec)
		}
		rest = rest[k:]
		b.Stored = make([]Silence, n)
		for i := range b.Stored {
			x := &b.Stored[i]
			if len(rest) == 0 || rest[0] > 1 {
				return b, fmt.Errorf("%w: silence batch: bad stored kind %d", packed.ErrCodec, i)
			}
			x.Kind, x.Identity = SilenceRaised, b.Identity
			if rest[0] == 1 {
				x.Kind = SilenceResumed
			}
			rest = rest[1:]
			for _, t := range []*int64{&x.LastSeenMs, &x.SilentSinceMs, &x.ResumedAtMs} {
				v, k := binary.Varint(rest)
				if k <= 0 {
					return b, fmt.Errorf("%w: silence batch: bad stored time %d", packed.ErrCodec, i)
				}
				*t, rest = v, rest[k:]
			}
		}
	}
	if len(rest) != 0 {
		return b, fmt.Errorf("%w: silence batch: %d bytes left", packed.ErrCodec, len(rest))
	}
	return b, nil
}

// AppendSilenceTrack appends t's compact form to dst: a flags byte
// (Known, Open), LastMs and AfterMs as varints, then the identity.
// DecodeSilenceTrack reads it.
func AppendSilenceTrack(dst []byte, t SilenceTrack) []byte {
	var flags byte
	if t.Known {
		flags |= 1
	}
	if t.Open {
		flags |= 2
	}
	dst = append(dst, flags)
	dst = binary.AppendVarint(dst, t.LastMs)
	dst = binary.AppendVarint(dst, t.AfterMs)
	dst = binary.AppendVarint(dst, t.FirstMs)
	return appendIdentity(dst, t.Identity)
}

// DecodeSilenceTrack decodes what AppendSilenceTrack wrote.
func DecodeSilenceTrack(p []byte) (SilenceTrack, error) {
	var t SilenceTrack
	if len(p) == 0 || p[0] > 3 {
		return t, fmt.Errorf("%w: silence track: bad flags", packed.ErrCodec)
	}
	t.Known, t.Open = p[0]&1 != 0, p[0]&2 != 0
	rest := p[1:]
	var k int
	if t.LastMs, k = binary.Varint(rest); k <= 0 {
		return t, fmt.Errorf("%w: silence track: bad last time", packed.ErrCodec)
	}
	rest = rest[k:]
	if t.AfterMs, k = binary.Varint(rest); k <= 0 {
		return t, fmt.Errorf("%w: silence track: bad silent_after", packed.ErrCodec)
	}
	rest = rest[k:]
	if t.FirstMs, k = binary.Varint(rest); k <= 0 {
		return t, fmt.Errorf("%w: silence track: bad first time", packed.ErrCodec)
	}
	id, rest, err := decodeIdentity(rest[k:])
	if err != nil {
		return t, err
	}
	if len(rest) != 0 {
		return t, fmt.Errorf("%w: silence track: %d bytes left", packed.ErrCodec, len(rest))
	}
	t.Identity = id
	return t, nil
}

// appendIdentity appends identity values as one record (packed.AppendRecords),
// after its length.
func appendIdentity(dst []byte, identity []schemas.Value) []byte {
	rec := packed.AppendRecords(nil, []schemas.Record{{Values: identity}})
	dst = binary.AppendUvarint(dst, uint64(len(rec)))
	return append(dst, rec...)
}

func decodeIdentity(p []byte) ([]schemas.Value, []byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, fmt.Errorf("%w: silence identity: bad length", packed.ErrCodec)
	}
	recs, err := packed.DecodeRecords(p[k : k+int(n)])
	if err != nil {
		return nil, nil, fmt.Errorf("silence identity: %w", err)
	}
	if len(recs) != 1 {
		return nil, nil, fmt.Errorf("%w: silence identity: %d records", packed.ErrCodec, len(recs))
	}
	return recs[0].Values, p[k+int(n):], nil
}
