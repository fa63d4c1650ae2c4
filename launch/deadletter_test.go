package main

import (
	"strings"
	"testing"
)

func TestValidateDeadLetter(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		project string
		local   bool
		want    string
	}{
		{"local folder on a local runner", ".run/deadletter", "p", true, ".run/deadletter"},
		{"gs prefix on Dataflow", "gs://b/dl", "p", false, "gs://b/dl"},
		{"bigquery gets the default project", "bigquery:ops.dl", "my-project", false, "bigquery:my-project:ops.dl"},
		{"bigquery keeps its own project", "bigquery:other-project:ops.dl", "my-project", false, "bigquery:other-project:ops.dl"},
		{"pubsub topic", "pubsub:projects/p/topics/dead", "my-project", false, "pubsub:projects/p/topics/dead"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := validateDeadLetter(tt.value, tt.project, tt.local)
			if err != nil {
				t.Fatalf("validateDeadLetter(%q) error: %v", tt.value, err)
			}
			if got.String() != tt.want {
				t.Errorf("validateDeadLetter(%q) = %q; want %q", tt.value, got, tt.want)
			}
		})
	}
}

func TestValidateDeadLetterRejects(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		project string
		local   bool
		want    string
	}{
		{"empty", "", "p", true, "--dead_letter is required"},
		{"local folder on Dataflow", "/tmp/dl", "p", false, "is a local folder"},
		{"bigquery without any project", "bigquery:ops.dl", "", false, "use bigquery:PROJECT:ops.dl"},
		{"bad target", "bq:ops.dl", "p", true, `unknown target type "bq"`},
		{"bad topic", "pubsub:dead", "p", true, "pubsub:projects/PROJECT/topics/TOPIC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := validateDeadLetter(tt.value, tt.project, tt.local)
			if err == nil {
				t.Fatalf("validateDeadLetter(%q) = %q; want an error", tt.value, got)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || !strings.HasPrefix(msg, "--dead_letter") || strings.Contains(msg, "\n") {
				t.Errorf("error %q; want one line starting --dead_letter and containing %q", msg, tt.want)
			}
		})
	}
}
