// Package doctest finds the runnable examples in the project's Markdown
// documentation, so that a test can run them as a reader would.
//
// A runnable example is a fenced block whose info string is "sh doctest":
//
//	```sh doctest
//	go run ./launch/keys lint --spec vitals
//	```
//
// "sh doctest exit=N" expects the block to exit with N instead of 0. A
// block fenced "output" right after a runnable one (blank lines between are
// allowed) is the output the reader should see: each of its non-empty lines
// must match a line of the block's output (stdout and stderr together), in
// order. "…" in an expected line matches any text, so a line can show what
// is stable and elide the rest (a duration, a date). An output block shows
// either every line the block prints or, when it holds a line that is only
// "…" (or "..."), an excerpt: the reader sees where lines are left out, and
// other output lines may come between the shown ones. Lines of the go
// command fetching modules ("go: downloading …") are not the example's
// output and are not counted. Other fenced blocks are shown, not run.
package doctest

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Block is one runnable example.
type Block struct {
	// File is the Markdown file and Line the line of the opening fence.
	File string
	Line int
	// Script is the block's text, run by bash.
	Script string
	// Exit is the exit code the block should end with.
	Exit int
	// Output holds the expected output lines (empty lines and "…" lines
	// dropped); nil when the docs show none.
	Output []string
	// Excerpt is set when the output block marks lines left out with a
	// "…" line; otherwise it shows the whole output.
	Excerpt bool
}

// Extract returns the runnable blocks of one Markdown document.
func Extract(file string, r io.Reader) ([]Block, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var (
		blocks  []Block
		lineNo  int
		inFence bool
		fence   string
		info    string
		start   int
		body    []string
		// last is the index of the last runnable block while only blank
		// lines followed it, for its output block; -1 otherwise.
		last = -1
	)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if !inFence {
			if strings.HasPrefix(trimmed, "```") {
				inFence, fence, start, body = true, fenceOf(trimmed), lineNo, nil
				info = strings.TrimSpace(strings.TrimLeft(trimmed, "`"))
				continue
			}
			if trimmed != "" {
				last = -1
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`") == "" {
			inFence = false
			words := strings.Fields(info)
			switch {
			case len(words) >= 2 && words[0] == "sh" && words[1] == "doctest":
				b := Block{File: file, Line: start, Script: strings.Join(body, "\n") + "\n"}
				for _, w := range words[2:] {
					v, ok := strings.CutPrefix(w, "exit=")
					n, err := strconv.Atoi(v)
					if !ok || err != nil {
						return nil, fmt.Errorf("%s:%d: unknown doctest option %q (use exit=N)", file, start, w)
					}
					b.Exit = n
				}
				blocks = append(blocks, b)
				last = len(blocks) - 1
			case len(words) == 1 && words[0] == "output" && last >= 0:
				var want []string
				for _, l := range body {
					switch strings.TrimSpace(l) {
					case "":
					case "…", "...":
						blocks[last].Excerpt = true
					default:
						want = append(want, l)
					}
				}
				if want == nil {
					want = []string{}
				}
				blocks[last].Output = want
				last = -1
			default:
				last = -1
			}
			continue
		}
		body = append(body, line)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if inFence {
		return nil, fmt.Errorf("%s:%d: fenced block never closed", file, start)
	}
	return blocks, nil
}

// fenceOf is the run of backticks that opens a fence.
func fenceOf(line string) string {
	n := len(line) - len(strings.TrimLeft(line, "`"))
	return line[:n]
}

// Match reports whether every expected line matches a line of got, in
// order. It returns the first expected line that found no match.
func Match(want []string, got string) (missing string, ok bool) {
	lines := strings.Split(got, "\n")
	i := 0
	for _, w := range want {
		found := false
		for ; i < len(lines); i++ {
			if lineMatches(strings.TrimSpace(w), lines[i]) {
				found = true
				i++
				break
			}
		}
		if !found {
			return w, false
		}
	}
	return "", true
}

// OutputLines returns the lines of got an output block accounts for: the
// non-empty ones, without the go command's module downloads.
func OutputLines(got string) []string {
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "go: downloading ") {
			continue
		}
		lines = append(lines, l)
	}
	return lines
}

// lineMatches reports whether line holds pattern's parts, split at "…",
// in order; a pattern without "…" must equal the line (spaces at the ends
// aside).
func lineMatches(pattern, line string) bool {
	line = strings.TrimSpace(line)
	parts := strings.Split(pattern, "…")
	if len(parts) == 1 {
		return line == pattern
	}
	if !strings.HasPrefix(line, parts[0]) {
		return false
	}
	line = line[len(parts[0]):]
	for j, p := range parts[1:] {
		if j == len(parts)-2 {
			return strings.HasSuffix(line, p) && len(line) >= len(p)
		}
		k := strings.Index(line, p)
		if k < 0 {
			return false
		}
		line = line[k+len(p):]
	}
	return true
}
