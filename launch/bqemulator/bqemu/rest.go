package bqemu

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// apiError is an error with BigQuery's REST error JSON shape.
type apiError struct {
	code    int
	reason  string
	message string
}

func (e *apiError) Error() string { return e.message }

func errNotFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, "notFound", "Not found: " + fmt.Sprintf(format, args...)}
}

func errDuplicate(format string, args ...any) *apiError {
	return &apiError{http.StatusConflict, "duplicate", "Already Exists: " + fmt.Sprintf(format, args...)}
}

func errInvalid(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "invalid", fmt.Sprintf(format, args...)}
}

var statusNames = map[int]string{
	http.StatusBadRequest:          "INVALID_ARGUMENT",
	http.StatusNotFound:            "NOT_FOUND",
	http.StatusConflict:            "ALREADY_EXISTS",
	http.StatusPreconditionFailed:  "FAILED_PRECONDITION",
	http.StatusMethodNotAllowed:    "INVALID_ARGUMENT",
	http.StatusInternalServerError: "INTERNAL",
	http.StatusNotImplemented:      "UNIMPLEMENTED",
}

// restRecorder captures the status code and row count of a response for the
// request log.
type restRecorder struct {
	http.ResponseWriter
	status int
	rows   int
}

func (r *restRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// RESTHandler returns the http.Handler serving the BigQuery REST API v2.
// Paths are accepted both with and without the "/bigquery/v2" prefix.
func (s *Server) RESTHandler() http.Handler {
	mux := s.restMux()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &restRecorder{ResponseWriter: w, status: http.StatusOK}
		if discoveryPaths[r.URL.Path] {
			if err := s.serveDiscovery(rec, r); err != nil {
				writeError(rec, asAPIError(err))
			}
		} else {
			mux.ServeHTTP(rec, r)
		}
		s.log.Printf("REST %s %s status=%d rows=%d dur=%s", r.Method, r.URL.Path, rec.status, rec.rows, time.Since(start).Round(time.Microsecond))
	})
}

// restRoute is one method and path of the REST API and its handler.
type restRoute struct {
	pattern string // "METHOD /path/{wildcard}/...", as http.ServeMux reads it
	serve   func(s *Server, w *restRecorder, r *http.Request) error
}

// tableParam is a request's {table} with any partition decorator removed.
func tableParam(r *http.Request) string { return stripDecorator(r.PathValue("table")) }

// restRoutes are the REST API's methods the emulator serves.
var restRoutes = []restRoute{
	{"GET /projects/{project}/datasets", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.listDatasets(w, r, r.PathValue("project"))
	}},
	{"POST /projects/{project}/datasets", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.insertDataset(w, r, r.PathValue("project"))
	}},
	{"GET /projects/{project}/datasets/{dataset}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.getDataset(w, r.PathValue("project"), r.PathValue("dataset"))
	}},
	{"DELETE /projects/{project}/datasets/{dataset}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.deleteDataset(w, r, r.PathValue("project"), r.PathValue("dataset"))
	}},
	{"PATCH /projects/{project}/datasets/{dataset}", patchDataset},
	{"PUT /projects/{project}/datasets/{dataset}", patchDataset},
	{"GET /projects/{project}/datasets/{dataset}/tables", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.listTables(w, r, r.PathValue("project"), r.PathValue("dataset"))
	}},
	{"POST /projects/{project}/datasets/{dataset}/tables", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.insertTable(w, r, r.PathValue("project"), r.PathValue("dataset"))
	}},
	{"GET /projects/{project}/datasets/{dataset}/tables/{table}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.getTable(w, r, r.PathValue("project"), r.PathValue("dataset"), tableParam(r))
	}},
	{"PATCH /projects/{project}/datasets/{dataset}/tables/{table}", patchTable},
	{"PUT /projects/{project}/datasets/{dataset}/tables/{table}", patchTable},
	{"DELETE /projects/{project}/datasets/{dataset}/tables/{table}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.deleteTable(w, r.PathValue("project"), r.PathValue("dataset"), tableParam(r))
	}},
	{"POST /projects/{project}/datasets/{dataset}/tables/{table}/insertAll", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.insertAll(w, r, r.PathValue("project"), r.PathValue("dataset"), tableParam(r))
	}},
	{"GET /projects/{project}/datasets/{dataset}/tables/{table}/data", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.listData(w, r, r.PathValue("project"), r.PathValue("dataset"), tableParam(r))
	}},
	{"POST /projects/{project}/queries", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.jobsQuery(w, r, r.PathValue("project"))
	}},
	{"GET /projects/{project}/queries/{job}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.getQueryResults(w, r, r.PathValue("project"), r.PathValue("job"))
	}},
	{"POST /projects/{project}/jobs", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.insertJob(w, r, r.PathValue("project"))
	}},
	{"GET /projects/{project}/jobs", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.listJobs(w, r, r.PathValue("project"))
	}},
	{"GET /projects/{project}/jobs/{job}", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.getJob(w, r.PathValue("project"), r.PathValue("job"))
	}},
	{"POST /projects/{project}/jobs/{job}/cancel", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.cancelJob(w, r.PathValue("project"), r.PathValue("job"))
	}},
	{"DELETE /projects/{project}/jobs/{job}/delete", func(s *Server, w *restRecorder, r *http.Request) error {
		return s.deleteJob(w, r.PathValue("project"), r.PathValue("job"))
	}},
}

func patchDataset(s *Server, w *restRecorder, r *http.Request) error {
	return s.patchDataset(w, r, r.PathValue("project"), r.PathValue("dataset"))
}

func patchTable(s *Server, w *restRecorder, r *http.Request) error {
	return s.patchTable(w, r, r.PathValue("project"), r.PathValue("dataset"), tableParam(r))
}

// restMux routes restRoutes with the standard library's pattern mux
// (methods and {wildcards}, whose values it unescapes), under both the bare
// path and the "/bigquery/v2" prefix the clients use. A known path with
// another method is BigQuery's 405; any other path its 404, both in the
// REST error shape rather than the mux's plain text.
func (s *Server) restMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, prefix := range []string{"", "/bigquery/v2"} {
		paths := map[string]bool{}
		for _, rt := range restRoutes {
			method, path, _ := strings.Cut(rt.pattern, " ")
			serve := rt.serve
			mux.HandleFunc(method+" "+prefix+path, func(w http.ResponseWriter, r *http.Request) {
				if err := serve(s, w.(*restRecorder), r); err != nil {
					writeError(w, asAPIError(err))
				}
			})
			if !paths[path] {
				paths[path] = true
				mux.HandleFunc(prefix+path, func(w http.ResponseWriter, r *http.Request) { writeError(w, asAPIError(errMethod(r))) })
			}
		}
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{http.StatusNotFound, "notFound", fmt.Sprintf("unsupported path %s %s", r.Method, r.URL.Path)})
	})
	return mux
}

// asAPIError returns err as an *apiError, an internal error if it is none.
func asAPIError(err error) *apiError {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = &apiError{http.StatusInternalServerError, "internalError", err.Error()}
	}
	return ae
}

// stripDecorator removes a partition decorator such as "$20240101".
func stripDecorator(t string) string {
	if i := strings.IndexByte(t, '$'); i >= 0 {
		return t[:i]
	}
	return t
}

func errMethod(r *http.Request) error {
	return &apiError{http.StatusMethodNotAllowed, "invalid", fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path)}
}

func writeError(w http.ResponseWriter, e *apiError) {
	status := statusNames[e.code]
	body := map[string]any{
		"error": map[string]any{
			"code":    e.code,
			"message": e.message,
			"errors": []map[string]any{{
				"message": e.message,
				"domain":  "global",
				"reason":  e.reason,
			}},
			"status": status,
		},
	}
	writeJSON(w, e.code, body)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		b = []byte(`{"error":{"code":500,"message":"encoding response failed","status":"INTERNAL"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// readBody reads a JSON request body of at most limit bytes.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, errInvalid("reading request body: %v", err)
	}
	if int64(len(b)) > limit {
		// Drain the rest so the client sees our response rather than a reset.
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
		return nil, errInvalid("Request payload size exceeds the limit: %d bytes (the request size limit is 10 MB).", MaxRequestBytes)
	}
	return b, nil
}

func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r, 64<<20)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return errInvalid("Invalid JSON payload received. %v", err)
	}
	return nil
}

func msString(t time.Time) int64 { return t.UnixMilli() }

// Datasets.

func (s *Server) insertDataset(w *restRecorder, r *http.Request, proj string) error {
	var ds bq.Dataset
	if err := decodeJSON(r, &ds); err != nil {
		return err
	}
	if ds.DatasetReference == nil || ds.DatasetReference.DatasetId == "" {
		return errInvalid("Required parameter is missing: datasetReference.datasetId")
	}
	if ds.DatasetReference.ProjectId == "" {
		ds.DatasetReference.ProjectId = proj
	}
	if ds.DatasetReference.ProjectId != proj {
		return errInvalid("Dataset project %s does not match request project %s", ds.DatasetReference.ProjectId, proj)
	}
	id := ds.DatasetReference.DatasetId
	if !datasetNameRE.MatchString(id) || len(id) > 1024 {
		return errInvalid("Invalid dataset ID \"%s\". Dataset IDs must be alphanumeric (plus underscores) and must be at most 1024 characters long.", id)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	key := datasetKey(proj, id)
	if s.datasets[key] != nil {
		return errDuplicate("Dataset %s:%s", proj, id)
	}
	ds.Kind = "bigquery#dataset"
	ds.Id = proj + ":" + id
	ds.CreationTime = msString(now)
	ds.LastModifiedTime = msString(now)
	ds.Etag = strconv.FormatInt(now.UnixNano(), 36)
	if ds.Location == "" {
		ds.Location = s.opts.Location
	}
	ds.SelfLink = fmt.Sprintf("/bigquery/v2/projects/%s/datasets/%s", proj, id)
	if ds.Type == "" {
		ds.Type = "DEFAULT"
	}
	s.datasets[key] = &dataset{meta: &ds, tables: make(map[string]*table)}
	writeJSON(w, http.StatusOK, &ds)
	return nil
}

func (s *Server) getDataset(w *restRecorder, proj, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[datasetKey(proj, id)]
	if d == nil {
		return errNotFound("Dataset %s:%s", proj, id)
	}
	writeJSON(w, http.StatusOK, d.meta)
	return nil
}

func (s *Server) patchDataset(w *restRecorder, r *http.Request, proj, id string) error {
	var patch bq.Dataset
	if err := decodeJSON(r, &patch); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[datasetKey(proj, id)]
	if d == nil {
		return errNotFound("Dataset %s:%s", proj, id)
	}
	if patch.Description != "" {
		d.meta.Description = patch.Description
	}
	if patch.FriendlyName != "" {
		d.meta.FriendlyName = patch.FriendlyName
	}
	if patch.DefaultTableExpirationMs != 0 {
		d.meta.DefaultTableExpirationMs = patch.DefaultTableExpirationMs
	}
	if patch.Labels != nil {
		d.meta.Labels = patch.Labels
	}
	d.meta.LastModifiedTime = msString(s.now())
	d.meta.Etag = strconv.FormatInt(s.now().UnixNano(), 36)
	writeJSON(w, http.StatusOK, d.meta)
	return nil
}

func (s *Server) deleteDataset(w *restRecorder, r *http.Request, proj, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := datasetKey(proj, id)
	d := s.datasets[key]
	if d == nil {
		return errNotFound("Dataset %s:%s", proj, id)
	}
	if len(d.tables) > 0 && r.URL.Query().Get("deleteContents") != "true" {
		return &apiError{http.StatusBadRequest, "resourceInUse", fmt.Sprintf("Dataset %s:%s is still in use", proj, id)}
	}
	for _, t := range d.tables {
		t.deleted = true
	}
	delete(s.datasets, key)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) listDatasets(w *restRecorder, r *http.Request, proj string) error {
	s.mu.Lock()
	var ids []string
	metas := map[string]*bq.Dataset{}
	for _, d := range s.datasets {
		if d.meta.DatasetReference.ProjectId == proj {
			id := d.meta.DatasetReference.DatasetId
			ids = append(ids, id)
			metas[id] = d.meta
		}
	}
	s.mu.Unlock()
	sort.Strings(ids)
	start, end, next, err := page(r, len(ids), 50)
	if err != nil {
		return err
	}
	out := &bq.DatasetList{Kind: "bigquery#datasetList", NextPageToken: next}
	for _, id := range ids[start:end] {
		m := metas[id]
		out.Datasets = append(out.Datasets, &bq.DatasetListDatasets{
			DatasetReference: m.DatasetReference,
			Id:               m.Id,
			Kind:             "bigquery#dataset",
			Location:         m.Location,
			Labels:           m.Labels,
			FriendlyName:     m.FriendlyName,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// page resolves pageToken/startIndex and maxResults into a slice window.
func page(r *http.Request, n, defMax int) (start, end int, next string, err error) {
	q := r.URL.Query()
	if tok := q.Get("pageToken"); tok != "" {
		start, err = strconv.Atoi(tok)
		if err != nil || start < 0 {
			return 0, 0, "", errInvalid("Invalid page token: %s", tok)
		}
	} else if si := q.Get("startIndex"); si != "" {
		start, err = strconv.Atoi(si)
		if err != nil || start < 0 {
			return 0, 0, "", errInvalid("Invalid startIndex: %s", si)
		}
	}
	max := defMax
	if m := q.Get("maxResults"); m != "" {
		max, err = strconv.Atoi(m)
		if err != nil || max < 0 {
			return 0, 0, "", errInvalid("Invalid maxResults: %s", m)
		}
		if max == 0 {
			max = defMax
		}
	}
	if start > n {
		start = n
	}
	end = start + max
	if end >= n {
		end = n
	} else {
		next = strconv.Itoa(end)
	}
	return start, end, next, nil
}

// Tables.

func (s *Server) insertTable(w *restRecorder, r *http.Request, proj, ds string) error {
	var t bq.Table
	if err := decodeJSON(r, &t); err != nil {
		return err
	}
	if t.TableReference == nil || t.TableReference.TableId == "" {
		return errInvalid("Required parameter is missing: tableReference.tableId")
	}
	ref := t.TableReference
	if ref.ProjectId == "" {
		ref.ProjectId = proj
	}
	if ref.DatasetId == "" {
		ref.DatasetId = ds
	}
	if ref.ProjectId != proj || ref.DatasetId != ds {
		return errInvalid("Table reference %s:%s.%s does not match request path %s:%s", ref.ProjectId, ref.DatasetId, ref.TableId, proj, ds)
	}
	if !tableNameRE.MatchString(ref.TableId) || len(ref.TableId) > 1024 {
		return errInvalid("Invalid table ID \"%s\".", ref.TableId)
	}
	if t.Schema == nil {
		t.Schema = &bq.TableSchema{}
	}
	if err := normalizeSchema(t.Schema.Fields, "", 0); err != nil {
		return errInvalid("%v", err)
	}
	if err := validatePartitioning(&t); err != nil {
		return errInvalid("%v", err)
	}
	if err := validateConstraints(&t); err != nil {
		return errInvalid("%v", err)
	}
	if err := validateMaxStaleness(t.MaxStaleness); err != nil {
		return errInvalid("%v", err)
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[datasetKey(proj, ds)]
	if d == nil {
		return errNotFound("Dataset %s:%s", proj, ds)
	}
	if d.tables[ref.TableId] != nil {
		return errDuplicate("Table %s", tableName(proj, ds, ref.TableId))
	}
	t.Kind = "bigquery#table"
	t.Id = tableName(proj, ds, ref.TableId)
	t.SelfLink = fmt.Sprintf("/bigquery/v2/projects/%s/datasets/%s/tables/%s", proj, ds, ref.TableId)
	t.CreationTime = msString(now)
	t.LastModifiedTime = uint64(msString(now))
	t.Location = d.meta.Location
	if t.Type == "" {
		t.Type = "TABLE"
		if t.View != nil {
			t.Type = "VIEW"
		} else if t.MaterializedView != nil {
			t.Type = "MATERIALIZED_VIEW"
		}
	}
	if t.ExpirationTime == 0 && d.meta.DefaultTableExpirationMs > 0 {
		t.ExpirationTime = msString(now) + d.meta.DefaultTableExpirationMs
	}
	tbl := &table{
		project: proj, dataset: ds, id: ref.TableId,
		meta:       &t,
		partitions: make(map[string]*partition),
		insertIDs:  make(map[string]struct{}),
		etagSeq:    1,
	}
	tbl.reindexLocked()
	d.tables[ref.TableId] = tbl
	writeJSON(w, http.StatusOK, s.tableViewLocked(tbl))
	return nil
}

// tableViewLocked returns a copy of the table metadata with computed fields.
func (s *Server) tableViewLocked(t *table) *bq.Table {
	m := *t.meta
	m.NumRows = uint64(t.numRows)
	m.NumBytes = t.numBytes
	m.Etag = t.etag()
	m.ForceSendFields = []string{"NumRows", "NumBytes"}
	if t.numRows > 0 {
		m.StreamingBuffer = &bq.Streamingbuffer{EstimatedRows: uint64(t.numRows), EstimatedBytes: uint64(t.numBytes)}
	}
	return &m
}

func (s *Server) getTable(w *restRecorder, r *http.Request, proj, ds, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableLocked(proj, ds, id)
	if err != nil {
		return err
	}
	view := s.tableViewLocked(t)
	if sel := r.URL.Query().Get("selectedFields"); sel != "" && view.Schema != nil {
		fields, _, err := selectFields(t.fields(), sel, tableName(proj, ds, id))
		if err != nil {
			return err
		}
		view.Schema = &bq.TableSchema{Fields: fields}
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

func (s *Server) tableLocked(proj, ds, id string) (*table, error) {
	d := s.datasets[datasetKey(proj, ds)]
	if d == nil {
		return nil, errNotFound("Dataset %s:%s", proj, ds)
	}
	t := d.tables[id]
	if t == nil {
		return nil, errNotFound("Table %s", tableName(proj, ds, id))
	}
	return t, nil
}

func (s *Server) deleteTable(w *restRecorder, proj, ds, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableLocked(proj, ds, id)
	if err != nil {
		return err
	}
	t.deleted = true
	delete(s.datasets[datasetKey(proj, ds)].tables, id)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) patchTable(w *restRecorder, r *http.Request, proj, ds, id string) error {
	body, err := readBody(r, 64<<20)
	if err != nil {
		return err
	}
	var present map[string]json.RawMessage
	var patch bq.Table
	if err := json.Unmarshal(body, &present); err != nil {
		return errInvalid("Invalid JSON payload received. %v", err)
	}
	if err := json.Unmarshal(body, &patch); err != nil {
		return errInvalid("Invalid JSON payload received. %v", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableLocked(proj, ds, id)
	if err != nil {
		return err
	}
	if m := r.Header.Get("If-Match"); m != "" && m != "*" && m != t.etag() {
		return &apiError{http.StatusPreconditionFailed, "conditionNotMet", "Precondition check failed."}
	}
	next := *t.meta
	if _, ok := present["schema"]; ok && patch.Schema != nil {
		if err := normalizeSchema(patch.Schema.Fields, "", 0); err != nil {
			return errInvalid("%v", err)
		}
		if err := checkSchemaUpdate(t.fields(), patch.Schema.Fields, ""); err != nil {
			return errInvalid("%v", err)
		}
		next.Schema = patch.Schema
	}
	if _, ok := present["description"]; ok {
		next.Description = patch.Description
	}
	if _, ok := present["friendlyName"]; ok {
		next.FriendlyName = patch.FriendlyName
	}
	if _, ok := present["labels"]; ok {
		next.Labels = patch.Labels
	}
	if _, ok := present["expirationTime"]; ok {
		next.ExpirationTime = patch.ExpirationTime
	}
	if _, ok := present["requirePartitionFilter"]; ok {
		next.RequirePartitionFilter = patch.RequirePartitionFilter
	}
	if _, ok := present["clustering"]; ok {
		next.Clustering = patch.Clustering
	}
	if _, ok := present["timePartitioning"]; ok && patch.TimePartitioning != nil {
		old := t.meta.TimePartitioning
		np := patch.TimePartitioning
		if old == nil {
			return errInvalid("Cannot change partitioning spec for a non-partitioned table.")
		}
		if (np.Type != "" && np.Type != old.Type) || (np.Field != "" && !strings.EqualFold(np.Field, old.Field)) {
			return errInvalid("Cannot change partitioning spec for table %s.", tableName(proj, ds, id))
		}
		cp := *old
		cp.ExpirationMs = np.ExpirationMs
		next.TimePartitioning = &cp
	}
	if _, ok := present["tableConstraints"]; ok {
		next.TableConstraints = patch.TableConstraints
	}
	if _, ok := present["maxStaleness"]; ok {
		if err := validateMaxStaleness(patch.MaxStaleness); err != nil {
			return errInvalid("%v", err)
		}
		next.MaxStaleness = patch.MaxStaleness
	}
	if err := validatePartitioning(&next); err != nil {
		return errInvalid("%v", err)
	}
	if err := validateConstraints(&next); err != nil {
		return errInvalid("%v", err)
	}
	if next.Schema != t.meta.Schema {
		t.schemaVersion++
	}
	next.LastModifiedTime = uint64(msString(s.now()))
	pkChanged := fmt.Sprint(primaryKeyNames(t.meta)) != fmt.Sprint(primaryKeyNames(&next))
	t.meta = &next
	t.etagSeq++
	if pkChanged {
		t.schemaVersion++
		t.reindexLocked()
	}
	writeJSON(w, http.StatusOK, s.tableViewLocked(t))
	return nil
}

func (s *Server) listTables(w *restRecorder, r *http.Request, proj, ds string) error {
	s.mu.Lock()
	d := s.datasets[datasetKey(proj, ds)]
	if d == nil {
		s.mu.Unlock()
		return errNotFound("Dataset %s:%s", proj, ds)
	}
	ids := make([]string, 0, len(d.tables))
	for id := range d.tables {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	start, end, next, err := page(r, len(ids), 50)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	out := &bq.TableList{Kind: "bigquery#tableList", NextPageToken: next, TotalItems: int64(len(ids)), ForceSendFields: []string{"TotalItems"}}
	for _, id := range ids[start:end] {
		m := d.tables[id].meta
		out.Tables = append(out.Tables, &bq.TableListTables{
			Id:               m.Id,
			Kind:             "bigquery#table",
			TableReference:   m.TableReference,
			Type:             m.Type,
			TimePartitioning: m.TimePartitioning,
			Clustering:       m.Clustering,
			Labels:           m.Labels,
			FriendlyName:     m.FriendlyName,
			CreationTime:     m.CreationTime,
			ExpirationTime:   m.ExpirationTime,
		})
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Table data.

// insertAllRequest mirrors bq.TableDataInsertAllRequest but keeps numbers
// as json.Number.
type insertAllRequest struct {
	IgnoreUnknownValues bool   `json:"ignoreUnknownValues"`
	SkipInvalidRows     bool   `json:"skipInvalidRows"`
	TemplateSuffix      string `json:"templateSuffix"`
	Rows                []struct {
		InsertID string         `json:"insertId"`
		JSON     map[string]any `json:"json"`
	} `json:"rows"`
}

func (s *Server) insertAll(w *restRecorder, r *http.Request, proj, ds, id string) error {
	body, err := readBody(r, MaxRequestBytes)
	if err != nil {
		return err
	}
	var req insertAllRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&req); err != nil {
		return errInvalid("Invalid JSON payload received. %v", err)
	}
	if req.TemplateSuffix != "" {
		return errInvalid("templateSuffix is not supported by the emulator")
	}
	if len(req.Rows) == 0 {
		return errInvalid("No rows present in the request.")
	}
	if len(req.Rows) > 50000 {
		return errInvalid("too many rows present in the request, limit: 50000 row count: %d.", len(req.Rows))
	}
	now := s.now()

	s.mu.Lock()
	t, err := s.tableLocked(proj, ds, id)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	meta := t.meta
	fields := t.fields()
	s.mu.Unlock()

	// Validate outside the lock; the schema only ever grows, so a row valid
	// against this snapshot stays valid.
	vals := make([][]any, len(req.Rows))
	parts := make([]string, len(req.Rows))
	rowErrs := make([]*fieldError, len(req.Rows))
	anyErr := false
	for i, row := range req.Rows {
		if row.JSON == nil {
			rowErrs[i] = &fieldError{message: "Missing row data (json)."}
			anyErr = true
			continue
		}
		v, ferr := convertJSONRow(fields, row.JSON, req.IgnoreUnknownValues, "")
		if ferr == nil {
			p, perr := partitionOf(meta, v, now)
			if perr != nil {
				f := meta.TimePartitioning.Field
				ferr = &fieldError{location: f, message: perr.Error()}
			}
			parts[i] = p
		}
		if ferr != nil {
			rowErrs[i] = ferr
			anyErr = true
			continue
		}
		vals[i] = v
	}

	resp := &bq.TableDataInsertAllResponse{Kind: "bigquery#tableDataInsertAllResponse"}
	if anyErr {
		for i, fe := range rowErrs {
			switch {
			case fe != nil:
				resp.InsertErrors = append(resp.InsertErrors, &bq.TableDataInsertAllResponseInsertErrors{
					Index:  int64(i),
					Errors: []*bq.ErrorProto{{Reason: "invalid", Location: fe.location, Message: fe.message}},
				})
			case !req.SkipInvalidRows:
				resp.InsertErrors = append(resp.InsertErrors, &bq.TableDataInsertAllResponseInsertErrors{
					Index:  int64(i),
					Errors: []*bq.ErrorProto{{Reason: "stopped", Message: ""}},
				})
			}
		}
	}
	inserted := 0
	if !anyErr || req.SkipInvalidRows {
		s.mu.Lock()
		if t.deleted {
			s.mu.Unlock()
			return errNotFound("Table %s", tableName(proj, ds, id))
		}
		var good [][]any
		var goodParts []string
		for i, v := range vals {
			if v == nil {
				continue
			}
			if iid := req.Rows[i].InsertID; iid != "" {
				if _, dup := t.insertIDs[iid]; dup {
					continue
				}
				t.insertIDs[iid] = struct{}{}
			}
			good = append(good, v)
			goodParts = append(goodParts, parts[i])
		}
		t.addRowsLocked(good, goodParts)
		s.mu.Unlock()
		inserted = len(good)
	}
	w.rows = inserted
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) listData(w *restRecorder, r *http.Request, proj, ds, id string) error {
	int64TS := r.URL.Query().Get("formatOptions.useInt64Timestamp") == "true"
	s.mu.Lock()
	t, err := s.tableLocked(proj, ds, id)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	fields := t.fields()
	rows := t.allRowsLocked()
	s.mu.Unlock()
	var project func([]any) []any
	if sel := r.URL.Query().Get("selectedFields"); sel != "" {
		fields, project, err = selectFields(fields, sel, tableName(proj, ds, id))
		if err != nil {
			return err
		}
	}

	start, end, next, err := page(r, len(rows), 100000)
	if err != nil {
		return err
	}
	out := &bq.TableDataList{
		Kind:            "bigquery#tableDataList",
		TotalRows:       int64(len(rows)),
		PageToken:       next,
		Rows:            make([]*bq.TableRow, 0, end-start),
		ForceSendFields: []string{"TotalRows"},
	}
	for _, row := range rows[start:end] {
		vals := row.values
		if project != nil {
			vals = project(vals)
		}
		out.Rows = append(out.Rows, formatRow(fields, vals, int64TS))
	}
	w.rows = len(out.Rows)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// selectFields applies a selectedFields parameter ("a,b,rec.c") to a
// schema: the selected columns, in schema order, RECORDs narrowed to their
// selected subfields, and the function that narrows a row the same way.
// An unknown field is an error naming it.
func selectFields(fields []*bq.TableFieldSchema, sel, table string) ([]*bq.TableFieldSchema, func([]any) []any, error) {
	tree := map[string]any{}
	for _, p := range strings.Split(sel, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		node := tree
		parts := strings.Split(strings.ToLower(p), ".")
		for i, part := range parts {
			if i == len(parts)-1 {
				node[part] = true
				break
			}
			child, ok := node[part].(map[string]any)
			if !ok {
				if node[part] == true {
					break // the whole record is selected already
				}
				child = map[string]any{}
				node[part] = child
			}
			node = child
		}
	}
	return selectTree(fields, tree, "", table)
}

func selectTree(fields []*bq.TableFieldSchema, tree map[string]any, path, table string) ([]*bq.TableFieldSchema, func([]any) []any, error) {
	type pick struct {
		idx int
		sub func([]any) []any
	}
	var (
		out   []*bq.TableFieldSchema
		picks []pick
	)
	found := map[string]bool{}
	for i, f := range fields {
		sel, ok := tree[strings.ToLower(f.Name)]
		if !ok {
			continue
		}
		found[strings.ToLower(f.Name)] = true
		if sub, nested := sel.(map[string]any); nested {
			if f.Type != "RECORD" {
				return nil, nil, errInvalid("Field %s in selectedFields is not a RECORD of table %s", joinPath(path, f.Name), table)
			}
			subFields, narrow, err := selectTree(f.Fields, sub, joinPath(path, f.Name), table)
			if err != nil {
				return nil, nil, err
			}
			cp := *f
			cp.Fields = subFields
			out = append(out, &cp)
			picks = append(picks, pick{i, narrow})
			continue
		}
		out = append(out, f)
		picks = append(picks, pick{idx: i})
	}
	for name := range tree {
		if !found[name] {
			return nil, nil, errInvalid("Field %s in selectedFields is not a column of table %s", joinPath(path, name), table)
		}
	}
	narrowRecord := func(v any, sub func([]any) []any) any {
		switch x := v.(type) {
		case []any:
			return sub(x)
		}
		return v
	}
	project := func(row []any) []any {
		vals := make([]any, len(picks))
		for j, p := range picks {
			if p.idx >= len(row) {
				continue
			}
			v := row[p.idx]
			if p.sub != nil && v != nil {
				if fields[p.idx].Mode == "REPEATED" {
					arr, _ := v.([]any)
					n := make([]any, len(arr))
					for k, e := range arr {
						n[k] = narrowRecord(e, p.sub)
					}
					v = n
				} else {
					v = narrowRecord(v, p.sub)
				}
			}
			vals[j] = v
		}
		return vals
	}
	return out, project, nil
}
