package schemas

import (
	"time"
)

// HasCadence reports whether the spec declares how often its identities
// report (cadence or cadence_field): the rollups then carry coverage.
func (s *Spec) HasCadence() bool { return s.Cadence != "" || s.CadenceField != "" }

// CadenceDuration is the spec's declared cadence, or 0 when it declares
// none (or declares cadence_field instead). Call it on a validated spec.
func (s *Spec) CadenceDuration() time.Duration {
	d, err := time.ParseDuration(s.Cadence)
	if err != nil || d <= 0 {
		return 0
	}
	return d
}

// validateCadence checks cadence, cadence_field and silent_after: each
// duration positive, cadence and cadence_field not both, cadence_field a
// declared string or number field, silent_after only with a cadence.
func (s *Spec) validateCadence() error {
	if v := s.Cadence; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d < time.Millisecond {
			return s.Errorf("cadence", "%q is not a positive duration such as 30s (at least 1ms)", v)
		}
	}
	if s.Cadence != "" && s.CadenceField != "" {
		return s.Errorf("cadence_field", "set with cadence; declare the cadence once: cadence for every identity, or cadence_field for each reading's own")
	}
	if name := s.CadenceField; name != "" {
		f := s.Field(name)
		if f == nil {
			return s.Errorf("cadence_field", "%q is not a declared field; name the field that carries each reading's interval", name)
		}
		if f.Type != TypeString && f.Type != TypeInt && f.Type != TypeFloat {
			return s.Errorf("cadence_field", "%q is a %s field; the interval is a Go duration string or a number of seconds (string, int or float)", name, f.Type)
		}
	}
	if v := s.SilentAfter; v != "" {
		if d, err := time.ParseDuration(v); err != nil || d <= 0 {
			return s.Errorf("silent_after", "%q is not a positive duration such as 90s", v)
		}
		if !s.HasCadence() {
			return s.Errorf("silent_after", "set without a cadence; declare cadence (or cadence_field) too, or drop silent_after")
		}
	}
	if inv := s.Bigtable.Inventory; inv != "" {
		for _, t := range s.Bigtable.Tables {
			if t.Name == inv {
				return s.Errorf("bigtable.inventory", "%q is also a table of readings; give the inventory a table of its own", inv)
			}
		}
	}
	return nil
}
