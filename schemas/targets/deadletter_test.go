package targets

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDeadLetterTarget(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want DeadLetterTarget
	}{
		{"local folder", ".run/deadletter", DeadLetterTarget{Kind: DeadLetterFiles, Path: ".run/deadletter"}},
		{"absolute folder", "/tmp/dl", DeadLetterTarget{Kind: DeadLetterFiles, Path: "/tmp/dl"}},
		{"folder with a colon written as ./", "./a:b", DeadLetterTarget{Kind: DeadLetterFiles, Path: "./a:b"}},
		{"gs prefix", "gs://bucket/sensorpipe/deadletter", DeadLetterTarget{Kind: DeadLetterFiles, Path: "gs://bucket/sensorpipe/deadletter"}},
		{"gs bucket root", "gs://bucket", DeadLetterTarget{Kind: DeadLetterFiles, Path: "gs://bucket"}},
		{"bigquery dataset.table", "bigquery:ops.dead_letters", DeadLetterTarget{Kind: DeadLetterBigQuery, Dataset: "ops", Table: "dead_letters"}},
		{"bigquery project:dataset.table", "bigquery:my-project:ops.dead_letters", DeadLetterTarget{Kind: DeadLetterBigQuery, Project: "my-project", Dataset: "ops", Table: "dead_letters"}},
		{"bigquery domain-scoped project", "bigquery:example.com:my-project:ops.dl", DeadLetterTarget{Kind: DeadLetterBigQuery, Project: "example.com:my-project", Dataset: "ops", Table: "dl"}},
		{"bigquery table with a hyphen", "bigquery:ops.dead-letters", DeadLetterTarget{Kind: DeadLetterBigQuery, Dataset: "ops", Table: "dead-letters"}},
		{"pubsub topic", "pubsub:projects/my-project/topics/dead-letters", DeadLetterTarget{Kind: DeadLetterPubSub, Topic: "projects/my-project/topics/dead-letters"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDeadLetterTarget(tt.in)
			if err != nil {
				t.Fatalf("ParseDeadLetterTarget(%q) error: %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseDeadLetterTarget(%q) = %+v; want %+v", tt.in, got, tt.want)
			}
			if s := got.String(); s != tt.in {
				t.Errorf("String() = %q; want the input %q back", s, tt.in)
			}
		})
	}
}

func TestParseDeadLetterTargetRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // in the message
	}{
		{"empty", "", "empty"},
		{"blank", "  ", "empty"},
		{"gs without bucket", "gs:///x", "no bucket"},
		{"bigquery without table", "bigquery:ops", "bigquery:DATASET.TABLE"},
		{"bigquery three dots", "bigquery:p.ops.dl", "bigquery:PROJECT:DATASET.TABLE"},
		{"bigquery empty table", "bigquery:ops.", "table"},
		{"bigquery bad dataset", "bigquery:ops-x.dl", "dataset"},
		{"bigquery bad project", "bigquery:My_Project:ops.dl", "project id"},
		{"pubsub short form", "pubsub:dead-letters", "pubsub:projects/PROJECT/topics/TOPIC"},
		{"pubsub subscription", "pubsub:projects/p/subscriptions/s", "pubsub:projects/PROJECT/topics/TOPIC"},
		{"unknown scheme", "s3://bucket/x", `unknown target type "s3"`},
		{"typo of bigquery", "bq:ops.dl", `unknown target type "bq"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseDeadLetterTarget(tt.in)
			if err == nil {
				t.Fatalf("ParseDeadLetterTarget(%q) = %+v; want an error", tt.in, got)
			}
			if !errors.Is(err, ErrBadDeadLetterTarget) {
				t.Errorf("error %v does not wrap ErrBadDeadLetterTarget", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q; want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestDeadLetterTargetTopicProject(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"pubsub:projects/p-1/topics/t-1", "p-1"},
		{"bigquery:ops.dl", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			target, err := ParseDeadLetterTarget(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := target.TopicProject(); got != tt.want {
				t.Errorf("TopicProject() = %q; want %q", got, tt.want)
			}
		})
	}
}

func TestDeadLetterTargetWithDefaultProject(t *testing.T) {
	tests := []struct {
		name, in, project, want string
		wantErr                 bool
	}{
		{"bigquery without a project gets it", "bigquery:ops.dl", "my-project", "bigquery:my-project:ops.dl", false},
		{"bigquery keeps its own", "bigquery:other:ops.dl", "my-project", "bigquery:other:ops.dl", false},
		{"folder unchanged", ".run/dl", "my-project", ".run/dl", false},
		{"topic unchanged", "pubsub:projects/p/topics/dead", "my-project", "pubsub:projects/p/topics/dead", false},
		{"invalid default project", "bigquery:ops.dl", "My_Project", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := ParseDeadLetterTarget(tt.in)
			if err != nil {
				t.Fatalf("ParseDeadLetterTarget(%q): %v", tt.in, err)
			}
			got, err := in.WithDefaultProject(tt.project)
			if tt.wantErr {
				if !errors.Is(err, ErrBadDeadLetterTarget) {
					t.Fatalf("WithDefaultProject(%q) error %v; want ErrBadDeadLetterTarget", tt.project, err)
				}
				return
			}
			if err != nil || got.String() != tt.want {
				t.Fatalf("WithDefaultProject(%q) = %q, %v; want %q", tt.project, got, err, tt.want)
			}
		})
	}
}
