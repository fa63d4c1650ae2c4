package main

import (
	"net"
	"os"
	"strings"
)

// runner is the runner the flags name (--runner; prism when none is
// given) and, for a job server, its --endpoint and --environment_type as
// given.
type runner struct {
	name     string
	endpoint string
	envType  string
}

// prism reports whether the runner is prism.
func (r runner) prism() bool { return r.name == "prism" || r.name == "PrismRunner" }

// local reports whether the job runs in the launcher's own process: on
// direct, or on prism with no --endpoint (the launcher serves prism's job
// service itself). Only a local batch runs in parts (--local_part_mb).
func (r runner) local() bool {
	switch r.name {
	case "direct", "DirectRunner":
		return true
	case "prism", "PrismRunner":
		return r.endpoint == ""
	}
	return false
}

// dataflow reports whether the runner is Dataflow, the one runner that
// runs pubsubio and keeps a stream's state outside the workers' memory.
func (r runner) dataflow() bool {
	switch r.name {
	case "dataflow", "DataflowRunner":
		return true
	}
	return false
}

// jobServer reports whether the runner submits the job to a Beam job
// service (prism's, a Flink, Spark or Samza job server, any --endpoint),
// which the launcher polls for the job's state and counters.
func (r runner) jobServer() bool {
	switch r.name {
	case "prism", "PrismRunner", "universal", "portable", "PortableRunner", "flink", "FlinkRunner", "spark", "SparkRunner", "samza", "SamzaRunner":
		return true
	}
	return false
}

// workersSeeDisk reports whether the job's workers read and write the
// launcher's own disk: they run in the launcher (direct, LOOPBACK, prism
// with no --endpoint and no --environment_type), or as processes of a job
// server on this machine (--environment_type=PROCESS with no --endpoint or
// a loopback one). Dataflow's workers, containers (DOCKER) and a remote
// job server's processes do not.
func (r runner) workersSeeDisk() bool {
	if r.name == "direct" || r.name == "DirectRunner" {
		return true
	}
	if !r.jobServer() {
		return false
	}
	switch strings.ToLower(r.environmentType()) {
	case "loopback":
		return true
	case "process":
		return r.endpoint == "" || loopbackEndpoint(r.endpoint)
	}
	return false
}

// environmentType is --environment_type, or what the launcher defaults it
// to: LOOPBACK on prism (as prism.Execute does), Beam's DOCKER elsewhere.
func (r runner) environmentType() string {
	switch {
	case r.envType != "":
		return r.envType
	case r.prism():
		return "loopback"
	}
	return "docker"
}

// remoteDiskError is the one-line refusal of a local path that the job's
// workers cannot see.
func (r runner) remoteDiskError(flagName, value string) error {
	how := "--runner=" + r.name
	if r.jobServer() {
		how += " --environment_type=" + strings.ToUpper(r.environmentType())
		if r.endpoint != "" {
			how += " --endpoint=" + r.endpoint
		}
	}
	return usagef("%s=%s is on this machine's disk, which the workers of %s cannot see: give a gs:// path (gs://BUCKET/...)", flagName, value, how)
}

// loopbackEndpoint reports whether a job server's HOST:PORT is on this
// machine: localhost, a loopback or unspecified address, or its host name.
func loopbackEndpoint(endpoint string) bool {
	host, _, err := net.SplitHostPort(endpoint)
	if err != nil {
		host = endpoint
	}
	if host == "localhost" {
		return true
	}
	if name, err := os.Hostname(); err == nil && strings.EqualFold(host, name) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && (ip.IsLoopback() || ip.IsUnspecified())
}

// localPath reports whether a file path or glob is on the local disk (not
// gs:// or another file system's scheme).
func localPath(path string) bool {
	return !strings.Contains(path, "://")
}
