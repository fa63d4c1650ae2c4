package bigqueryio

import (
	"context"
	"fmt"
	"time"

	"cloud.google.com/go/bigquery"
	"google.golang.org/api/iterator"

	"github.com/sensorpipe/sensorpipe/internal/retry"
	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/bqschema"
)

// TableSpan is what a table Read reads holds, as a local run's parts are
// cut by: its size (tables.get) and its readings' event times.
type TableSpan struct {
	// Bytes and Rows are the table's (its streaming buffer's estimate,
	// when larger).
	Bytes, Rows int64
	// FirstMs and LastMs are the earliest and the latest event time;
	// Empty is set when no row has one.
	FirstMs, LastMs int64
	Empty           bool
	// NoTime is the rows whose event time is NULL: no row restriction on
	// the event-time column reads them.
	NoTime int64
}

// Span reads cfg's table's size from its metadata and its readings'
// first and last event times, and those without one, with a query
// (MIN, MAX and COUNT over the event-time column). Transient errors are
// retried until ctx's deadline.
func Span(ctx context.Context, cfg Config, spec *schemas.Spec) (TableSpan, error) {
	plan, err := bqschema.NewReadPlan(spec)
	if err != nil {
		return TableSpan{}, err
	}
	ref := fmt.Sprintf("%s:%s.%s", cfg.Project, cfg.Dataset, cfg.Table)
	c, err := bigquery.NewClient(ctx, cfg.Project, ClientOptions()...)
	if err != nil {
		return TableSpan{}, fmt.Errorf("bigquery client for %s: %w", endpoint(), err)
	}
	defer c.Close()
	limit := time.Minute
	if dl, ok := ctx.Deadline(); ok {
		limit = time.Until(dl).Round(time.Millisecond)
	}
	policy := retry.Policy{Deadline: limit, AttemptTimeout: limit}
	var span TableSpan
	err = retry.Do(ctx, policy, func(ctx context.Context) error {
		md, err := c.Dataset(cfg.Dataset).Table(cfg.Table).Metadata(ctx)
		if err != nil {
			return err
		}
		span.Bytes, span.Rows = md.NumBytes, int64(md.NumRows)
		if b := md.StreamingBuffer; b != nil {
			span.Bytes, span.Rows = max(span.Bytes, int64(b.EstimatedBytes)), max(span.Rows, int64(b.EstimatedRows))
		}
		return nil
	})
	if err != nil {
		return TableSpan{}, describe(ctx, "bigquery table "+ref, limit, err)
	}
	col := "`" + plan.EventTimeColumn() + "`"
	q := c.Query(fmt.Sprintf("SELECT MIN(%s) AS first, MAX(%s) AS last, COUNT(*) - COUNT(%s) AS no_time FROM %s", col, col, col, sqlRef(ref)))
	err = retry.Do(ctx, policy, func(ctx context.Context) error {
		it, err := q.Read(ctx)
		if err != nil {
			return err
		}
		var row []bigquery.Value
		if err := it.Next(&row); err != nil {
			if err == iterator.Done {
				return fmt.Errorf("the query of the event times of %s gave no row", ref)
			}
			return err
		}
		if len(row) != 3 {
			return fmt.Errorf("the query of the event times of %s gave %d columns, not 3", ref, len(row))
		}
		first, ok1 := row[0].(time.Time)
		last, ok2 := row[1].(time.Time)
		span.Empty = !ok1 || !ok2
		if !span.Empty {
			span.FirstMs, span.LastMs = first.UnixMilli(), last.UnixMilli()
		}
		if n, ok := row[2].(int64); ok {
			span.NoTime = n
		}
		return nil
	})
	if err != nil {
		return TableSpan{}, describe(ctx, "the event times of bigquery table "+ref, limit, err)
	}
	return span, nil
}
