// Package localprism starts prism's job service inside this process, on a
// free port, and points Beam's job options at it.
//
// prism.Execute does the same on its first call when no endpoint is given,
// but it sets the endpoint before the environment type: a pipeline started
// by another goroutine at that moment finds an endpoint and no environment,
// and asks for a Docker container. Starting the service once, up front,
// leaves no such window.
package localprism

import (
	"context"
	"fmt"
	"net"
	"time"

	jobpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/jobmanagement_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/options/jobopts"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
)

// Start starts prism's job service on a free port of 127.0.0.1, sets
// --endpoint to it, and returns a client of it. It waits up to 30 s for the
// service to answer.
func Start(ctx context.Context) (jobpb.JobServiceClient, error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("prism: find a free port: %w", err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client, err := prism.CreateJobServer(cctx, prism.Options{Port: port})
	if err != nil {
		return nil, fmt.Errorf("prism: start its job service on port %d: %w", port, err)
	}
	*jobopts.Endpoint = fmt.Sprintf("localhost:%d", port)
	return client, nil
}
