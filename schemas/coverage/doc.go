// Package coverage is what a spec's cadence says about its sensors: the interval a reading declares (CadenceOf), how complete one identity's hour is against it (Coverage, HourCoverage, the rollups' coverage columns), and the inventory table's columns of when each sensor was first and last seen.
package coverage
