package config

import (
	"path/filepath"
	"testing"
)

// pinningProblems are the TestProblems cases of pinning and description_scan.
var pinningProblems = func() []problemCase {
	const stdio = "mcpServers:\n  orders:\n    command: orders\n"
	return []problemCase{
		{"unknown pinning mode", "pinning:\n  mode: on\n", nil, 2, "pinning.mode", `expected one of off, tofu, strict, got "on"`},
		{"pinning mode a boolean", "pinning:\n  mode: false\n", nil, 2, "pinning.mode", `expected a string, got the boolean false`},
		{"misspelt pinning mode", "pinning: {mode: TOFU}\n", nil, 1, "pinning.mode", `expected one of off, tofu, strict, got "TOFU"`},
		{"unknown pinning key", "pinning: {lockfile: x.json}\n", nil, 1, "pinning.lockfile", "unknown key; allowed keys here: file, mode"},
		{"pinning not a mapping", "pinning: strict\n", nil, 1, "pinning", `expected a mapping with keys file, mode, got the string "strict"`},
		{"pinning file a directory", "pinning: {file: \"pins/\"}\n", nil, 1, "pinning.file", `expected a file, got the directory "pins/"`},
		{"pinning file with spaces", "pinning: {file: \" pins.json\"}\n", nil, 1, "pinning.file", "without leading or trailing spaces"},
		{"pinning file not a string", "pinning: {file: [a]}\n", nil, 1, "pinning.file", "expected a string, got a list"},
		{"unknown description_scan", "description_scan: block\n", nil, 1, "description_scan", `expected one of off, strip, quarantine, got "block"`},
		{"description_scan as a boolean", "description_scan: true\n", nil, 1, "description_scan", "expected a string, got the boolean true"},
		{"description_scan under limits", "limits: {description_scan: strip}\n", nil, 1, "limits.description_scan", "unknown key"},
		{"server description_scan", stdio + "    description_scan: Strip\n", nil, 4, "mcpServers.orders.description_scan",
			`expected one of off, strip, quarantine, got "Strip"`},
	}
}()

func TestPinningSettings(t *testing.T) {
	tests := []struct {
		name              string
		src               string
		mode, path        string
		scanA, scanB, any string
	}{
		{"defaults", "", "tofu", "/srv/tg/toolgate.pins.json", "strip", "strip", "strip"},
		{"relative file", "pinning: {mode: strict, file: state/pins.json}\n", "strict", "/srv/tg/state/pins.json", "strip", "strip", "strip"},
		{"absolute file, unquoted off", "pinning: {mode: off, file: /var/lib/tg/pins.json}\n", "off", "/var/lib/tg/pins.json", "strip", "strip", "strip"},
		{"variable in file", "pinning: {file: \"${STATE}/pins.json\"}\n", "tofu", "/state/pins.json", "strip", "strip", "strip"},
		{"scan gateway-wide and per server",
			"description_scan: quarantine\nmcpServers:\n  a: {command: a, description_scan: off}\n  b: {command: b}\n",
			"tofu", "/srv/tg/toolgate.pins.json", "off", "quarantine", "quarantine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("/srv/tg/toolgate.yaml", []byte(tt.src), envOf(map[string]string{"STATE": "/state"}))
			if err != nil {
				t.Fatal(err)
			}
			got := []string{c.PinningMode(), c.PinsPath(), c.DescriptionScanMode("a"), c.DescriptionScanMode("b"), c.DescriptionScanMode("nope")}
			want := []string{tt.mode, filepath.FromSlash(tt.path), tt.scanA, tt.scanB, tt.any}
			for i := range got {
				if got[i] != want[i] {
					t.Errorf("got %v, want %v", got, want)
					break
				}
			}
		})
	}
}
