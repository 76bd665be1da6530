package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/common/promslog"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
)

// The group interval and the step the rules are evaluated at: Prometheus's default evaluation interval.
const interval = time.Minute

// Legacy label names are what every Prometheus accepts, also one older than 3.0.
const nameScheme = model.LegacyValidation

// The parser Prometheus loads rules with when no feature flag is given.
var promqlParser = parser.NewParser(parser.Options{})

func nopLogger() *slog.Logger { return promslog.NewNopLogger() }

// RuleFiles lists the *.yaml and *.yml files in dir (or dir itself when it is a file).
func RuleFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml"} {
		found, err := filepath.Glob(filepath.Join(path, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, found...)
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no rule files (*.yaml, *.yml)", path)
	}
	return files, nil
}

// Parse loads each file as Prometheus does on load, with model/rulefmt: unknown fields, PromQL expressions,
// label and annotation names, and annotation templates. It returns the alerting rules by name.
func Parse(files []string) (map[string]rulefmt.Rule, []error) {
	alerts := map[string]rulefmt.Rule{}
	var errs []error
	for _, file := range files {
		groups, fileErrs := rulefmt.ParseFile(file, false, nameScheme, promqlParser, nopLogger())
		errs = append(errs, fileErrs...)
		if groups == nil {
			continue
		}
		if len(groups.Groups) == 0 {
			errs = append(errs, fmt.Errorf("%s: no rule groups", file))
		}
		for _, group := range groups.Groups {
			for _, rule := range group.Rules {
				if rule.Alert == "" {
					continue
				}
				if _, dup := alerts[rule.Alert]; dup {
					errs = append(errs, fmt.Errorf("%s: alert %s is defined twice", file, rule.Alert))
				}
				alerts[rule.Alert] = rule
			}
		}
	}
	return alerts, errs
}

// Case is one scenario: series loaded as promtool's input_series are (a 1-minute `load`), the rules evaluated
// every minute from 0 to At, and the alert's firing instances compared at At.
type Case struct {
	Name   string
	Alert  string
	Series []string
	At     time.Duration
	// Firing: the label sets the expression gives each firing instance (the rule's own labels and alertname
	// are added by Prometheus and left out here). Empty means quiet: the alert must not fire at any step.
	Firing []map[string]string
	// Annotations the first firing instance must carry, as expanded by Prometheus's templates.
	Annotations map[string]string
}

// Run evaluates the rule files over the case's series with Prometheus's rules manager and PromQL engine, as
// `promtool test rules` does, and says how the outcome differs from the case's expectation.
func Run(files []string, c Case) (err error) {
	load := "load 1m\n"
	for _, s := range c.Series {
		load += "  " + s + "\n"
	}
	suite, err := promqltest.NewLazyLoader(load, promqltest.LazyLoaderOpts{
		EnableAtModifier: true, EnableNegativeOffset: true, Parser: promqlParser,
	})
	if err != nil {
		return fmt.Errorf("series: %w", err)
	}
	defer func() { err = errors.Join(err, suite.Close()) }()
	suite.SubqueryInterval = interval

	manager := rules.NewManager(&rules.ManagerOptions{
		QueryFunc:            rules.EngineQueryFunc(suite.QueryEngine(), suite.Storage()),
		AppendableV2:         suite.Storage(),
		Queryable:            suite.Storage(),
		Context:              context.Background(),
		NotifyFunc:           func(context.Context, string, ...*rules.Alert) {},
		Logger:               nopLogger(),
		NameValidationScheme: nameScheme,
		Parser:               promqlParser,
	})
	groupsByKey, errs := manager.LoadGroups(interval, labels.EmptyLabels(), "", nil, false, files...)
	if len(errs) > 0 {
		return fmt.Errorf("loading the rules: %w", errors.Join(errs...))
	}
	keys := slices.Sorted(maps.Keys(groupsByKey))
	var rule *rules.AlertingRule
	for _, key := range keys {
		for _, r := range groupsByKey[key].Rules() {
			if ar, ok := r.(*rules.AlertingRule); ok {
				ar.SetRestored(true) // as promtool does: a fresh Prometheus, not one restoring `for` state
				if ar.Name() == c.Alert {
					rule = ar
				}
			}
		}
	}
	if rule == nil {
		return fmt.Errorf("no alerting rule %s in the rule files", c.Alert)
	}

	start := time.Unix(0, 0).UTC()
	for ts := start; !ts.After(start.Add(c.At)); ts = ts.Add(interval) {
		var evalErr error
		suite.WithSamplesTill(ts, func(err error) {
			if err != nil {
				evalErr = err
				return
			}
			for _, key := range keys {
				group := groupsByKey[key]
				group.Eval(suite.Context(), ts)
				for _, r := range group.Rules() {
					if r.LastError() != nil {
						evalErr = errors.Join(evalErr, fmt.Errorf("rule %s at %s: %w", r.Name(), ts.Sub(start), r.LastError()))
					}
				}
			}
		})
		if evalErr != nil {
			return evalErr
		}
		firing := firingAlerts(rule)
		for _, a := range firing {
			var broken error
			a.Annotations.Range(func(l labels.Label) {
				if strings.Contains(l.Value, "error expanding template") {
					broken = fmt.Errorf("at %s annotation %s: %s", ts.Sub(start), l.Name, l.Value)
				}
			})
			if broken != nil {
				return broken
			}
		}
		if len(c.Firing) == 0 && len(firing) > 0 {
			return fmt.Errorf("fires at %s, expected to stay quiet until %s: %s", ts.Sub(start), c.At, describe(rule, firing))
		}
		if ts.Equal(start.Add(c.At)) && len(c.Firing) > 0 {
			return compare(rule, firing, c)
		}
	}
	return nil
}

func firingAlerts(rule *rules.AlertingRule) []*rules.Alert {
	var firing []*rules.Alert
	for _, a := range rule.ActiveAlerts() {
		if a.State == rules.StateFiring {
			firing = append(firing, a)
		}
	}
	return firing
}

// exprLabels: an instance's labels less alertname and the labels the rule itself sets.
func exprLabels(rule *rules.AlertingRule, a *rules.Alert) string {
	b := labels.NewBuilder(a.Labels)
	b.Del(labels.AlertName)
	rule.Labels().Range(func(l labels.Label) { b.Del(l.Name) })
	return b.Labels().String()
}

func describe(rule *rules.AlertingRule, firing []*rules.Alert) string {
	got := make([]string, 0, len(firing))
	for _, a := range firing {
		got = append(got, exprLabels(rule, a))
	}
	sort.Strings(got)
	if len(got) == 0 {
		return "nothing fires"
	}
	return strings.Join(got, ", ")
}

func compare(rule *rules.AlertingRule, firing []*rules.Alert, c Case) error {
	want := make([]string, 0, len(c.Firing))
	for _, l := range c.Firing {
		want = append(want, labels.FromMap(l).String())
	}
	sort.Strings(want)
	got := describe(rule, firing)
	if strings.Join(want, ", ") != got {
		return fmt.Errorf("at %s expected firing %s, got %s", c.At, strings.Join(want, ", "), got)
	}
	if len(c.Annotations) > 0 {
		sort.Slice(firing, func(i, j int) bool { return exprLabels(rule, firing[i]) < exprLabels(rule, firing[j]) })
		for name, value := range c.Annotations {
			if got := firing[0].Annotations.Get(name); got != value {
				return fmt.Errorf("annotation %s: expected %q, got %q", name, value, got)
			}
		}
	}
	return nil
}

// Coverage: every alerting rule has a case that fires it and one that keeps it quiet, and every case names an
// alerting rule the files define.
func Coverage(alerts map[string]rulefmt.Rule, cases []Case) []error {
	fires, quiet := map[string]bool{}, map[string]bool{}
	var errs []error
	for _, c := range cases {
		if _, ok := alerts[c.Alert]; !ok {
			errs = append(errs, fmt.Errorf("case %q: no alerting rule %s in the rule files", c.Name, c.Alert))
		}
		if len(c.Firing) > 0 {
			fires[c.Alert] = true
		} else {
			quiet[c.Alert] = true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(alerts)) {
		if !fires[name] {
			errs = append(errs, fmt.Errorf("alert %s: no case makes it fire", name))
		}
		if !quiet[name] {
			errs = append(errs, fmt.Errorf("alert %s: no case keeps it quiet", name))
		}
	}
	return errs
}
