package bqemu

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// discoveryGz is BigQuery's REST discovery document, pinned: the copy the
// gcloud SDK's bq CLI bundles (google-cloud-sdk/platform/bq/discovery_next/
// bigquery.json, bq 2.1.18, revision 20250528, sha256 9061096d...6a56;
// Apache License 2.0, like the rest of bq), gzipped. Clients that build
// themselves from a discovery document (bq, googleapiclient) fetch it from
// /$discovery/rest; the emulator serves it with its own address as the root
// URL, so they send every call here. A real document rather than a
// hand-written one: every method and parameter the clients know stays
// declared, and unimplemented ones get the emulator's error instead of a
// client-side failure.
//
//go:embed discovery/bigquery_v2.json.gz
var discoveryGz []byte

// discoveryDoc is the parsed document, top-level members kept raw.
var discoveryDoc = sync.OnceValues(func() (map[string]json.RawMessage, error) {
	zr, err := gzip.NewReader(bytes.NewReader(discoveryGz))
	if err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("discovery document: %w", err)
	}
	return doc, nil
})

// discoveryPaths are where Google's clients look for the document: the
// API's own host (bq, newer googleapiclient) and the Discovery service's
// path (older googleapiclient).
var discoveryPaths = map[string]bool{
	"/$discovery/rest":                     true,
	"/discovery/v1/apis/bigquery/v2/rest":  true,
	"/bigquery/v2/$discovery/rest":         true,
	"/discovery/v1/apis/bigquery/v2/rest/": true,
}

// discoveryCache holds the rendered document per request host.
var discoveryCache sync.Map // host -> []byte

// serveDiscovery writes the discovery document with rootUrl, baseUrl and
// mtlsRootUrl pointing at the host the client reached.
func (s *Server) serveDiscovery(w *restRecorder, r *http.Request) error {
	if r.Method != http.MethodGet {
		return errMethod(r)
	}
	if v := r.URL.Query().Get("version"); v != "" && v != "v2" {
		return &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("Not found: the emulator serves BigQuery API v2, not %s", v)}
	}
	host := r.Host
	b, ok := discoveryCache.Load(host)
	if !ok {
		doc, err := discoveryDoc()
		if err != nil {
			return err
		}
		root := "http://" + host + "/"
		out := make(map[string]json.RawMessage, len(doc))
		for k, v := range doc {
			out[k] = v
		}
		for k, v := range map[string]string{"rootUrl": root, "mtlsRootUrl": root, "baseUrl": root + "bigquery/v2/"} {
			out[k], _ = json.Marshal(v)
		}
		rendered, err := json.Marshal(out)
		if err != nil {
			return fmt.Errorf("discovery document: %w", err)
		}
		b, _ = discoveryCache.LoadOrStore(host, rendered)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.([]byte))
	return nil
}
