package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hamba/avro/v2/ocf"
)

// TestParseFileFormats: --format wins; without it the glob's extension
// picks the format, or, when it names none, run reads it off the files.
func TestParseFileFormats(t *testing.T) {
	parseEnv(t)
	dl := t.TempDir()
	tests := []struct {
		name   string
		args   []string
		want   string
		detect bool
	}{
		{"csv by extension", []string{"--input=in/*.csv"}, "csv", false},
		{"gzip csv by extension", []string{"--input=in/*.csv.gz"}, "csv", false},
		{"parquet by extension", []string{"--input=in/*.parquet"}, "parquet", false},
		{"avro by extension", []string{"--input=in/*.AVRO"}, "avro", false},
		{"json lines", []string{"--input=in/*.jsonl"}, "", false},
		{"a glob that names none", []string{"--input=in/*"}, "", true},
		{"--format wins over the extension", []string{"--input=in/*.csv", "--format=json"}, "", false},
		{"--format names a table format", []string{"--input=in/*", "--format=parquet"}, "parquet", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl}, tc.args...)
			cfg, p, err := parse(args)
			if err != nil {
				t.Fatal(err)
			}
			if p.batch.Format != tc.want || p.detectFormat != tc.detect {
				t.Errorf("format %q (detect %v); want %q (detect %v)", p.batch.Format, p.detectFormat, tc.want, tc.detect)
			}
			if got := cfg.Spec.Options().Format; got != "json" {
				t.Errorf("payload format %q; want json (rows reach the parse as JSON objects)", got)
			}
		})
	}
	_, _, err := parse([]string{"--source=pubsub", "--subscription=projects/p/subscriptions/s", "--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + dl, "--format=csv"})
	if err == nil || !strings.Contains(err.Error(), "--format=csv reads files") || exitCode(err) != exitUsage {
		t.Errorf("a stream with --format=csv: %v", err)
	}
}

// TestSettleFormat: a glob of mixed formats, and a file whose columns
// cannot fill the spec, are one-line usage errors before the job.
func TestSettleFormat(t *testing.T) {
	parseEnv(t)
	dir := t.TempDir()
	writeFile := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	writeFile("a.csv", "sensor_id,timestamp,body_temperature,spO2,battery_level\np,2026-03-01T10:00:00Z,36,97,80\n")
	writeFile("b.csv", "sensor_id,timestamp,body_temperature,spO2,battery_level\n")
	settle := func(glob string) (plan, error) {
		t.Helper()
		cfg, p, err := parse([]string{"--bigtable_project=p", "--bigtable_instance=i", "--dead_letter=" + t.TempDir(), "--input=" + glob})
		if err != nil {
			t.Fatal(err)
		}
		err = settleFormat(context.Background(), cfg, &p)
		return p, err
	}
	if p, err := settle(filepath.Join(dir, "*")); err != nil || p.batch.Format != "csv" {
		t.Fatalf("all csv: format %q, %v", p.batch.Format, err)
	}
	writeFile("c.jsonl", "{}\n")
	if _, err := settle(filepath.Join(dir, "*")); err == nil || !strings.Contains(err.Error(), "matches files of 2 formats") {
		t.Errorf("mixed: %v", err)
	}
	writeFile("d.csv", "sensor_id,time,body_temperature,spO2,battery_level\n")
	if _, err := settle(filepath.Join(dir, "*.csv")); err == nil || !strings.Contains(err.Error(), "d.csv has no column for required field timestamp") || strings.Contains(err.Error(), "\n") {
		t.Errorf("a missing column: %v", err)
	}
	// An Avro file whose timestamp column is a boolean.
	f, err := os.Create(filepath.Join(dir, "bad.avro"))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := ocf.NewEncoder(`{"type":"record","name":"r","fields":[{"name":"sensor_id","type":"string"},{"name":"timestamp","type":"boolean"},
		{"name":"body_temperature","type":"double"},{"name":"spO2","type":"double"},{"name":"battery_level","type":"double"}]}`, f)
	if err != nil {
		t.Fatal(err)
	}
	if err := enc.Encode(map[string]any{"sensor_id": "p", "timestamp": true, "body_temperature": 36.0, "spO2": 97.0, "battery_level": 80.0}); err != nil {
		t.Fatal(err)
	}
	enc.Close()
	f.Close()
	if _, err := settle(filepath.Join(dir, "*.avro")); err == nil || !strings.Contains(err.Error(), `column "timestamp" is boolean, which cannot hold field timestamp (timestamp)`) || strings.Contains(err.Error(), "\n") {
		t.Errorf("a boolean timestamp: %v", err)
	}
}
