package bigtableio

import (
	"context"
	"fmt"

	"cloud.google.com/go/bigtable"
)

// NewClient opens a data client with client-side metrics export off
// (it would need Cloud Monitoring credentials and means nothing on the
// emulator).
func NewClient(ctx context.Context, project, instance string) (*bigtable.Client, error) {
	return NewClientProfile(ctx, project, instance, "")
}

// NewClientProfile is NewClient with an app profile ("" is
// the instance's default profile).
func NewClientProfile(ctx context.Context, project, instance, appProfile string) (*bigtable.Client, error) {
	c, err := bigtable.NewClientWithConfig(ctx, project, instance, bigtable.ClientConfig{AppProfile: appProfile, MetricsProvider: bigtable.NoopMetricsProvider{}})
	if err != nil {
		return nil, fmt.Errorf("bigtable client for %s/%s: %w", project, instance, err)
	}
	return c, nil
}
