package fileio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/io/rtrackers/offsetrange"

	"github.com/sensorpipe/sensorpipe/schemas"
	"github.com/sensorpipe/sensorpipe/schemas/codec"
	"github.com/sensorpipe/sensorpipe/schemas/deadletter"
)

// readCSV reads the rows of a CSV file (RFC 4180: quoted fields may hold
// delimiters, quotes and newlines) that start in rest. The header row, or
// the spec's csv.columns, names the columns. A row that is not valid CSV,
// or whose field count is not the header's, is a malformed dead letter; a
// read that fails (a damaged gzip stream) dead-letters the rest of the
// file as unreadable.
func (fn *readRowsFn) readCSV(ctx context.Context, rt *claims, rest offsetrange.Restriction, path string, out *rowOut) error {
	cfg := fn.Spec.CSV
	names := cfg.Names()
	fd, err := OpenInput(ctx, path)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer fd.Close()
	br := bufio.NewReaderSize(fd, 1<<20)
	compressed := Compressed(path)
	if compressed && !rt.try(rest.Start) {
		return nil
	}
	// base and baseLine are the byte offset and the lines before what
	// the csv reader reads.
	var base, baseLine int64
	newReader := func(r io.Reader) *csv.Reader {
		cr := csv.NewReader(r)
		cr.Comma = cfg.Comma()
		cr.FieldsPerRecord = -1
		cr.ReuseRecord = true
		return cr
	}
	var cr *csv.Reader
	if compressed || rest.Start == 0 {
		cr = newReader(br)
		if cfg.HasHeader() {
			header, err := cr.Read()
			if err != nil && err != io.EOF {
				if out.first {
					out.unreadable(deadletter.LineSource(path, 1, 0), "its header row cannot be read: %v", err)
				}
				return nil
			}
			if names == nil {
				names = append([]string(nil), header...)
			}
		}
	} else {
		if cfg.HasHeader() && names == nil {
			if names, err = readCSVHeader(ctx, path, newReader); err != nil {
				return nil // the first part reports it
			}
		}
		if base, baseLine, err = seekRecord(br, rest.Start); err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		cr = newReader(br)
	}
	if len(names) > 0 {
		names[0] = strings.TrimPrefix(names[0], "\ufeff")
	}
	cols := make([]schemas.Column, len(names))
	index := map[string]int{}
	for i, n := range names {
		cols[i] = schemas.Column{Name: n, Kind: schemas.ColText, Type: "CSV text"}
		if _, dup := index[n]; !dup {
			index[n] = i
		}
	}
	if !out.mapColumns(cols) {
		return nil
	}
	at := make([]int, len(out.m.Read))
	for k, c := range out.m.Read {
		at[k] = index[c.Name]
	}
	cells := make([]codec.RowCell, len(at))
	line := 0 // of the last row read, in the csv reader's count
	for {
		start := base + cr.InputOffset()
		if !compressed && !rt.try(start) {
			return nil
		}
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err == nil && len(rec) > 0 {
			line, _ = cr.FieldPos(0)
		}
		source := deadletter.LineSource(path, baseLine+int64(line), 0)
		var pe *csv.ParseError
		switch {
		case errors.As(err, &pe):
			line = pe.StartLine
			source = deadletter.LineSource(path, baseLine+int64(pe.StartLine), 0)
			out.bad(source, "", fmt.Errorf("%w: not valid CSV (RFC 4180): %w", schemas.ErrMalformed, pe.Err))
			if errors.Is(pe.Err, csv.ErrQuote) && cr.InputOffset() == start {
				return nil
			}
			continue
		case err != nil:
			out.unreadable(source, "it could not be read past line %d: %v", baseLine+int64(line), err)
			return nil
		}
		for k, i := range at {
			cells[k] = codec.RowCell{}
			if i < len(rec) {
				cells[k] = codec.RowCell{Kind: codec.CellText, Str: rec[i]}
			}
		}
		if len(rec) != len(names) {
			payload, _ := out.m.AppendJSON(nil, cells)
			out.bad(source, string(payload), fmt.Errorf("%w: the row has %d fields, the header %d", schemas.ErrMalformed, len(rec), len(names)))
			continue
		}
		out.row(source, cells)
	}
}

// readCSVHeader reads the header row of the file at path.
func readCSVHeader(ctx context.Context, path string, newReader func(io.Reader) *csv.Reader) ([]string, error) {
	fd, err := OpenInput(ctx, path)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	h, err := newReader(bufio.NewReader(fd)).Read()
	return append([]string(nil), h...), err
}

// seekRecord reads br (a CSV file from its start) up to the first row
// that starts at or after target: after a newline outside quotes. It
// returns that row's offset and the lines before it. A quote toggles
// being inside a quoted field (an escaped quote, "", toggles twice), as
// RFC 4180 has quotes only around fields.
func seekRecord(br *bufio.Reader, target int64) (pos, lines int64, err error) {
	if target <= 0 {
		return 0, 0, nil
	}
	quoted := false
	for {
		seg, err := br.ReadSlice('\n')
		if bytes.Count(seg, []byte{'"'})%2 == 1 {
			quoted = !quoted
		}
		pos += int64(len(seg))
		if len(seg) > 0 && seg[len(seg)-1] == '\n' {
			lines++
			if !quoted && pos >= target {
				return pos, lines, nil
			}
		}
		switch {
		case err == io.EOF:
			return pos, lines, nil
		case err != nil && err != bufio.ErrBufferFull:
			return pos, lines, err
		}
	}
}
