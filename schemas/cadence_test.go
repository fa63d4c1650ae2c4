package schemas

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestCadenceValidation(t *testing.T) {
	base := string(mustRead(t, "vitals"))
	tests := []struct {
		name, add, want string
	}{
		{"bad cadence", "cadence: often\n", "cadence"},
		{"zero cadence", "cadence: 0s\n", "cadence"},
		{"negative cadence", "cadence: -30s\n", "cadence"},
		{"both cadence and cadence_field", "cadence: 30s\ncadence_field: sensor_id\n", "cadence_field"},
		{"cadence_field naming no field", "cadence_field: interval\n", "cadence_field"},
		{"cadence_field of a bool", "cadence_field: timestamp\n", "cadence_field"},
		{"silent_after without cadence", "silent_after: 90s\n", "silent_after"},
		{"bad silent_after", "cadence: 30s\nsilent_after: soon\n", "silent_after"},
		{"non-positive silent_after", "cadence: 30s\nsilent_after: 0s\n", "silent_after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseSpec("vitals.yaml", []byte(base+tt.add))
			if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), tt.want+":") || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v; want a one-line spec error at %s", err, tt.want)
			}
		})
	}
	for _, ok := range []string{"cadence: 30s\n", "cadence: 30s\nsilent_after: 2m\n", "cadence_field: sensor_id\nsilent_after: 2m\n"} {
		s, err := ParseSpec("vitals.yaml", []byte(base+ok))
		if err != nil {
			t.Errorf("%q: %v", ok, err)
			continue
		}
		if !s.HasCadence() {
			t.Errorf("%q: no cadence", ok)
		}
	}
	s, _ := ParseSpec("vitals.yaml", []byte(base+"cadence: 30s\n"))
	if s.CadenceDuration() != 30*time.Second {
		t.Errorf("cadence %v; want 30s", s.CadenceDuration())
	}
}

// mustRead is the YAML of a built-in spec.
func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := BuiltinSpecs.ReadFile("specs/" + name + ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	return b
}
