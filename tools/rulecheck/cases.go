package main

import "time"

// The namespace the chart renders the rules for by default (isvc.namespace).
const ns = `namespace="d8-isvc"`

const (
	controllerUp = `up{job="isvc-controller-metrics",` + ns + `}`
	plannerUp    = `up{job="isvc-planner-metrics",` + ns + `}`
	cacheFull    = `isvc_model_cache_downloads_total{result="Full",` + ns + `}`
)

// Series notation is promtool's and promqltest's, one sample a minute from 0: `1x30` is 1 at 0..30m (31
// samples), `0+3x30` counts up by 3 a minute, `_x15` leaves 0..14m without samples.
// Each quiet case stops a step short of the `for`, so a shorter `for` makes it fire.
var cases = []Case{
	// Orders stuck out of Ready (for: 30m), one alert per phase and reason.
	{
		Name:   "an order Pending with NoCapacity for 31 minutes fires",
		Alert:  "D8IsvcOrdersNotReady",
		Series: []string{`isvc_orders{phase="Pending",reason="NoCapacity",` + ns + `} 1x31`},
		At:     31 * time.Minute,
		Firing: []map[string]string{{"phase": "Pending", "reason": "NoCapacity"}},
		Annotations: map[string]string{
			"summary": "1 inference services have been Pending with reason NoCapacity for 30 minutes.",
		},
	},
	{
		Name:   "an order Pending with NoCapacity for 29 minutes, then Ready, stays quiet",
		Alert:  "D8IsvcOrdersNotReady",
		Series: []string{`isvc_orders{phase="Pending",reason="NoCapacity",` + ns + `} 1x29 0x10`},
		At:     40 * time.Minute,
	},
	{
		Name:  "two reasons held 31 minutes fire one alert each; Ready orders do not count",
		Alert: "D8IsvcOrdersNotReady",
		Series: []string{
			`isvc_orders{phase="Pending",reason="NoCapacity",` + ns + `} 2x31`,
			`isvc_orders{phase="Failed",reason="NoAcceleratorWithEnoughMemory",` + ns + `} 1x31`,
			`isvc_orders{phase="Ready",reason="",` + ns + `} 5x31`,
		},
		At: 31 * time.Minute,
		Firing: []map[string]string{
			{"phase": "Pending", "reason": "NoCapacity"},
			{"phase": "Failed", "reason": "NoAcceleratorWithEnoughMemory"},
		},
	},
	{
		Name:   "Ready orders for an hour stay quiet",
		Alert:  "D8IsvcOrdersNotReady",
		Series: []string{`isvc_orders{phase="Ready",reason="",` + ns + `} 3x60`},
		At:     60 * time.Minute,
	},

	// The controller's target (down: for 5m; absent: for 15m).
	{
		Name:   "the controller down for 6 minutes fires",
		Alert:  "D8IsvcControllerTargetDown",
		Series: []string{controllerUp + ` 0x6`},
		At:     6 * time.Minute,
		Firing: []map[string]string{{"job": "isvc-controller-metrics"}},
	},
	{
		Name:   "the controller down for 4 minutes, then up, stays quiet",
		Alert:  "D8IsvcControllerTargetDown",
		Series: []string{controllerUp + ` 0x4 1x10`},
		At:     14 * time.Minute,
	},
	{
		Name:  "one controller replica of two down stays quiet",
		Alert: "D8IsvcControllerTargetDown",
		Series: []string{
			`up{job="isvc-controller-metrics",` + ns + `,instance="a"} 0x20`,
			`up{job="isvc-controller-metrics",` + ns + `,instance="b"} 1x20`,
		},
		At: 20 * time.Minute,
	},
	{
		Name:   "no controller target for 16 minutes fires",
		Alert:  "D8IsvcControllerTargetAbsent",
		Series: []string{plannerUp + ` 1x16`},
		At:     16 * time.Minute,
		Firing: []map[string]string{{"job": "isvc-controller-metrics", "namespace": "d8-isvc"}},
	},
	{
		Name:   "no controller target for 14 minutes, then one, stays quiet",
		Alert:  "D8IsvcControllerTargetAbsent",
		Series: []string{plannerUp + ` 1x30`, controllerUp + ` _x15 1x15`},
		At:     30 * time.Minute,
	},
	{
		Name:   "a controller target in another namespace does not count",
		Alert:  "D8IsvcControllerTargetAbsent",
		Series: []string{`up{job="isvc-controller-metrics",namespace="elsewhere"} 1x16`},
		At:     16 * time.Minute,
		Firing: []map[string]string{{"job": "isvc-controller-metrics", "namespace": "d8-isvc"}},
	},

	// Reconcile errors: more than a fifth of the passes of a kind fail, for 15m.
	{
		Name:  "3 failed order passes in 10 for 16 minutes fire",
		Alert: "D8IsvcReconcileErrors",
		Series: []string{
			`isvc_reconcile_total{kind="order",result="error",` + ns + `} 0+3x16`,
			`isvc_reconcile_total{kind="order",result="ok",` + ns + `} 0+7x16`,
			`isvc_reconcile_total{kind="class",result="ok",` + ns + `} 0+5x16`,
		},
		At:     16 * time.Minute,
		Firing: []map[string]string{{"kind": "order"}},
	},
	{
		// a rate needs two samples: the condition holds from 1m, 14 minutes at 15m
		Name:  "3 failed order passes in 10 for 15 minutes stay quiet",
		Alert: "D8IsvcReconcileErrors",
		Series: []string{
			`isvc_reconcile_total{kind="order",result="error",` + ns + `} 0+3x15`,
			`isvc_reconcile_total{kind="order",result="ok",` + ns + `} 0+7x15`,
		},
		At: 15 * time.Minute,
	},
	{
		Name:  "1 failed order pass in 10 for an hour stays quiet",
		Alert: "D8IsvcReconcileErrors",
		Series: []string{
			`isvc_reconcile_total{kind="order",result="error",` + ns + `} 0+1x60`,
			`isvc_reconcile_total{kind="order",result="ok",` + ns + `} 0+9x60`,
		},
		At: 60 * time.Minute,
	},

	// The planner's target, inventory, and refusals.
	{
		Name:   "the planner down for 6 minutes fires",
		Alert:  "D8IsvcPlannerTargetDown",
		Series: []string{plannerUp + ` 0x6`},
		At:     6 * time.Minute,
		Firing: []map[string]string{{"job": "isvc-planner-metrics"}},
	},
	{
		Name:   "the planner down for 4 minutes, then up, stays quiet",
		Alert:  "D8IsvcPlannerTargetDown",
		Series: []string{plannerUp + ` 0x4 1x10`},
		At:     14 * time.Minute,
	},
	{
		Name:   "no planner target for 16 minutes fires",
		Alert:  "D8IsvcPlannerTargetAbsent",
		Series: []string{controllerUp + ` 1x16`},
		At:     16 * time.Minute,
		Firing: []map[string]string{{"job": "isvc-planner-metrics", "namespace": "d8-isvc"}},
	},
	{
		Name:   "a planner target for 30 minutes stays quiet",
		Alert:  "D8IsvcPlannerTargetAbsent",
		Series: []string{plannerUp + ` 1x30`},
		At:     30 * time.Minute,
	},
	{
		Name:   "an inventory not synced for 11 minutes fires",
		Alert:  "D8IsvcPlannerInventoryNotSynced",
		Series: []string{`isvc_planner_inventory_synced{` + ns + `} 0x11`},
		At:     11 * time.Minute,
		Firing: []map[string]string{{}},
	},
	{
		Name:   "an inventory not synced for 9 minutes, then synced, stays quiet",
		Alert:  "D8IsvcPlannerInventoryNotSynced",
		Series: []string{`isvc_planner_inventory_synced{` + ns + `} 0x9 1x20`},
		At:     28 * time.Minute,
	},
	{
		Name:  "30 refusals in 40 plans a minute for 16 minutes fire",
		Alert: "D8IsvcPlannerRefusingMostRequests",
		Series: []string{
			`isvc_planner_plans_total{outcome="Refused",reason="NoCapacity",device_class="",` + ns + `} 0+30x16`,
			`isvc_planner_plans_total{outcome="Placed",reason="",device_class="gpu",` + ns + `} 0+10x16`,
		},
		At:     16 * time.Minute,
		Firing: []map[string]string{{}},
	},
	{
		Name:  "30 refusals in 40 plans a minute for 15 minutes stay quiet",
		Alert: "D8IsvcPlannerRefusingMostRequests",
		Series: []string{
			`isvc_planner_plans_total{outcome="Refused",reason="NoCapacity",device_class="",` + ns + `} 0+30x15`,
			`isvc_planner_plans_total{outcome="Placed",reason="",device_class="gpu",` + ns + `} 0+10x15`,
		},
		At: 15 * time.Minute,
	},
	{
		Name:  "1 refusal in 4 plans for an hour stays quiet",
		Alert: "D8IsvcPlannerRefusingMostRequests",
		Series: []string{
			`isvc_planner_plans_total{outcome="Refused",reason="NoCapacity",device_class="",` + ns + `} 0+1x60`,
			`isvc_planner_plans_total{outcome="Placed",reason="",device_class="gpu",` + ns + `} 0+3x60`,
		},
		At: 60 * time.Minute,
	},
	// The model cache had no room for a file (increase over 30m, for: 5m).
	{
		Name:   "a file refused for room fires 5 minutes later",
		Alert:  "D8IsvcModelCacheFull",
		Series: []string{cacheFull + ` 0x5 1x10`},
		At:     11 * time.Minute,
		Firing: []map[string]string{{"namespace": "d8-isvc"}},
	},
	{
		Name:   "a file refused for room 4 minutes ago stays quiet",
		Alert:  "D8IsvcModelCacheFull",
		Series: []string{cacheFull + ` 0x5 1x4`},
		At:     9 * time.Minute,
	},
	{
		Name:  "an hour of hits and misses and no refusal stays quiet",
		Alert: "D8IsvcModelCacheFull",
		Series: []string{
			cacheFull + ` 0x60`,
			`isvc_model_cache_downloads_total{result="Hit",` + ns + `} 0+20x60`,
			`isvc_model_cache_downloads_total{result="Miss",` + ns + `} 0+2x60`,
		},
		At: 60 * time.Minute,
	},
	{
		Name:  "every plan refused, but fewer than 10 in 15 minutes, stays quiet",
		Alert: "D8IsvcPlannerRefusingMostRequests",
		Series: []string{
			`isvc_planner_plans_total{outcome="Refused",reason="NoCapacity",device_class="",` + ns + `} 0+0.5x60`,
		},
		At: 60 * time.Minute,
	},
}
