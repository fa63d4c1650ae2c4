package bqemu

import (
	"context"
	"fmt"
	"strings"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	"github.com/apache/arrow-go/v18/arrow"
	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Storage Read API (google.cloud.bigquery.storage.v1.BigQueryRead).
//
// A read session is a snapshot of the table's rows at CreateReadSession,
// as BigQuery reads one: the rows the table holds then (with change data
// capture applied, one row per key), filtered by the row restriction and
// narrowed to the selected fields, dealt out to the streams in contiguous
// runs. ReadRows serves a stream from an offset, in Arrow record batches.

const (
	// readSessionTTL is how long a read session lives, as in BigQuery.
	readSessionTTL = 6 * time.Hour
	// defaultReadStreams is the number of streams a session gets when the
	// request asks for none in particular.
	defaultReadStreams = 4
	// maxReadStreams caps a session's streams.
	maxReadStreams = 1000
	// readBatchRows bounds the rows of one ReadRowsResponse.
	readBatchRows = 1024
)

// readSession is one CreateReadSession's snapshot.
type readSession struct {
	name    string
	expire  time.Time
	fields  []*bq.TableFieldSchema
	schema  *arrow.Schema
	streams [][][]any // per stream, its rows narrowed to fields
}

// readServer implements storagepb.BigQueryReadServer.
type readServer struct {
	storagepb.UnimplementedBigQueryReadServer
	s *Server
}

// CreateReadSession snapshots a table for reading.
func (r *readServer) CreateReadSession(ctx context.Context, req *storagepb.CreateReadSessionRequest) (*storagepb.ReadSession, error) {
	s := r.s
	rs := req.GetReadSession()
	parent := req.GetParent()
	if !strings.HasPrefix(parent, "projects/") || strings.Count(parent, "/") != 1 || parent == "projects/" {
		return nil, status.Errorf(codes.InvalidArgument, "parent %q: give projects/PROJECT", parent)
	}
	if rs == nil {
		return nil, status.Error(codes.InvalidArgument, "read_session is required")
	}
	switch rs.GetDataFormat() {
	case storagepb.DataFormat_ARROW:
	case storagepb.DataFormat_DATA_FORMAT_UNSPECIFIED:
		return nil, status.Error(codes.InvalidArgument, "read_session.data_format is required: the emulator serves ARROW")
	default:
		return nil, status.Errorf(codes.InvalidArgument, "read_session.data_format %s is not supported by the emulator: use ARROW", rs.GetDataFormat())
	}
	if rs.GetTableModifiers().GetSnapshotTime() != nil {
		return nil, status.Error(codes.InvalidArgument, "read_session.table_modifiers.snapshot_time is not supported by the emulator (it keeps no history)")
	}
	opts := rs.GetReadOptions()
	if opts.GetArrowSerializationOptions().GetBufferCompression() > storagepb.ArrowSerializationOptions_COMPRESSION_UNSPECIFIED {
		return nil, status.Error(codes.InvalidArgument, "read_session.read_options.arrow_serialization_options.buffer_compression is not supported by the emulator")
	}
	if opts.GetSamplePercentage() != 0 {
		return nil, status.Error(codes.InvalidArgument, "read_session.read_options.sample_percentage is not supported by the emulator")
	}
	tableRef := rs.GetTable()
	proj, ds, id, ok := parseTableParent(tableRef)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "read_session.table %q: give projects/P/datasets/D/tables/T", tableRef)
	}
	s.mu.Lock()
	t, err := s.tableLocked(proj, ds, stripDecorator(id))
	if err != nil {
		s.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "%v", err)
	}
	fields := t.fields()
	rows := t.allRowsLocked()
	s.mu.Unlock()

	filter, err := compileRestriction(fields, opts.GetRowRestriction())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "%v", err)
	}
	var project func([]any) []any
	outFields := fields
	if sel := opts.GetSelectedFields(); len(sel) > 0 {
		outFields, project, err = selectFields(fields, strings.Join(sel, ","), tableName(proj, ds, id))
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "%v", err)
		}
	}
	kept := make([][]any, 0, len(rows))
	for _, row := range rows {
		if !filter(row.values) {
			continue
		}
		vals := row.values
		if project != nil {
			vals = project(vals)
		}
		kept = append(kept, vals)
	}

	n := int(req.GetPreferredMinStreamCount())
	if n <= 0 {
		n = defaultReadStreams
	}
	if max := int(req.GetMaxStreamCount()); max > 0 && n > max {
		n = max
	}
	n = min(n, maxReadStreams, max(len(kept), 1))
	schema := arrowSchema(outFields)
	ser, err := serializedSchema(schema)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "%v", err)
	}

	now := s.now()
	s.mu.Lock()
	if s.readSessions == nil {
		s.readSessions = map[string]*readSession{}
	}
	for name, old := range s.readSessions {
		if now.After(old.expire) {
			delete(s.readSessions, name)
		}
	}
	loc := s.opts.Location
	sess := &readSession{
		name:   fmt.Sprintf("projects/%s/locations/%s/sessions/%s", strings.TrimPrefix(parent, "projects/"), strings.ToLower(loc), s.newIDLocked()),
		expire: now.Add(readSessionTTL),
		fields: outFields,
		schema: schema,
	}
	out := &storagepb.ReadSession{
		Name:              sess.name,
		ExpireTime:        timestamppb.New(sess.expire),
		DataFormat:        storagepb.DataFormat_ARROW,
		Schema:            &storagepb.ReadSession_ArrowSchema{ArrowSchema: &storagepb.ArrowSchema{SerializedSchema: ser}},
		Table:             tableRef,
		ReadOptions:       opts,
		EstimatedRowCount: int64(len(kept)),
	}
	for i := 0; i < n; i++ {
		lo, hi := i*len(kept)/n, (i+1)*len(kept)/n
		sess.streams = append(sess.streams, kept[lo:hi])
		out.Streams = append(out.Streams, &storagepb.ReadStream{Name: fmt.Sprintf("%s/streams/%d", sess.name, i)})
		for _, row := range kept[lo:hi] {
			out.EstimatedTotalBytesScanned += int64(estimateSize(row))
		}
	}
	s.readSessions[sess.name] = sess
	s.mu.Unlock()
	return out, nil
}

// readStreamLocked finds a stream of a live read session.
func (s *Server) readStreamLocked(name string) (*readSession, [][]any, error) {
	i := strings.LastIndex(name, "/streams/")
	if i < 0 {
		return nil, nil, status.Errorf(codes.InvalidArgument, "read_stream %q: give a stream name from a ReadSession", name)
	}
	sess := s.readSessions[name[:i]]
	if sess == nil || s.now().After(sess.expire) {
		return nil, nil, status.Errorf(codes.NotFound, "read stream %s not found: its session expired or was never created", name)
	}
	var idx int
	if _, err := fmt.Sscanf(name[i+len("/streams/"):], "%d", &idx); err != nil || idx < 0 || idx >= len(sess.streams) ||
		fmt.Sprint(idx) != name[i+len("/streams/"):] {
		return nil, nil, status.Errorf(codes.NotFound, "read stream %s not found", name)
	}
	return sess, sess.streams[idx], nil
}

// ReadRows serves a stream's rows from req.Offset, in Arrow record
// batches of at most readBatchRows rows.
func (r *readServer) ReadRows(req *storagepb.ReadRowsRequest, stream storagepb.BigQueryRead_ReadRowsServer) error {
	s := r.s
	start := time.Now()
	s.mu.Lock()
	sess, rows, err := s.readStreamLocked(req.GetReadStream())
	s.mu.Unlock()
	sent := 0
	defer func() {
		s.log.Printf("gRPC ReadRows stream=%s rows=%d status=%s dur=%s", req.GetReadStream(), sent, status.Code(err), time.Since(start).Round(time.Microsecond))
	}()
	if err != nil {
		return err
	}
	off := req.GetOffset()
	if off < 0 || off > int64(len(rows)) {
		err = status.Errorf(codes.OutOfRange, "offset %d is beyond the %d rows of stream %s", off, len(rows), req.GetReadStream())
		return err
	}
	for i := int(off); i < len(rows); i += readBatchRows {
		batch := rows[i:min(i+readBatchRows, len(rows))]
		data, berr := arrowBatch(sess.schema, sess.fields, batch)
		if berr != nil {
			err = status.Errorf(codes.Internal, "%v", berr)
			return err
		}
		done := float64(i+len(batch)) / float64(len(rows))
		resp := &storagepb.ReadRowsResponse{
			RowCount: int64(len(batch)),
			Rows: &storagepb.ReadRowsResponse_ArrowRecordBatch{ArrowRecordBatch: &storagepb.ArrowRecordBatch{
				SerializedRecordBatch: data, RowCount: int64(len(batch))}},
			Stats: &storagepb.StreamStats{Progress: &storagepb.StreamStats_Progress{
				AtResponseStart: float64(i) / float64(len(rows)), AtResponseEnd: done}},
		}
		if err = stream.Send(resp); err != nil {
			return err
		}
		sent += len(batch)
	}
	return nil
}

// SplitReadStream answers with no split: each stream is read whole, which
// the API allows ("the original stream can not be split").
func (r *readServer) SplitReadStream(ctx context.Context, req *storagepb.SplitReadStreamRequest) (*storagepb.SplitReadStreamResponse, error) {
	s := r.s
	s.mu.Lock()
	_, _, err := s.readStreamLocked(req.GetName())
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if f := req.GetFraction(); f < 0 || f > 1 {
		return nil, status.Errorf(codes.InvalidArgument, "fraction %v: give a fraction between 0 and 1", f)
	}
	return &storagepb.SplitReadStreamResponse{}, nil
}
