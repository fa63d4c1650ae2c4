package bigtableio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"cloud.google.com/go/bigtable"
	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/api/option"
	gtransport "google.golang.org/api/transport/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// KeySample is one of Bigtable's sample row keys (SampleRowKeys) with its
// offset: about how many bytes of the table come before it.
type KeySample struct {
	Key    string
	Offset int64
}

// SampleRowKeyOffsets is Bigtable's sample of a table's row keys, each
// with its offset in bytes, in key order; the last is the table's end
// (its key may be empty). The client library's SampleRowKeys keeps the
// keys alone, so this calls the Bigtable data API's SampleRowKeys itself:
// at BIGTABLE_EMULATOR_HOST when it is set, as the client library does,
// else at Cloud Bigtable with the default credentials. It makes one
// attempt.
func SampleRowKeyOffsets(ctx context.Context, project, instance, table string) ([]KeySample, error) {
	var (
		conn grpc.ClientConnInterface
		done func() error
	)
	if host := os.Getenv("BIGTABLE_EMULATOR_HOST"); host != "" {
		c, err := grpc.NewClient(host, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, fmt.Errorf("bigtable emulator at %s: %w", host, err)
		}
		conn, done = c, c.Close
	} else {
		c, err := gtransport.Dial(ctx, option.WithEndpoint("bigtable.googleapis.com:443"), option.WithScopes(bigtable.ReadonlyScope))
		if err != nil {
			return nil, fmt.Errorf("bigtable client for %s/%s: %w", project, instance, err)
		}
		conn, done = c, c.Close
	}
	defer done()
	name := fmt.Sprintf("projects/%s/instances/%s/tables/%s", project, instance, table)
	ctx = metadata.AppendToOutgoingContext(ctx, "x-goog-request-params", "table_name="+name)
	stream, err := btpb.NewBigtableClient(conn).SampleRowKeys(ctx, &btpb.SampleRowKeysRequest{TableName: name})
	if err != nil {
		return nil, fmt.Errorf("sample the row keys of %s: %w", table, err)
	}
	var out []KeySample
	for {
		res, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("sample the row keys of %s: %w", table, err)
		}
		out = append(out, KeySample{Key: string(res.GetRowKey()), Offset: res.GetOffsetBytes()})
	}
}
