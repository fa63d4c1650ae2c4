package doctest

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeNotRun are the only README commands make doctest does not run,
// each with why. The README names each of them where it says what
// make doctest runs.
var readmeNotRun = map[string]string{
	"make test":           "it runs every test, make doctest among them",
	"make stream":         "it runs until Ctrl-C",
	"make stop-emulators": "it would stop the emulators of the reader's own make run",
}

// shellInfos are the info strings of fenced blocks that hold commands.
var shellInfos = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true, "zsh": true}

// TestREADMECommandsAreRun fails when the README shows a shell command
// that make doctest does not run: every shell block must be a
// "sh doctest" block, or hold only commands of readmeNotRun; a command in
// the text (`go run …`, `go test …`, `bq …`) must be one a doctest block
// runs, and `make X` must name a target of the Makefile.
func TestREADMECommandsAreRun(t *testing.T) {
	f, err := os.Open("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	var (
		lineNo  int
		inFence bool
		fence   string
		words   []string
		start   int
		body    []string
		run     int
		prose   strings.Builder
		ran     = map[string]bool{}
	)
	for sc.Scan() {
		lineNo++
		trimmed := strings.TrimSpace(sc.Text())
		if !inFence {
			if strings.HasPrefix(trimmed, "```") {
				inFence, fence, start, body = true, fenceOf(trimmed), lineNo, nil
				words = strings.Fields(strings.TrimLeft(trimmed, "`"))
				continue
			}
			prose.WriteString(sc.Text() + "\n")
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`") == "" {
			inFence = false
			if len(words) == 0 || !shellInfos[words[0]] {
				continue
			}
			if len(words) >= 2 && words[1] == "doctest" {
				run++
				for _, cmd := range commands(body) {
					ran[cmd] = true
				}
				continue
			}
			for _, cmd := range commands(body) {
				if _, ok := readmeNotRun[cmd]; !ok {
					t.Errorf("README.md:%d: %q is shown in a block make doctest does not run: mark the block ```sh doctest (with real files in place of placeholders), or, if it cannot run here, add it to readmeNotRun with why and name it in the README", start, cmd)
				}
			}
			continue
		}
		body = append(body, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if run == 0 {
		t.Error("README.md has no ```sh doctest block")
	}
	targets := makeTargets(t)
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(prose.String(), -1) {
		cmd := strings.Join(strings.Fields(m[1]), " ")
		switch {
		case strings.HasPrefix(cmd, "make "):
			if !targets[strings.TrimPrefix(cmd, "make ")] {
				t.Errorf("README.md names %q, which is not a target of the Makefile", cmd)
			}
		case strings.HasPrefix(cmd, "go run ") || strings.HasPrefix(cmd, "go test ") || strings.HasPrefix(cmd, "bq "):
			if !ran[cmd] {
				t.Errorf("README.md shows %q in its text, which no ```sh doctest block runs: show it in one", cmd)
			}
		}
	}
	for cmd, why := range readmeNotRun {
		if !strings.Contains(string(readme), "`"+cmd+"`") {
			t.Errorf("README.md does not name `%s` among the commands make doctest does not run (%s)", cmd, why)
		}
	}
}

// commands returns a shell block's commands: lines joined at a trailing
// backslash, without comments and blank lines.
func commands(lines []string) []string {
	var out []string
	cur := ""
	for _, l := range lines {
		l = strings.TrimSpace(l)
		if cur == "" && (l == "" || strings.HasPrefix(l, "#")) {
			continue
		}
		if c, ok := strings.CutSuffix(l, "\\"); ok {
			cur += strings.TrimSpace(c) + " "
			continue
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		out = append(out, cur+l)
		cur = ""
	}
	if cur != "" {
		out = append(out, strings.TrimSpace(cur))
	}
	return out
}

// makeTargets are the Makefile's targets.
func makeTargets(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	targets := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z-]*):([^=]|$)`).FindAllStringSubmatch(string(b), -1) {
		targets[m[1]] = true
	}
	return targets
}
