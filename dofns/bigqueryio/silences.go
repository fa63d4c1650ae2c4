package bigqueryio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/silences"
)

// readSilencesPolicy bounds ReadSilences: once, when a restarted local
// stream starts.
var readSilencesPolicy = retry.Policy{AttemptTimeout: 2 * time.Minute, Deadline: 5 * time.Minute, MaxAttempts: 3}

// ReadSilences reads the silence and resumed records with silent_since at
// or after sinceMs from project.dataset's silences table
// (silences.SilencesTable), with one query (or, from a BigQuery that
// answers no queries, such as an emulator without its SQL engine, by
// listing the table's rows), each record's identity values typed by
// spec's fields. A table that does not exist holds none. It is
// dofns.Stores.ReadSilences: what a restarted local stream raised before
// it was killed.
func ReadSilences(ctx context.Context, project, dataset string, spec *schemas.Spec, sinceMs int64) ([]silences.Silence, error) {
	c, err := bigquery.NewClient(ctx, project, ClientOptions()...)
	if err != nil {
		return nil, fmt.Errorf("read silences: bigquery client: %w", err)
	}
	defer c.Close()
	ref := project + ":" + dataset + "." + silences.SilencesTable
	sql := fmt.Sprintf("SELECT * FROM %s WHERE %s >= TIMESTAMP_MILLIS(%d)", sqlRef(ref), silences.SilenceColSilentSince, sinceMs)
	var out []silences.Silence
	err = retry.Do(ctx, readSilencesPolicy, func(ctx context.Context) error {
		out = out[:0]
		it, err := c.Query(sql).Read(ctx)
		if hasCode(err, http.StatusNotImplemented) {
			it, err = c.Dataset(dataset).Table(silences.SilencesTable).Read(ctx), nil
		}
		if notFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		for {
			var row map[string]bigquery.Value
			err := it.Next(&row)
			if errors.Is(err, iterator.Done) {
				return nil
			}
			if notFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if x, ok := silenceOfRow(spec, row); ok && x.SilentSinceMs >= sinceMs {
				out = append(out, x)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read silences from %s (%s): %w", ref, endpoint(), err)
	}
	return out, nil
}

// silenceOfRow is a row of the silences table as a record; false for a
// row without its kind or times.
func silenceOfRow(spec *schemas.Spec, row map[string]bigquery.Value) (silences.Silence, bool) {
	var x silences.Silence
	x.Kind, _ = row[silences.SilenceColKind].(string)
	if x.Kind != silences.SilenceRaised && x.Kind != silences.SilenceResumed {
		return x, false
	}
	at := func(col string, dst *int64) bool {
		t, ok := row[col].(time.Time)
		*dst = t.UnixMilli()
		return ok
	}
	if !at(silences.SilenceColLastSeen, &x.LastSeenMs) || !at(silences.SilenceColSilentSince, &x.SilentSinceMs) {
		return x, false
	}
	at(silences.SilenceColDetectedAt, &x.DetectedAtMs)
	if x.Kind == silences.SilenceResumed && !at(silences.SilenceColResumedAt, &x.ResumedAtMs) {
		return x, false
	}
	x.Identity = make([]schemas.Value, len(spec.Identity))
	for i, name := range spec.Identity {
		typ := ""
		if fi := spec.FieldIndex(name); fi >= 0 && fi < len(spec.Fields) {
			typ = spec.Fields[fi].Type
		}
		x.Identity[i] = identityValue(typ, row[name])
	}
	return x, true
}

// identityValue is a column's value as the spec's field of type typ holds
// it.
func identityValue(typ string, v bigquery.Value) schemas.Value {
	switch v := v.(type) {
	case nil:
		return schemas.Value{}
	case string:
		if typ == schemas.TypeBytes {
			return schemas.Value{Kind: schemas.KindBytes, Str: v}
		}
		return schemas.Value{Kind: schemas.KindString, Str: v}
	case []byte:
		return schemas.Value{Kind: schemas.KindBytes, Str: string(v)}
	case int64:
		if typ == schemas.TypeFloat {
			return schemas.Value{Kind: schemas.KindFloat, Num: float64(v)}
		}
		return schemas.Value{Kind: schemas.KindInt, Int: v}
	case float64:
		return schemas.Value{Kind: schemas.KindFloat, Num: v}
	case bool:
		return schemas.Value{Kind: schemas.KindBool, Bool: v}
	case time.Time:
		return schemas.Value{Kind: schemas.KindTime, Int: v.UnixMilli()}
	}
	return schemas.Value{Kind: schemas.KindString, Str: fmt.Sprint(v)}
}
