package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// progressLine is one of the launcher's progress lines, stamped with the
// time this process read it.
type progressLine struct {
	At                            time.Time
	Read, Written, BigQuery, Dead int64
}

// The launcher's progress lines: a stream's counts its provisional and
// final Bigtable writes apart (launch's progressLine); a batch's counts
// them together.
var (
	streamProgressRE = regexp.MustCompile(`^progress\s+(\d+)s: read (\d+) \(.*?\); Bigtable (\d+) provisional writes, (\d+) final; BigQuery (\d+) final; dead-lettered (\d+)`)
	batchProgressRE  = regexp.MustCompile(`^progress\s+(\d+)s: read (\d+), written (\d+) \(bigquery (\d+)\), dead-lettered (\d+)`)
)

// parseProgress parses a launcher progress line, a stream's or a batch's.
// Written is every Bigtable write of the first table's readings,
// provisional and final.
func parseProgress(line string, at time.Time) (progressLine, bool) {
	num := func(s string) int64 { n, _ := strconv.ParseInt(s, 10, 64); return n }
	if m := streamProgressRE.FindStringSubmatch(line); m != nil {
		return progressLine{At: at, Read: num(m[2]), Written: num(m[3]) + num(m[4]), BigQuery: num(m[5]), Dead: num(m[6])}, true
	}
	if m := batchProgressRE.FindStringSubmatch(line); m != nil {
		return progressLine{At: at, Read: num(m[2]), Written: num(m[3]), BigQuery: num(m[4]), Dead: num(m[5])}, true
	}
	return progressLine{}, false
}

// job is the streaming launcher running as a child process. Its stderr is
// scanned for progress lines as they come.
type job struct {
	cmd     *exec.Cmd
	started time.Time // just before the process started
	done    chan struct{}
	err     error // set before done closes

	mu       sync.Mutex
	lines    []progressLine
	log      *os.File // all of stderr, each line stamped with the time read
	stderr   tailBuffer
	errLines int    // stderr lines logged at level ERROR
	firstErr string // the first of them
	stdout   tailBuffer
	changed  chan struct{}
	stopOnce sync.Once
}

// startJob starts bin with args and env added to this process's; its
// stderr is also copied to logPath.
func startJob(bin, logPath string, env []string, args ...string) (*job, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	j := &job{cmd: exec.Command(bin, args...), done: make(chan struct{}), changed: make(chan struct{}), log: logFile}
	j.cmd.Env = append(os.Environ(), env...)
	j.cmd.Stdout = &j.stdout
	errPipe, err := j.cmd.StderrPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	j.started = time.Now()
	if err := j.cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start launcher: %w", err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		j.scan(errPipe)
	}()
	go func() {
		<-scanned // Wait closes the pipe: read it to the end first
		j.err = j.cmd.Wait()
		j.log.Close()
		close(j.done)
		j.notify()
	}()
	return j, nil
}

func (j *job) scan(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		now := time.Now()
		j.stderr.Write([]byte(line + "\n"))
		fmt.Fprintln(j.log, now.UTC().Format("15:04:05.000"), line)
		p, ok := parseProgress(line, now)
		j.mu.Lock()
		if ok {
			j.lines = append(j.lines, p)
		}
		if strings.Contains(line, "level=ERROR") {
			if j.errLines++; j.firstErr == "" {
				j.firstErr = line
			}
		}
		j.mu.Unlock()
		if ok {
			j.notify()
		}
	}
}

// notify wakes whoever waits for a new progress line.
func (j *job) notify() {
	j.mu.Lock()
	close(j.changed)
	j.changed = make(chan struct{})
	j.mu.Unlock()
}

// last is the latest progress line (zero before the first).
func (j *job) last() progressLine {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.lines) == 0 {
		return progressLine{}
	}
	return j.lines[len(j.lines)-1]
}

// since returns the progress lines read at or after t.
func (j *job) since(t time.Time) []progressLine {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []progressLine
	for _, p := range j.lines {
		if !p.At.Before(t) {
			out = append(out, p)
		}
	}
	return out
}

// errorLines is the number of ERROR lines the launcher logged, and the first.
func (j *job) errorLines() (int, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.errLines, j.firstErr
}

// exited reports whether the launcher has stopped, with its output.
func (j *job) exited() error {
	select {
	case <-j.done:
		return fmt.Errorf("the launcher exited (%v)\nstdout:\n%s\nstderr (tail):\n%s", j.err, j.stdout.String(), j.stderr.String())
	default:
		return nil
	}
}

// waitProgress waits until cond holds for the latest progress line, the
// launcher exits, ctx ends or within passes. why describes what was awaited.
func (j *job) waitProgress(ctx context.Context, within time.Duration, why string, cond func(progressLine) bool) (progressLine, error) {
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		j.mu.Lock()
		ch := j.changed
		j.mu.Unlock()
		p := j.last()
		if cond(p) {
			return p, nil
		}
		if err := j.exited(); err != nil {
			return p, fmt.Errorf("waiting for %s: %w", why, err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return p, ctx.Err()
		case <-deadline.C:
			return p, fmt.Errorf("no %s within %v (last progress: read %d, written %d, bigquery %d, dead-lettered %d)",
				why, within, p.Read, p.Written, p.BigQuery, p.Dead)
		}
	}
}

// stop sends SIGTERM to the launcher (by its pid) and waits for it to
// exit; after 30s it kills it. It returns the launcher's summary (stdout).
func (j *job) stop() (string, error) {
	var err error
	j.stopOnce.Do(func() {
		select {
		case <-j.done:
		default:
			_ = j.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-j.done:
			case <-time.After(30 * time.Second):
				_ = j.cmd.Process.Kill()
				<-j.done
				err = errors.New("the launcher did not exit within 30s of SIGTERM: killed")
			}
		}
		if err == nil && j.err != nil {
			err = fmt.Errorf("the launcher exited with %v\nstderr (tail):\n%s", j.err, j.stderr.String())
		}
	})
	return strings.TrimSpace(j.stdout.String()), err
}

// tailBuffer keeps the last 64 KiB written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 64 << 10

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > tailMax {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
