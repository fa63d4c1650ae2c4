package main

import (
	"testing"
	"time"
)

// TestParseProgressReadsBothFormats: the bench follows a stream's
// progress lines (provisional and final writes apart, as
// docs/guide/streaming.md shows them) and a batch's.
func TestParseProgressReadsBothFormats(t *testing.T) {
	for _, tc := range []struct {
		line string
		want progressLine
	}{
		{"progress     30s: read 952 (882 in open hours, provisional; 53 final, their hour closed; 17 rejected); Bigtable 904 provisional writes, 53 final; BigQuery 53 final; dead-lettered 17; 32 readings/s",
			progressLine{Read: 952, Written: 957, BigQuery: 53, Dead: 17}},
		{"progress      5s: read 132, written 121 (bigquery 121), dead-lettered 9, 26 readings/s",
			progressLine{Read: 132, Written: 121, BigQuery: 121, Dead: 9}},
	} {
		got, ok := parseProgress(tc.line, time.Time{})
		if !ok || got != tc.want {
			t.Errorf("parseProgress(%q) = %+v, %v; want %+v", tc.line, got, ok, tc.want)
		}
	}
	if _, ok := parseProgress("sensorpipe: streaming projects/p/subscriptions/s on prism", time.Time{}); ok {
		t.Error("a line that is no progress line parsed")
	}
}
