// Command testboot starts a Go SDK worker for a Beam job server's PROCESS
// environment (--environment_type=PROCESS), for the tests that run the
// pipeline's workers in their own processes, as Dataflow does. It does
// what the SDK's container boot (sdks/go/container/boot.go) does, without
// the ways that boot fails under prism (docs/upstream/prism-process-boot.md):
//
//   - it strips the quotes prism puts around --id ('…'), which the
//     provisioning service does not know;
//   - it runs the worker in a temporary folder of its own, holding the
//     pipeline options file and any staged binary, removed when the worker
//     ends, and nothing in the job server's working folder. prism kills
//     the boot (SIGKILL) when the job ends, so the folder names its boot
//     and the next boot removes the folders of boots that are gone;
//   - the worker dies with it (Linux's parent-death signal), so a job
//     server that stops its environment leaves no worker behind;
//   - with SENSORPIPE_WORKER_BINARY set (the launcher the test built and
//     passed as --worker_binary), it runs that file instead of fetching
//     the staged copy (about 200 MB) from the artifact service.
//
// The worker's working folder is never the launcher's, so a path the
// launcher passed relative would not be found.
//
// SENSORPIPE_WORKER_UNSEEN names a folder the worker must not see, as on
// a machine without the launcher's files: it is moved aside while the
// worker runs, and back when it ends.
//
// Usage (the job server adds --id and --provision_endpoint):
//
//	--environment_type=PROCESS --environment_config='{"command":"/path/testboot","env":{"SENSORPIPE_WORKER_BINARY":"/path/launcher"}}'
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam/artifact"
	fnpb "github.com/apache/beam/sdks/v2/go/pkg/beam/model/fnexecution_v1"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/util/grpcx"
	"google.golang.org/protobuf/encoding/protojson"
)

var (
	id                = flag.String("id", "", "Worker id (required); quotes around it are stripped.")
	provisionEndpoint = flag.String("provision_endpoint", "", "Provision service endpoint (required).")
	_                 = flag.String("logging_endpoint", "", "Ignored: the provision info has it.")
	_                 = flag.String("artifact_endpoint", "", "Ignored: the provision info has it.")
	_                 = flag.String("control_endpoint", "", "Ignored: the provision info has it.")
	_                 = flag.String("semi_persist_dir", "", "Ignored: the worker gets a temporary folder.")
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("testboot: ")
	flag.Parse()
	// prism v2.77 passes --id='worker-1' with the quotes in the value.
	workerID := strings.Trim(*id, `'"`)
	if workerID == "" || *provisionEndpoint == "" {
		log.Fatal("--id and --provision_endpoint are required")
	}
	code, err := run(workerID)
	if err != nil {
		log.Fatal(err)
	}
	os.Exit(code)
}

func run(workerID string) (int, error) {
	ctx := grpcx.WriteWorkerID(context.Background(), workerID)
	info, err := provision(ctx)
	if err != nil {
		return 1, err
	}
	sweep()
	dir, err := os.MkdirTemp("", "testboot-")
	if err != nil {
		return 1, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return 1, err
	}

	bin := os.Getenv("SENSORPIPE_WORKER_BINARY")
	if bin == "" {
		staged := filepath.Join(dir, "staged")
		arts, err := artifact.Materialize(ctx, info.GetArtifactEndpoint().GetUrl(), info.GetDependencies(), info.GetRetrievalToken(), staged)
		if err != nil {
			return 1, fmt.Errorf("fetch the staged worker: %w", err)
		}
		if len(arts) == 0 {
			return 1, fmt.Errorf("no worker binary staged")
		}
		name, _ := artifact.MustExtractFilePayload(arts[0])
		for _, a := range arts {
			if a.GetRoleUrn() == artifact.URNGoWorkerBinaryRole {
				name, _ = artifact.MustExtractFilePayload(a)
			}
		}
		bin = filepath.Join(staged, name)
		if err := os.Chmod(bin, 0o755); err != nil {
			return 1, err
		}
	}
	opts, err := protojson.Marshal(info.GetPipelineOptions())
	if err != nil {
		return 1, fmt.Errorf("pipeline options: %w", err)
	}
	optsFile := filepath.Join(dir, "pipeline_options.json")
	if err := os.WriteFile(optsFile, opts, 0o600); err != nil {
		return 1, err
	}
	if unseen := os.Getenv("SENSORPIPE_WORKER_UNSEEN"); unseen != "" {
		aside := unseen + ".unseen"
		if err := os.Rename(unseen, aside); err != nil {
			return 1, fmt.Errorf("hide %s from the worker: %w", unseen, err)
		}
		defer os.Rename(aside, unseen)
	}

	cmd := exec.Command(bin, "--worker=true", "--id="+workerID,
		"--logging_endpoint="+info.GetLoggingEndpoint().GetUrl(),
		"--control_endpoint="+info.GetControlEndpoint().GetUrl(),
		"--semi_persist_dir="+dir)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PIPELINE_OPTIONS_FILE="+optsFile, "TMPDIR="+dir)
	if u := info.GetStatusEndpoint().GetUrl(); u != "" {
		cmd.Env = append(cmd.Env, "STATUS_ENDPOINT="+u)
	}
	if caps := info.GetRunnerCapabilities(); len(caps) > 0 {
		cmd.Env = append(cmd.Env, "RUNNER_CAPABILITIES="+strings.Join(caps, " "))
	}
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The parent-death signal is sent when the thread that started the
	// child ends: keep this goroutine on its thread.
	runtime.LockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 1, fmt.Errorf("start the worker %s: %w", bin, err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	return 0, err
}

// ownerFile, in a boot's folder, holds the boot's process id.
const ownerFile = "boot.pid"

// sweep removes the folders of boots that are gone (killed at their job's
// end, before they could remove their own).
func sweep() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "testboot-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(dir)
		}
	}
}

// provision gets the worker's provision info, retrying for a while: the
// job server may still be setting the environment up.
func provision(ctx context.Context) (*fnpb.ProvisionInfo, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cc, err := grpcx.Dial(cctx, *provisionEndpoint, time.Minute)
	if err != nil {
		return nil, fmt.Errorf("dial the provision service %s: %w", *provisionEndpoint, err)
	}
	defer cc.Close()
	resp, err := fnpb.NewProvisionServiceClient(cc).GetProvisionInfo(cctx, &fnpb.GetProvisionInfoRequest{})
	if err != nil {
		return nil, fmt.Errorf("provision info from %s: %w", *provisionEndpoint, err)
	}
	if resp.GetInfo() == nil {
		return nil, fmt.Errorf("provision info from %s: empty", *provisionEndpoint)
	}
	return resp.GetInfo(), nil
}
