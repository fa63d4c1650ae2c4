// Package targets parses the names a run reads from and writes dead letters to: a Pub/Sub subscription and a dead-letter target (a folder, a bucket, a BigQuery table or a Pub/Sub topic).
package targets

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DeadLetterKind is the kind of store dead letters are written to.
type DeadLetterKind uint8

// Dead-letter store kinds.
const (
	// DeadLetterFiles is a local folder or a gs:// prefix: JSON Lines, one
	// file per bundle.
	DeadLetterFiles DeadLetterKind = iota
	// DeadLetterBigQuery is a BigQuery table written with
	// tabledata.insertAll.
	DeadLetterBigQuery
	// DeadLetterPubSub is a Pub/Sub topic: one message per dead letter.
	DeadLetterPubSub
)

// String names the kind as the target prefix does.
func (k DeadLetterKind) String() string {
	switch k {
	case DeadLetterBigQuery:
		return "bigquery"
	case DeadLetterPubSub:
		return "pubsub"
	}
	return "files"
}

// Dead-letter target prefixes.
const (
	BigQueryTargetPrefix = "bigquery:"
	PubSubTargetPrefix   = "pubsub:"
)

// DeadLetterTargetForms lists the accepted forms, for messages and help
// text.
const DeadLetterTargetForms = "a local folder, gs://BUCKET/PREFIX, bigquery:DATASET.TABLE, bigquery:PROJECT:DATASET.TABLE or pubsub:projects/PROJECT/topics/TOPIC"

// ErrBadDeadLetterTarget is wrapped by every ParseDeadLetterTarget error.
var ErrBadDeadLetterTarget = errors.New("bad dead-letter target")

// DeadLetterTarget is a parsed --dead_letter value.
type DeadLetterTarget struct {
	Kind DeadLetterKind

	// Path is the folder or gs:// prefix (DeadLetterFiles).
	Path string

	// Project (empty: the default project), Dataset and Table name the
	// table (DeadLetterBigQuery).
	Project string
	Dataset string
	Table   string

	// Topic is projects/P/topics/T (DeadLetterPubSub).
	Topic string

	// Run, when set, names a run's dead-letter files
	// (deadletter-RUN-TIME-RANDOM.jsonl), so that a replay can take that
	// run's own dead letters. It is not part of the target's text.
	Run string
}

// TopicProject returns the project of a Pub/Sub target's topic.
func (t DeadLetterTarget) TopicProject() string {
	if m := topicRE.FindStringSubmatch(t.Topic); m != nil {
		return m[1]
	}
	return ""
}

// String renders t in the form ParseDeadLetterTarget reads, so
// ParseDeadLetterTarget(t.String()) == t.
func (t DeadLetterTarget) String() string {
	switch t.Kind {
	case DeadLetterBigQuery:
		if t.Project != "" {
			return BigQueryTargetPrefix + t.Project + ":" + t.Dataset + "." + t.Table
		}
		return BigQueryTargetPrefix + t.Dataset + "." + t.Table
	case DeadLetterPubSub:
		return PubSubTargetPrefix + t.Topic
	}
	return t.Path
}

var (
	// BigQuery names: https://cloud.google.com/bigquery/docs/datasets#dataset-naming
	// and https://cloud.google.com/bigquery/docs/tables#table_naming.
	bqProjectRE = regexp.MustCompile(`^([a-z0-9][a-z0-9.-]*:)?[a-z][a-z0-9-]{0,62}$`)
	bqDatasetRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
	bqTableRE   = regexp.MustCompile(`^[\p{L}\p{M}\p{N}\p{Pc}\p{Pd}]+$`)
	topicRE     = regexp.MustCompile(`^projects/([^/]+)/topics/([A-Za-z][A-Za-z0-9._~%+-]{2,254})$`)
	// schemeRE matches a leading "word:" that names no known target.
	schemeRE = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+._-]*):`)
)

// ParseDeadLetterTarget parses a --dead_letter value: a local folder, a
// gs:// prefix, bigquery:DATASET.TABLE, bigquery:PROJECT:DATASET.TABLE or
// pubsub:projects/P/topics/T. Errors wrap ErrBadDeadLetterTarget and say
// what form to use.
func ParseDeadLetterTarget(s string) (DeadLetterTarget, error) {
	switch {
	case strings.TrimSpace(s) == "":
		return DeadLetterTarget{}, fmt.Errorf("%w: empty; use %s", ErrBadDeadLetterTarget, DeadLetterTargetForms)
	case strings.HasPrefix(s, BigQueryTargetPrefix):
		return parseBigQueryTarget(strings.TrimPrefix(s, BigQueryTargetPrefix))
	case strings.HasPrefix(s, PubSubTargetPrefix):
		topic := strings.TrimPrefix(s, PubSubTargetPrefix)
		if !topicRE.MatchString(topic) {
			return DeadLetterTarget{}, fmt.Errorf("%w: %q: the topic must look like pubsub:projects/PROJECT/topics/TOPIC", ErrBadDeadLetterTarget, s)
		}
		return DeadLetterTarget{Kind: DeadLetterPubSub, Topic: topic}, nil
	case strings.HasPrefix(s, "gs://"):
		bucket, _, _ := strings.Cut(strings.TrimPrefix(s, "gs://"), "/")
		if bucket == "" {
			return DeadLetterTarget{}, fmt.Errorf("%w: %q has no bucket: use gs://BUCKET/PREFIX", ErrBadDeadLetterTarget, s)
		}
		return DeadLetterTarget{Kind: DeadLetterFiles, Path: s}, nil
	}
	if m := schemeRE.FindStringSubmatch(s); m != nil && len(m[1]) > 1 {
		// "bq:x.y", "s3://b": a typo or a store we don't write, not a
		// folder name. A folder whose name has a colon can be given as
		// ./name.
		return DeadLetterTarget{}, fmt.Errorf("%w: %q: unknown target type %q; use %s", ErrBadDeadLetterTarget, s, m[1], DeadLetterTargetForms)
	}
	return DeadLetterTarget{Kind: DeadLetterFiles, Path: s}, nil
}

// WithDefaultProject returns a BigQuery target with project filled in when
// it names none, so workers never have to detect one; other targets, and
// BigQuery targets that name their project, are returned as they are. An
// invalid project id is an error wrapping ErrBadDeadLetterTarget.
func (t DeadLetterTarget) WithDefaultProject(project string) (DeadLetterTarget, error) {
	if t.Kind != DeadLetterBigQuery || t.Project != "" {
		return t, nil
	}
	if !bqProjectRE.MatchString(project) {
		return t, fmt.Errorf("%w: %q is not a project id (lowercase letters, digits and hyphens, starting with a letter): use bigquery:PROJECT:%s.%s", ErrBadDeadLetterTarget, project, t.Dataset, t.Table)
	}
	t.Project = project
	return t, nil
}

// parseBigQueryTarget parses [PROJECT:]DATASET.TABLE. A domain-scoped
// project (example.com:my-project) has a colon of its own, so the project
// is everything before the last colon.
func parseBigQueryTarget(s string) (DeadLetterTarget, error) {
	t := DeadLetterTarget{Kind: DeadLetterBigQuery}
	rest := s
	if i := strings.LastIndex(s, ":"); i >= 0 {
		t.Project, rest = s[:i], s[i+1:]
		if !bqProjectRE.MatchString(t.Project) {
			return t, fmt.Errorf("%w: bigquery:%s: %q is not a project id (lowercase letters, digits and hyphens, starting with a letter)", ErrBadDeadLetterTarget, s, t.Project)
		}
	}
	dataset, table, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(table, ".") {
		return t, fmt.Errorf("%w: bigquery:%s: use bigquery:DATASET.TABLE or bigquery:PROJECT:DATASET.TABLE", ErrBadDeadLetterTarget, s)
	}
	if !bqDatasetRE.MatchString(dataset) {
		return t, fmt.Errorf("%w: bigquery:%s: dataset %q may hold only letters, digits and underscores", ErrBadDeadLetterTarget, s, dataset)
	}
	if !bqTableRE.MatchString(table) {
		return t, fmt.Errorf("%w: bigquery:%s: table %q may hold only letters, marks, digits, underscores and hyphens", ErrBadDeadLetterTarget, s, table)
	}
	t.Dataset, t.Table = dataset, table
	return t, nil
}
