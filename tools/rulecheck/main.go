// isvc-rulecheck loads the module's rendered alert rules with Prometheus's own packages and evaluates them
// over test series with Prometheus's rules manager and PromQL engine, as `promtool check rules` and
// `promtool test rules` would, without promtool's service-discovery dependencies.
//
//	isvc-rulecheck -rules DIR   # DIR: one file per PrometheusRule, holding its spec (`groups:`)
//
// The rules are read from -rules, else $ISVC_RULES_DIR. The cases are in cases.go; every alerting rule needs
// one that fires it and one that keeps it quiet. Exit status 1 when a file does not load or a case fails.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	dir := flag.String("rules", os.Getenv("ISVC_RULES_DIR"), "rule files, or a directory of them (default $ISVC_RULES_DIR)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "isvc-rulecheck: give -rules DIR or ISVC_RULES_DIR")
		os.Exit(2)
	}
	if !check(*dir) {
		os.Exit(1)
	}
}

// check prints one line per rule file and per case, and says whether all of them passed.
func check(dir string) bool {
	files, err := RuleFiles(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL", err)
		return false
	}
	alerts, errs := Parse(files)
	for _, err := range errs {
		fmt.Println("FAIL parse:", err)
	}
	if len(errs) > 0 {
		return false
	}
	fmt.Printf("ok   parse: %d files, %d alerting rules (model/rulefmt)\n", len(files), len(alerts))
	ok := true
	for _, err := range Coverage(alerts, cases) {
		fmt.Println("FAIL coverage:", err)
		ok = false
	}
	for _, c := range cases {
		if err := Run(files, c); err != nil {
			fmt.Printf("FAIL %s: %s: %v\n", c.Alert, c.Name, err)
			ok = false
		} else {
			fmt.Printf("ok   %s: %s\n", c.Alert, c.Name)
		}
	}
	return ok
}
