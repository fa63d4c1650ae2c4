package bqemu

// Query jobs: jobs.insert (query jobs), jobs.query, jobs.get,
// jobs.getQueryResults, jobs.list, jobs.cancel and jobs.delete.
//
// The SQL itself runs in a QueryEngine that a separate package registers
// (sqlengine, which embeds DuckDB), so that programs using the emulator
// only for writes do not link a SQL engine. The engine reads the
// emulator's tables through a Catalog: the store stays the one copy of the
// data, and a query reads a snapshot of its rows' references, taken under
// the lock, without copying their values.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bq "google.golang.org/api/bigquery/v2"
)

// QueryEngine runs the SQL of query jobs. It must be safe for concurrent
// use.
type QueryEngine interface {
	// Run executes q and returns its result, or a *QueryError.
	Run(ctx context.Context, q Query) (*QueryResult, error)
	// Close releases the engine.
	Close() error
}

// Query is one query job's SQL and settings.
type Query struct {
	SQL string
	// Project is the job's project: the project of table names that name
	// none. DefaultDataset, when set, is the dataset of bare table names.
	Project        string
	DefaultDataset string
	// LegacySQL is the job's useLegacySql.
	LegacySQL bool
	// Now is the query's CURRENT_TIMESTAMP().
	Now time.Time
}

// QueryResult is a query's output: a schema and rows whose values are in
// the form StoredValue returns.
type QueryResult struct {
	Schema []*bq.TableFieldSchema
	Rows   [][]any
	// StatementType is BigQuery's statement type, e.g. SELECT.
	StatementType string
	// BytesProcessed estimates the bytes the query read.
	BytesProcessed int64
}

// QueryError is a query failure with BigQuery's error reason:
// invalidQuery (the SQL is wrong or outside what the engine supports),
// notFound (a table or dataset), or invalid.
type QueryError struct {
	Reason  string
	Message string
}

func (e *QueryError) Error() string { return e.Message }

// Catalog is how a QueryEngine reads the emulator's tables.
type Catalog interface {
	// Table returns a snapshot of a table, or a *QueryError with reason
	// notFound naming the missing table or dataset.
	Table(project, dataset, table string) (*TableSnapshot, error)
}

// TableSnapshot is a table's schema and rows at one moment. Rows are the
// store's own value slices (see NativeValue for their form): read them,
// never modify them.
type TableSnapshot struct {
	Schema []*bq.TableFieldSchema
	Rows   [][]any
	Bytes  int64
}

// engineFactory builds the registered QueryEngine.
var (
	engineMu      sync.Mutex
	engineFactory func(Catalog) (QueryEngine, error)
)

// RegisterQueryEngine installs the constructor of the engine that runs
// every Server's queries. sqlengine calls it from its init function, so
// importing sqlengine turns queries on.
func RegisterQueryEngine(newEngine func(Catalog) (QueryEngine, error)) {
	engineMu.Lock()
	defer engineMu.Unlock()
	engineFactory = newEngine
}

// queryEngine returns the server's engine, building it on first use.
func (s *Server) queryEngine() (QueryEngine, error) {
	s.engineOnce.Do(func() {
		engineMu.Lock()
		f := engineFactory
		engineMu.Unlock()
		if f == nil {
			s.engineErr = &apiError{http.StatusNotImplemented, "notImplemented",
				"queries are not available: this build of the emulator has no SQL engine (import github.com/sensorpipe/sensorpipe/launch/bqemulator/bqemu/sqlengine)"}
			return
		}
		eng, err := f(serverCatalog{s})
		s.mu.Lock()
		s.engine, s.engineErr = eng, err
		s.mu.Unlock()
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.engine, s.engineErr
}

// serverCatalog is the Catalog over a Server's store.
type serverCatalog struct{ s *Server }

// Table implements Catalog.
func (c serverCatalog) Table(project, dataset, table string) (*TableSnapshot, error) {
	s := c.s
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.datasets[datasetKey(project, dataset)]
	if d == nil {
		return nil, &QueryError{"notFound", fmt.Sprintf("Not found: Dataset %s:%s was not found in location %s", project, dataset, s.opts.Location)}
	}
	t := d.tables[table]
	if t == nil {
		return nil, &QueryError{"notFound", fmt.Sprintf("Not found: Table %s was not found in location %s", tableName(project, dataset, table), d.meta.Location)}
	}
	rows := t.allRowsLocked()
	snap := &TableSnapshot{Schema: t.fields(), Rows: make([][]any, len(rows)), Bytes: t.numBytes}
	for i, r := range rows {
		snap.Rows[i] = r.values
	}
	return snap, nil
}

// job is one query job and its outcome.
type job struct {
	meta   *bq.Job
	result *QueryResult // nil once dropped, or for a failed job
	err    *apiError
	seq    int64
}

// keptResults is how many query results the emulator keeps for
// jobs.getQueryResults; older ones are dropped (BigQuery keeps them for a
// day in anonymous tables).
const keptResults = 64

// runQuery runs a query job's SQL. A failed query is returned as an
// *apiError with BigQuery's reason.
func (s *Server) runQuery(ctx context.Context, q Query) (*QueryResult, *apiError) {
	if isDDL(q.SQL) {
		return s.runDDL(q.Project, q.SQL)
	}
	eng, err := s.queryEngine()
	if err != nil {
		return nil, asAPIError(err)
	}
	res, err := eng.Run(ctx, q)
	if err == nil {
		return res, nil
	}
	var qe *QueryError
	if errors.As(err, &qe) {
		code := http.StatusBadRequest
		if qe.Reason == "notFound" {
			code = http.StatusNotFound
		}
		return nil, &apiError{code, qe.Reason, qe.Message}
	}
	return nil, asAPIError(err)
}

// legacy is a query's useLegacySql: BigQuery's default is true.
func legacy(v *bool) bool { return v == nil || *v }

// newJobLocked records a finished query job.
func (s *Server) newJobLocked(proj, jobID string, cfg *bq.JobConfigurationQuery, labels map[string]string, dryRun bool, start time.Time, res *QueryResult, aerr *apiError) *job {
	if jobID == "" {
		jobID = "job_" + s.newIDLocked()
	}
	end := s.now()
	j := &bq.Job{
		Kind:         "bigquery#job",
		Id:           proj + ":" + s.opts.Location + "." + jobID,
		JobReference: &bq.JobReference{ProjectId: proj, JobId: jobID, Location: s.opts.Location},
		SelfLink:     fmt.Sprintf("/bigquery/v2/projects/%s/jobs/%s?location=%s", proj, jobID, s.opts.Location),
		Configuration: &bq.JobConfiguration{
			JobType: "QUERY",
			Query:   cfg,
			DryRun:  dryRun,
			Labels:  labels,
		},
		Status:    &bq.JobStatus{State: "DONE"},
		UserEmail: "emulator@localhost",
		Statistics: &bq.JobStatistics{
			CreationTime: msString(start),
			StartTime:    msString(start),
			EndTime:      msString(end),
			Query:        &bq.JobStatistics2{CacheHit: false, ForceSendFields: []string{"CacheHit"}},
		},
	}
	if aerr != nil {
		ep := &bq.ErrorProto{Reason: aerr.reason, Message: aerr.message, Location: "query"}
		j.Status.ErrorResult = ep
		j.Status.Errors = []*bq.ErrorProto{ep}
	} else if res != nil {
		j.Statistics.TotalBytesProcessed = res.BytesProcessed
		j.Statistics.Query.TotalBytesProcessed = res.BytesProcessed
		j.Statistics.Query.TotalBytesBilled = 0
		j.Statistics.Query.StatementType = res.StatementType
		j.Statistics.Query.Schema = &bq.TableSchema{Fields: res.Schema}
		j.Statistics.Query.ForceSendFields = append(j.Statistics.Query.ForceSendFields, "TotalBytesProcessed", "TotalBytesBilled")
		if !dryRun && cfg.DestinationTable == nil && res.StatementType == "SELECT" {
			cfg.DestinationTable = &bq.TableReference{ProjectId: proj, DatasetId: "_emulator_anonymous", TableId: "anon_" + jobID}
		}
	}
	s.jobSeq++
	jb := &job{meta: j, result: res, err: aerr, seq: s.jobSeq}
	if dryRun {
		jb.result = nil
	}
	if s.jobs == nil {
		s.jobs = make(map[string]map[string]*job)
	}
	if s.jobs[proj] == nil {
		s.jobs[proj] = make(map[string]*job)
	}
	s.jobs[proj][jobID] = jb
	if jb.result != nil {
		s.withResults = append(s.withResults, jb)
		if len(s.withResults) > keptResults {
			s.withResults[0].result = nil
			s.withResults = s.withResults[1:]
		}
	}
	return jb
}

// insertJob implements jobs.insert for query jobs. The query runs before
// the call returns, so the job is DONE (or failed) at once.
func (s *Server) insertJob(w *restRecorder, r *http.Request, proj string) error {
	var in bq.Job
	if err := decodeJSON(r, &in); err != nil {
		return err
	}
	cfg := in.Configuration
	if cfg == nil || cfg.Query == nil {
		return errInvalid("The emulator runs query jobs only: configuration.query is required (load, extract and copy jobs are not supported)")
	}
	jobID := ""
	if in.JobReference != nil {
		jobID = in.JobReference.JobId
		if in.JobReference.ProjectId != "" && in.JobReference.ProjectId != proj {
			return errInvalid("Job project %s does not match request project %s", in.JobReference.ProjectId, proj)
		}
	}
	if jobID != "" {
		s.mu.Lock()
		dup := s.jobs[proj][jobID] != nil
		s.mu.Unlock()
		if dup {
			return errDuplicate("Job %s:%s.%s", proj, s.opts.Location, jobID)
		}
	}
	start := s.now()
	q := Query{SQL: cfg.Query.Query, Project: proj, LegacySQL: legacy(cfg.Query.UseLegacySql), Now: start}
	if dd := cfg.Query.DefaultDataset; dd != nil {
		q.DefaultDataset = dd.DatasetId
	}
	res, aerr := s.runQuery(r.Context(), q)
	s.mu.Lock()
	jb := s.newJobLocked(proj, jobID, cfg.Query, cfg.Labels, cfg.DryRun, start, res, aerr)
	out := jb.meta
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
	return nil
}

// jobsQuery implements jobs.query: it runs the query and answers with the
// first page of its rows; a failed query is an error response.
func (s *Server) jobsQuery(w *restRecorder, r *http.Request, proj string) error {
	var req bq.QueryRequest
	if err := decodeJSON(r, &req); err != nil {
		return err
	}
	if req.Query == "" {
		return errInvalid("Required parameter is missing: query")
	}
	start := s.now()
	q := Query{SQL: req.Query, Project: proj, LegacySQL: legacy(req.UseLegacySql), Now: start}
	if dd := req.DefaultDataset; dd != nil {
		q.DefaultDataset = dd.DatasetId
	}
	cfg := &bq.JobConfigurationQuery{Query: req.Query, UseLegacySql: req.UseLegacySql, DefaultDataset: req.DefaultDataset}
	res, aerr := s.runQuery(r.Context(), q)
	s.mu.Lock()
	jb := s.newJobLocked(proj, "", cfg, req.Labels, req.DryRun, start, res, aerr)
	s.mu.Unlock()
	if aerr != nil {
		return aerr
	}
	out := &bq.QueryResponse{
		Kind:                "bigquery#queryResponse",
		JobReference:        jb.meta.JobReference,
		JobComplete:         true,
		TotalBytesProcessed: res.BytesProcessed,
		ForceSendFields:     []string{"JobComplete", "CacheHit", "TotalBytesProcessed"},
	}
	if req.DryRun {
		out.Schema = &bq.TableSchema{Fields: res.Schema}
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	int64TS := req.FormatOptions != nil && req.FormatOptions.UseInt64Timestamp
	max := int(req.MaxResults)
	if req.MaxResults == 0 {
		max = -1
	}
	rows, next := resultPage(res, 0, max)
	out.Schema = &bq.TableSchema{Fields: res.Schema}
	out.TotalRows = uint64(len(res.Rows))
	out.ForceSendFields = append(out.ForceSendFields, "TotalRows")
	out.PageToken = next
	out.Rows = formatRows(res.Schema, rows, int64TS)
	w.rows = len(out.Rows)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// defaultResultPage caps a page of query results when the caller sets no
// maxResults.
const defaultResultPage = 100000

// resultPage returns rows [start, start+max) of res and the next page's
// token; max < 0 is the default page.
func resultPage(res *QueryResult, start, max int) ([][]any, string) {
	if max < 0 {
		max = defaultResultPage
	}
	n := len(res.Rows)
	if start > n {
		start = n
	}
	end := start + max
	if end >= n {
		return res.Rows[start:], ""
	}
	return res.Rows[start:end], strconv.Itoa(end)
}

func formatRows(schema []*bq.TableFieldSchema, rows [][]any, int64TS bool) []*bq.TableRow {
	out := make([]*bq.TableRow, len(rows))
	for i, r := range rows {
		out[i] = formatRow(schema, r, int64TS)
	}
	return out
}

// jobLocked finds a job or returns BigQuery's not-found error.
func (s *Server) jobLocked(proj, jobID string) (*job, error) {
	jb := s.jobs[proj][jobID]
	if jb == nil {
		return nil, errNotFound("Job %s:%s.%s", proj, s.opts.Location, jobID)
	}
	return jb, nil
}

// getQueryResults implements jobs.getQueryResults.
func (s *Server) getQueryResults(w *restRecorder, r *http.Request, proj, jobID string) error {
	s.mu.Lock()
	jb, err := s.jobLocked(proj, jobID)
	var res *QueryResult
	if err == nil {
		res = jb.result
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if jb.err != nil {
		return jb.err
	}
	out := &bq.GetQueryResultsResponse{
		Kind:            "bigquery#getQueryResultsResponse",
		JobReference:    jb.meta.JobReference,
		JobComplete:     true,
		Etag:            strconv.FormatInt(jb.seq, 36),
		ForceSendFields: []string{"JobComplete", "CacheHit", "TotalRows"},
	}
	if jb.meta.Configuration.DryRun {
		writeJSON(w, http.StatusOK, out)
		return nil
	}
	if res == nil {
		return errNotFound("the results of job %s:%s.%s are no longer kept (the emulator keeps the last %d)", proj, s.opts.Location, jobID, keptResults)
	}
	start, max := 0, -1
	qv := r.URL.Query()
	if tok := qv.Get("pageToken"); tok != "" {
		if start, err = strconv.Atoi(tok); err != nil || start < 0 {
			return errInvalid("Invalid page token: %s", tok)
		}
	} else if si := qv.Get("startIndex"); si != "" {
		if start, err = strconv.Atoi(si); err != nil || start < 0 {
			return errInvalid("Invalid startIndex: %s", si)
		}
	}
	if m := qv.Get("maxResults"); m != "" {
		if max, err = strconv.Atoi(m); err != nil || max < 0 {
			return errInvalid("Invalid maxResults: %s", m)
		}
	}
	rows, next := resultPage(res, start, max)
	out.Schema = &bq.TableSchema{Fields: res.Schema}
	out.TotalRows = uint64(len(res.Rows))
	out.TotalBytesProcessed = res.BytesProcessed
	out.PageToken = next
	out.Rows = formatRows(res.Schema, rows, qv.Get("formatOptions.useInt64Timestamp") == "true")
	w.rows = len(out.Rows)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// getJob implements jobs.get.
func (s *Server) getJob(w *restRecorder, proj, jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	jb, err := s.jobLocked(proj, jobID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, jb.meta)
	return nil
}

// cancelJob implements jobs.cancel: every emulator job is already done.
func (s *Server) cancelJob(w *restRecorder, proj, jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	jb, err := s.jobLocked(proj, jobID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, &bq.JobCancelResponse{Kind: "bigquery#jobCancelResponse", Job: jb.meta})
	return nil
}

// deleteJob implements jobs.delete.
func (s *Server) deleteJob(w *restRecorder, proj, jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.jobLocked(proj, jobID); err != nil {
		return err
	}
	delete(s.jobs[proj], jobID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// listJobs implements jobs.list, newest first.
func (s *Server) listJobs(w *restRecorder, r *http.Request, proj string) error {
	states := map[string]bool{}
	for _, v := range r.URL.Query()["stateFilter"] {
		for _, st := range strings.Split(v, ",") {
			states[strings.ToUpper(st)] = true
		}
	}
	s.mu.Lock()
	var jobs []*job
	for _, jb := range s.jobs[proj] {
		if len(states) == 0 || states[jb.meta.Status.State] {
			jobs = append(jobs, jb)
		}
	}
	s.mu.Unlock()
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].seq > jobs[j].seq })
	start, end, next, err := page(r, len(jobs), 50)
	if err != nil {
		return err
	}
	out := &bq.JobList{Kind: "bigquery#jobList", NextPageToken: next, Jobs: []*bq.JobListJobs{}}
	for _, jb := range jobs[start:end] {
		m := jb.meta
		out.Jobs = append(out.Jobs, &bq.JobListJobs{
			Id:            m.Id,
			Kind:          m.Kind,
			JobReference:  m.JobReference,
			State:         m.Status.State,
			Status:        m.Status,
			ErrorResult:   m.Status.ErrorResult,
			Statistics:    m.Statistics,
			Configuration: m.Configuration,
			UserEmail:     m.UserEmail,
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
