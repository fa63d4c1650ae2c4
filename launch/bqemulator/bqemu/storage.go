package bqemu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"cloud.google.com/go/bigquery/storage/apiv1/storagepb"
	bq "google.golang.org/api/bigquery/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const defaultStreamID = "_default"

// writeStream is a Storage Write API stream created with CreateWriteStream.
type writeStream struct {
	name       string
	tbl        *table
	typ        storagepb.WriteStream_Type
	createTime time.Time
	commitTime time.Time
	finalized  bool
	committed  bool

	rowCount int64 // end offset of the stream
	flushed  int64 // BUFFERED: rows [0, flushed) are visible
	rows     [][]any
	parts    []string
}

// writeServer implements storagepb.BigQueryWriteServer.
type writeServer struct {
	storagepb.UnimplementedBigQueryWriteServer
	s *Server
}

// parseTableParent parses "projects/p/datasets/d/tables/t".
func parseTableParent(parent string) (proj, ds, tbl string, ok bool) {
	parts := strings.Split(parent, "/")
	if len(parts) != 6 || parts[0] != "projects" || parts[2] != "datasets" || parts[4] != "tables" || parts[1] == "" || parts[3] == "" || parts[5] == "" {
		return "", "", "", false
	}
	return parts[1], parts[3], parts[5], true
}

// parseStreamName parses "projects/p/datasets/d/tables/t/streams/s".
func parseStreamName(name string) (parent, id string, ok bool) {
	i := strings.LastIndex(name, "/streams/")
	if i < 0 {
		return "", "", false
	}
	parent, id = name[:i], name[i+len("/streams/"):]
	if _, _, _, ok := parseTableParent(parent); !ok || id == "" {
		return "", "", false
	}
	return parent, id, true
}

func storageStatus(code codes.Code, scode storagepb.StorageError_StorageErrorCode, entity, msg string) *status.Status {
	st := status.New(code, msg)
	if scode != storagepb.StorageError_STORAGE_ERROR_CODE_UNSPECIFIED {
		if d, err := st.WithDetails(&storagepb.StorageError{Code: scode, Entity: entity, ErrorMessage: msg}); err == nil {
			st = d
		}
	}
	return st
}

func (s *Server) tableForParentLocked(parent string) (*table, error) {
	proj, ds, tbl, ok := parseTableParent(parent)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "invalid table name %q; expected projects/{project}/datasets/{dataset}/tables/{table}", parent)
	}
	t := s.lookupTableLocked(proj, ds, tbl)
	if t == nil {
		return nil, storageStatus(codes.NotFound, storagepb.StorageError_TABLE_NOT_FOUND, parent,
			fmt.Sprintf("Requested entity was not found. Entity: %s", parent)).Err()
	}
	return t, nil
}

func storageSchema(fields []*bq.TableFieldSchema) *storagepb.TableSchema {
	return &storagepb.TableSchema{Fields: storageFields(fields)}
}

func storageFields(fields []*bq.TableFieldSchema) []*storagepb.TableFieldSchema {
	out := make([]*storagepb.TableFieldSchema, 0, len(fields))
	for _, f := range fields {
		typ := f.Type
		switch typ {
		case "INTEGER":
			typ = "INT64"
		case "FLOAT":
			typ = "DOUBLE"
		case "BOOLEAN":
			typ = "BOOL"
		case "RECORD":
			typ = "STRUCT"
		}
		sf := &storagepb.TableFieldSchema{
			Name:        f.Name,
			Type:        storagepb.TableFieldSchema_Type(storagepb.TableFieldSchema_Type_value[typ]),
			Mode:        storagepb.TableFieldSchema_Mode(storagepb.TableFieldSchema_Mode_value[f.Mode]),
			Description: f.Description,
		}
		if len(f.Fields) > 0 {
			sf.Fields = storageFields(f.Fields)
		}
		out = append(out, sf)
	}
	return out
}

func (s *Server) streamProtoLocked(ws *writeStream, view storagepb.WriteStreamView) *storagepb.WriteStream {
	out := &storagepb.WriteStream{
		Name:       ws.name,
		Type:       ws.typ,
		CreateTime: timestamppb.New(ws.createTime),
		WriteMode:  storagepb.WriteStream_INSERT,
		Location:   ws.tbl.meta.Location,
	}
	if ws.committed {
		out.CommitTime = timestamppb.New(ws.commitTime)
	}
	if view == storagepb.WriteStreamView_FULL || view == storagepb.WriteStreamView_WRITE_STREAM_VIEW_UNSPECIFIED {
		out.TableSchema = storageSchema(ws.tbl.fields())
	}
	return out
}

// CreateWriteStream implements storagepb.BigQueryWriteServer.
func (w *writeServer) CreateWriteStream(ctx context.Context, req *storagepb.CreateWriteStreamRequest) (*storagepb.WriteStream, error) {
	s := w.s
	typ := req.GetWriteStream().GetType()
	switch typ {
	case storagepb.WriteStream_COMMITTED, storagepb.WriteStream_PENDING, storagepb.WriteStream_BUFFERED:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "write_stream.type must be COMMITTED, PENDING or BUFFERED, got %s", typ)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableForParentLocked(req.GetParent())
	if err != nil {
		return nil, err
	}
	ws := &writeStream{
		name:       req.GetParent() + "/streams/" + s.newIDLocked(),
		tbl:        t,
		typ:        typ,
		createTime: s.now(),
	}
	s.streams[ws.name] = ws
	return s.streamProtoLocked(ws, storagepb.WriteStreamView_FULL), nil
}

// GetWriteStream implements storagepb.BigQueryWriteServer.
func (w *writeServer) GetWriteStream(ctx context.Context, req *storagepb.GetWriteStreamRequest) (*storagepb.WriteStream, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, err := s.streamLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	return s.streamProtoLocked(ws, req.GetView()), nil
}

// streamLocked resolves a stream name, synthesizing the default stream.
func (s *Server) streamLocked(name string) (*writeStream, error) {
	parent, id, ok := parseStreamName(name)
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "invalid stream name %q; expected projects/{project}/datasets/{dataset}/tables/{table}/streams/{stream}", name)
	}
	t, err := s.tableForParentLocked(parent)
	if err != nil {
		return nil, err
	}
	if id == defaultStreamID {
		return &writeStream{
			name:       name,
			tbl:        t,
			typ:        storagepb.WriteStream_COMMITTED,
			createTime: time.UnixMilli(t.meta.CreationTime),
		}, nil
	}
	ws := s.streams[name]
	if ws == nil || ws.tbl != t {
		return nil, storageStatus(codes.NotFound, storagepb.StorageError_STREAM_NOT_FOUND, name,
			fmt.Sprintf("Requested entity was not found. Entity: %s", name)).Err()
	}
	return ws, nil
}

// FinalizeWriteStream implements storagepb.BigQueryWriteServer.
func (w *writeServer) FinalizeWriteStream(ctx context.Context, req *storagepb.FinalizeWriteStreamRequest) (*storagepb.FinalizeWriteStreamResponse, error) {
	s := w.s
	if _, id, ok := parseStreamName(req.GetName()); ok && id == defaultStreamID {
		return nil, storageStatus(codes.InvalidArgument, storagepb.StorageError_INVALID_STREAM_TYPE, req.GetName(),
			"Cannot finalize the _default stream. Entity: "+req.GetName()).Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, err := s.streamLocked(req.GetName())
	if err != nil {
		return nil, err
	}
	ws.finalized = true
	return &storagepb.FinalizeWriteStreamResponse{RowCount: ws.rowCount}, nil
}

// BatchCommitWriteStreams implements storagepb.BigQueryWriteServer. Either
// all streams are committed or none is; problems are reported as
// stream_errors as BigQuery does.
func (w *writeServer) BatchCommitWriteStreams(ctx context.Context, req *storagepb.BatchCommitWriteStreamsRequest) (*storagepb.BatchCommitWriteStreamsResponse, error) {
	s := w.s
	if len(req.GetWriteStreams()) == 0 {
		return nil, status.Error(codes.InvalidArgument, "write_streams must not be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, err := s.tableForParentLocked(req.GetParent())
	if err != nil {
		return nil, err
	}
	var serrs []*storagepb.StorageError
	var streams []*writeStream
	seen := map[string]bool{}
	for _, name := range req.GetWriteStreams() {
		ws := s.streams[name]
		var code storagepb.StorageError_StorageErrorCode
		var msg string
		switch {
		case ws == nil:
			code, msg = storagepb.StorageError_STREAM_NOT_FOUND, "Stream is not found"
		case ws.tbl != t:
			code, msg = storagepb.StorageError_INVALID_STREAM_STATE, fmt.Sprintf("Stream does not belong to table %s", req.GetParent())
		case ws.typ != storagepb.WriteStream_PENDING:
			code, msg = storagepb.StorageError_INVALID_STREAM_TYPE, fmt.Sprintf("Stream type %s cannot be committed; only PENDING streams can", ws.typ)
		case ws.committed:
			code, msg = storagepb.StorageError_STREAM_ALREADY_COMMITTED, "Stream is already committed"
		case !ws.finalized:
			code, msg = storagepb.StorageError_INVALID_STREAM_STATE, "Stream is not yet finalized"
		case seen[name]:
			continue
		}
		if code != storagepb.StorageError_STORAGE_ERROR_CODE_UNSPECIFIED {
			serrs = append(serrs, &storagepb.StorageError{Code: code, Entity: name, ErrorMessage: msg + ". Entity: " + name})
			continue
		}
		seen[name] = true
		streams = append(streams, ws)
	}
	if len(serrs) > 0 {
		return &storagepb.BatchCommitWriteStreamsResponse{StreamErrors: serrs}, nil
	}
	if t.deleted {
		return nil, status.Errorf(codes.NotFound, "Requested entity was not found. Entity: %s", req.GetParent())
	}
	now := s.now()
	for _, ws := range streams {
		t.addRowsLocked(ws.rows, ws.parts)
		ws.rows, ws.parts = nil, nil
		ws.committed = true
		ws.commitTime = now
	}
	return &storagepb.BatchCommitWriteStreamsResponse{CommitTime: timestamppb.New(now)}, nil
}

// FlushRows implements storagepb.BigQueryWriteServer for BUFFERED streams.
func (w *writeServer) FlushRows(ctx context.Context, req *storagepb.FlushRowsRequest) (*storagepb.FlushRowsResponse, error) {
	s := w.s
	s.mu.Lock()
	defer s.mu.Unlock()
	ws, err := s.streamLocked(req.GetWriteStream())
	if err != nil {
		return nil, err
	}
	if ws.typ != storagepb.WriteStream_BUFFERED {
		return nil, storageStatus(codes.InvalidArgument, storagepb.StorageError_INVALID_STREAM_TYPE, ws.name,
			fmt.Sprintf("FlushRows is only supported on BUFFERED streams, stream type is %s. Entity: %s", ws.typ, ws.name)).Err()
	}
	off := req.GetOffset().GetValue()
	if off >= ws.rowCount {
		return nil, storageStatus(codes.OutOfRange, storagepb.StorageError_OFFSET_OUT_OF_RANGE, ws.name,
			fmt.Sprintf("Offset %d is beyond the end of the stream (%d rows). Entity: %s", off, ws.rowCount, ws.name)).Err()
	}
	if off+1 > ws.flushed {
		n := off + 1 - ws.flushed
		ws.tbl.addRowsLocked(ws.rows[:n], ws.parts[:n])
		ws.rows, ws.parts = ws.rows[n:], ws.parts[n:]
		ws.flushed = off + 1
	}
	return &storagepb.FlushRowsResponse{Offset: off}, nil
}

// appendConn is the per-connection state of an AppendRows stream.
type appendConn struct {
	stream string
	md     protoreflect.MessageDescriptor

	// compiled plan cache
	planMD      protoreflect.MessageDescriptor
	planTable   *table
	planVersion int
	plan        []colPlan
	planErr     *fieldError
	cdc         cdcPlan
}

// AppendRows implements storagepb.BigQueryWriteServer. Each request gets
// exactly one response, in order; request-level problems are reported as an
// error embedded in the response, as BigQuery does.
func (w *writeServer) AppendRows(stream storagepb.BigQueryWrite_AppendRowsServer) error {
	s := w.s
	var conn appendConn
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		start := time.Now()
		resp, rows, fatal := s.handleAppend(&conn, req)
		code := codes.OK
		switch {
		case fatal != nil:
			code = status.Code(fatal)
		case resp.GetError() != nil:
			code = codes.Code(resp.GetError().GetCode())
		}
		s.log.Printf("gRPC AppendRows stream=%s status=%s rows=%d dur=%s", conn.stream, code, rows, time.Since(start).Round(time.Microsecond))
		if fatal != nil {
			return fatal
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func errResponse(stream string, st *status.Status) *storagepb.AppendRowsResponse {
	return &storagepb.AppendRowsResponse{
		Response:    &storagepb.AppendRowsResponse_Error{Error: st.Proto()},
		WriteStream: stream,
	}
}

// handleAppend processes one AppendRowsRequest. It returns the response and
// the number of rows written, or a fatal error that terminates the
// connection.
func (s *Server) handleAppend(c *appendConn, req *storagepb.AppendRowsRequest) (*storagepb.AppendRowsResponse, int, error) {
	if req.GetWriteStream() != "" {
		c.stream = req.GetWriteStream()
	}
	if c.stream == "" {
		return nil, 0, status.Error(codes.InvalidArgument, "write_stream must be set in the first AppendRowsRequest of a connection")
	}
	pr := req.GetProtoRows()
	if pr == nil {
		return errResponse(c.stream, status.New(codes.InvalidArgument, "only proto_rows are supported by the emulator")), 0, nil
	}
	if ws := pr.GetWriterSchema(); ws != nil {
		md, err := s.messageDescriptor(ws.GetProtoDescriptor())
		if err != nil {
			c.md = nil
			return errResponse(c.stream, status.New(codes.InvalidArgument, fmt.Sprintf("Invalid proto schema: %v. Entity: %s", err, c.stream))), 0, nil
		}
		c.md = md
	}
	if sz := proto.Size(req); sz > MaxRequestBytes {
		return errResponse(c.stream, status.New(codes.InvalidArgument,
			fmt.Sprintf("AppendRows request too large: %d limit %d (the request size limit is 10 MB). Entity: %s", sz, MaxRequestBytes, c.stream))), 0, nil
	}
	if c.md == nil {
		return errResponse(c.stream, status.New(codes.InvalidArgument,
			"writer_schema is required in the first AppendRowsRequest of a connection. Entity: "+c.stream)), 0, nil
	}
	_, sid, _ := parseStreamName(c.stream)
	isDefault := sid == defaultStreamID
	if isDefault && req.GetOffset() != nil {
		return errResponse(c.stream, status.New(codes.InvalidArgument,
			"Offset is not supported on the _default stream. Entity: "+c.stream)), 0, nil
	}

	// Snapshot the destination.
	s.mu.Lock()
	ws, err := s.streamLocked(c.stream)
	if err != nil {
		s.mu.Unlock()
		return errResponse(c.stream, status.Convert(err)), 0, nil
	}
	t := ws.tbl
	meta := t.meta
	version := t.schemaVersion
	s.mu.Unlock()

	if c.planMD != c.md || c.planTable != t || c.planVersion != version || (c.plan == nil && c.planErr == nil) {
		c.plan, c.planErr = compilePlan(c.md, meta.Schema.Fields, "")
		c.cdc = cdcPlan{}
		if c.planErr == nil {
			c.cdc, c.planErr = compileCDC(c.md)
		}
		c.planMD, c.planTable, c.planVersion = c.md, t, version
	}
	// Rows with pseudo-columns on the _default stream are changes (CDC),
	// which BigQuery applies only to a table with a primary key.
	upsert := isDefault && c.cdc.active()
	if upsert && primaryKeyColumns(meta) == nil {
		return errResponse(c.stream, status.New(codes.InvalidArgument,
			"The primary keys and clustering keys of the table are required to create an upsert stream. Entity: "+c.stream)), 0, nil
	}

	// Decode and validate outside the lock.
	serialized := pr.GetRows().GetSerializedRows()
	now := s.now()
	rows := make([][]any, len(serialized))
	parts := make([]string, len(serialized))
	var changes []rowChange
	if upsert {
		changes = make([]rowChange, len(serialized))
	}
	var rowErrs []*storagepb.RowError
	for i, b := range serialized {
		var ferr *fieldError
		if c.planErr != nil {
			ferr = c.planErr
		} else {
			msg := dynamicpb.NewMessage(c.md)
			if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(b, msg); err != nil {
				ferr = &fieldError{message: fmt.Sprintf("Could not parse row as %s: %v", c.md.FullName(), err)}
			} else {
				var ch rowChange
				if c.cdc.active() {
					ch, ferr = c.cdc.rowChangeOf(msg, upsert)
				}
				if ferr == nil {
					rows[i], ferr = decodeRowMode(c.plan, msg, ch.typ == changeDelete)
				}
				if changes != nil {
					changes[i] = ch
				}
				if ferr == nil && ch.typ != changeDelete {
					var perr error
					parts[i], perr = partitionOf(meta, rows[i], now)
					if perr != nil {
						ferr = &fieldError{location: meta.TimePartitioning.Field, message: perr.Error()}
					}
				}
			}
		}
		if ferr != nil {
			rowErrs = append(rowErrs, &storagepb.RowError{Index: int64(i), Code: storagepb.RowError_FIELDS_ERROR, Message: ferr.message})
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if isDefault {
		// Re-resolve: the table may have been deleted or recreated.
		if cur, err := s.streamLocked(c.stream); err != nil {
			return errResponse(c.stream, status.Convert(err)), 0, nil
		} else if cur.tbl != t {
			return errResponse(c.stream, status.New(codes.Unavailable, "destination table changed; retry. Entity: "+c.stream)), 0, nil
		}
	} else {
		if t.deleted {
			return errResponse(c.stream, storageStatus(codes.NotFound, storagepb.StorageError_TABLE_NOT_FOUND, c.stream,
				"Requested entity was not found. Entity: "+c.stream)), 0, nil
		}
		if ws.finalized {
			return errResponse(c.stream, storageStatus(codes.InvalidArgument, storagepb.StorageError_STREAM_FINALIZED, c.stream,
				"Stream is finalized. Entity: "+c.stream)), 0, nil
		}
		if off := req.GetOffset(); off != nil {
			if off.GetValue() < ws.rowCount {
				return errResponse(c.stream, storageStatus(codes.AlreadyExists, storagepb.StorageError_OFFSET_ALREADY_EXISTS, c.stream,
					fmt.Sprintf("The offset is within stream, expected offset %d, received %d. Entity: %s", ws.rowCount, off.GetValue(), c.stream))), 0, nil
			}
			if off.GetValue() > ws.rowCount {
				return errResponse(c.stream, storageStatus(codes.OutOfRange, storagepb.StorageError_OFFSET_OUT_OF_RANGE, c.stream,
					fmt.Sprintf("The offset is beyond stream, expected offset %d, received %d. Entity: %s", ws.rowCount, off.GetValue(), c.stream))), 0, nil
			}
		}
	}
	if len(rowErrs) > 0 {
		msg := fmt.Sprintf("Errors found while processing rows. Please refer to the row_errors field for details. The list may not be complete because of the size limitations. First error: row %d: %s Entity: %s",
			rowErrs[0].GetIndex(), rowErrs[0].GetMessage(), c.stream)
		resp := errResponse(c.stream, status.New(codes.InvalidArgument, msg))
		resp.RowErrors = rowErrs
		return resp, 0, nil
	}
	resp := &storagepb.AppendRowsResponse{WriteStream: c.stream}
	result := &storagepb.AppendRowsResponse_AppendResult{}
	switch {
	case isDefault || ws.typ == storagepb.WriteStream_COMMITTED:
		t.applyLocked(rows, parts, changes)
		if !isDefault {
			result.Offset = wrapperspb.Int64(ws.rowCount)
			ws.rowCount += int64(len(rows))
		}
	default: // PENDING, BUFFERED
		result.Offset = wrapperspb.Int64(ws.rowCount)
		ws.rows = append(ws.rows, rows...)
		ws.parts = append(ws.parts, parts...)
		ws.rowCount += int64(len(rows))
	}
	resp.Response = &storagepb.AppendRowsResponse_AppendResult_{AppendResult: result}
	return resp, len(rows), nil
}

// logUnary logs unary Storage Write RPCs.
func (s *Server) logUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	rows := int64(0)
	if r, ok := resp.(*storagepb.FinalizeWriteStreamResponse); ok {
		rows = r.GetRowCount()
	}
	method := info.FullMethod
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		method = method[i+1:]
	}
	s.log.Printf("gRPC %s status=%s rows=%d dur=%s", method, status.Code(err), rows, time.Since(start).Round(time.Microsecond))
	return resp, err
}
