package deadletterio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"cloud.google.com/go/bigquery"
	"cloud.google.com/go/pubsub/v2"
	"cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/googleapi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sensorpipe/sensorpipe/schemas/targets"
)

// EnsureTarget prepares the store t before a run, so a
// missing store stops the launch instead of failing every bundle: it
// creates a missing BigQuery table (the dataset must exist) and checks that
// a Pub/Sub topic exists. Folders and gs:// prefixes need nothing.
func EnsureTarget(ctx context.Context, t targets.DeadLetterTarget) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch t.Kind {
	case targets.DeadLetterBigQuery:
		s, err := openBigQueryDeadLetters(ctx, t)
		if err != nil {
			return err
		}
		return s.close()
	case targets.DeadLetterPubSub:
		c, err := pubsub.NewClient(ctx, t.TopicProject())
		if err != nil {
			return fmt.Errorf("dead letter %s: pubsub client: %w", t, err)
		}
		defer c.Close()
		if _, err := c.TopicAdminClient.GetTopic(ctx, &pubsubpb.GetTopicRequest{Topic: t.Topic}); err != nil {
			if status.Code(err) == codes.NotFound {
				return fmt.Errorf("dead letter topic %s does not exist: create it (gcloud pubsub topics create %s): %w", t.Topic, t.Topic, err)
			}
			return fmt.Errorf("dead letter topic %s: %w", t.Topic, err)
		}
	}
	return nil
}

// ensureTable creates the table when it is missing. Several workers may
// race to create it; the losers see 409 and go on.
func (s *bigQueryDeadLetters) ensureTable(ctx context.Context) error {
	md, err := s.table.Metadata(ctx)
	if err == nil {
		return s.addMissingColumns(ctx, md)
	}
	if !isHTTPStatus(err, http.StatusNotFound) {
		return fmt.Errorf("dead letter table %s: %w", s.name, err)
	}
	err = s.table.Create(ctx, &bigquery.TableMetadata{
		Description:      "sensorpipe dead letters: records that could not be written, with why.",
		Schema:           schema(),
		TimePartitioning: &bigquery.TimePartitioning{Type: bigquery.DayPartitioningType, Field: "time"},
	})
	switch {
	case err == nil, isHTTPStatus(err, http.StatusConflict):
		return nil
	case isHTTPStatus(err, http.StatusNotFound):
		return fmt.Errorf("dead letter table %s: dataset %s does not exist: create it (bq mk --dataset %s:%s): %w",
			s.name, s.table.DatasetID, s.client.Project(), s.table.DatasetID, err)
	}
	return fmt.Errorf("dead letter table %s: create: %w", s.name, err)
}

// addMissingColumns adds the dead-letter columns a table made by an earlier
// release lacks (sink, payload_base64): all NULLABLE, which BigQuery adds
// in place.
func (s *bigQueryDeadLetters) addMissingColumns(ctx context.Context, md *bigquery.TableMetadata) error {
	have := map[string]bool{}
	for _, f := range md.Schema {
		have[f.Name] = true
	}
	cols := append(bigquery.Schema(nil), md.Schema...)
	for _, f := range schema() {
		if !have[f.Name] {
			cols = append(cols, f)
		}
	}
	if len(cols) == len(md.Schema) {
		return nil
	}
	if _, err := s.table.Update(ctx, bigquery.TableMetadataToUpdate{Schema: cols}, md.ETag); err != nil {
		return fmt.Errorf("dead letter table %s: add the columns sensorpipe now writes: %w", s.name, err)
	}
	return nil
}

func isHTTPStatus(err error, code int) bool {
	var ge *googleapi.Error
	return errors.As(err, &ge) && ge.Code == code
}
