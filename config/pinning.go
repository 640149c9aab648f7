package config

import (
	"slices"
	"strings"
)

// The values of pinning.mode.
const (
	PinningOff    = "off"    // pin nothing
	PinningTOFU   = "tofu"   // record a tool on first sight; a later change blocks it until approved
	PinningStrict = "strict" // every tool needs an approval before it can be called
)

// The values of description_scan.
const (
	ScanOff        = "off"        // no scan (titles and descriptions are still sanitised as before)
	ScanStrip      = "strip"      // remove hidden characters; instruction-like text is flagged and kept
	ScanQuarantine = "quarantine" // a tool with any finding is quarantined
)

var (
	pinningModes = []string{PinningOff, PinningTOFU, PinningStrict}
	scanModes    = []string{ScanOff, ScanStrip, ScanQuarantine}
)

func (l *loader) checkPinning(x *Pinning) {
	l.checkOneOf("pinning.mode", x.Mode, pinningModes)
	if x.File != "" && strings.TrimSpace(x.File) != x.File {
		l.reportAt("pinning.file", "expected a file path without leading or trailing spaces, got %q", x.File)
	}
	if strings.HasSuffix(x.File, "/") {
		l.reportAt("pinning.file", "expected a file, got the directory %q", x.File)
	}
}

func (l *loader) checkDescriptionScan(path, v string) {
	l.checkOneOf(path, v, scanModes)
}

// checkOneOf reports a non-empty value that is not one of the allowed words; "" means the default.
func (l *loader) checkOneOf(path, v string, allowed []string) {
	if v != "" && !l.bad[path] && !slices.Contains(allowed, v) {
		l.reportAt(path, "expected one of %s, got %q", strings.Join(allowed, ", "), v)
	}
}
