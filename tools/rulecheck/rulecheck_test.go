package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRenderedRules: the chart's rules as rendered (ISVC_RULES_DIR, written by tests/module/test_alert_rules.py
// or by hand from `helm template ... --api-versions monitoring.coreos.com/v1/PrometheusRule`) load and pass
// every case.
func TestRenderedRules(t *testing.T) {
	dir := os.Getenv("ISVC_RULES_DIR")
	if dir == "" {
		t.Fatal("set ISVC_RULES_DIR to the rendered rule files (module/README.md, Alert rules)")
	}
	files, err := RuleFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	alerts, errs := Parse(files)
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	for _, err := range Coverage(alerts, cases) {
		t.Error(err)
	}
	for _, c := range cases {
		t.Run(c.Alert+"/"+c.Name, func(t *testing.T) {
			if err := Run(files, c); err != nil {
				t.Error(err)
			}
		})
	}
}

// The checker itself can fail: a rule that fires too early, a broken expression, a broken template and a
// rule without cases are each reported.

const orders = `groups:
  - name: t
    rules:
      - alert: D8IsvcOrdersNotReady
        expr: sum by (phase, reason) (isvc_orders{phase!="Ready"}) > 0
        for: FOR
        annotations:
          summary: "{{ $value }} inference services have been {{ $labels.phase }} with reason {{ $labels.reason }} for 30 minutes."
`

func write(t *testing.T, text string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{path}
}

func caseNamed(t *testing.T, name string) Case {
	t.Helper()
	for _, c := range cases {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no case %q", name)
	return Case{}
}

func TestTheCasesTellA30MinuteForFromOthers(t *testing.T) {
	fires := caseNamed(t, "an order Pending with NoCapacity for 31 minutes fires")
	quiet := caseNamed(t, "an order Pending with NoCapacity for 29 minutes, then Ready, stays quiet")
	// for: → whether the firing case and the quiet case pass
	for forValue, want := range map[string][2]bool{"30m": {true, true}, "25m": {true, false}, "35m": {false, true}} {
		files := write(t, strings.Replace(orders, "FOR", forValue, 1))
		if got := Run(files, fires) == nil; got != want[0] {
			t.Errorf("for: %s: the 31-minute case passes=%v, want %v", forValue, got, want[0])
		}
		if got := Run(files, quiet) == nil; got != want[1] {
			t.Errorf("for: %s: the 29-minute case passes=%v, want %v", forValue, got, want[1])
		}
	}
}

func TestABrokenExpressionOrTemplateDoesNotLoad(t *testing.T) {
	for name, text := range map[string]string{
		"expression": strings.Replace(strings.Replace(orders, "FOR", "30m", 1), "> 0", "> 0)", 1),
		"template":   strings.Replace(strings.Replace(orders, "FOR", "30m", 1), "{{ $value }}", "{{ $value | nosuchfunc }}", 1),
		"label name": strings.Replace(orders, "for: FOR", "for: 30m\n        labels:\n          bad-name: x", 1),
	} {
		_, errs := Parse(write(t, text))
		if len(errs) == 0 {
			t.Errorf("a broken %s loads", name)
		}
		t.Logf("%s: %v", name, errs)
	}
}

func TestEveryAlertNeedsAFiringAndAQuietCase(t *testing.T) {
	alerts, errs := Parse(write(t, strings.Replace(orders, "FOR", "30m", 1)))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	only := []Case{{Name: "fires", Alert: "D8IsvcOrdersNotReady", At: time.Minute, Firing: []map[string]string{{}}}}
	if len(Coverage(alerts, only)) != 1 {
		t.Errorf("an alert without a quiet case passes: %v", Coverage(alerts, only))
	}
	if len(Coverage(alerts, cases)) == 0 {
		t.Error("cases naming alerts the file lacks pass")
	}
}
