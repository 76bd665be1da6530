{{- $ns := include "isvc_namespace" . }}
- name: isvc.planner
  rules:
    - alert: D8IsvcPlannerTargetDown
      expr: max by (job) (up{job="isvc-planner-metrics", namespace="{{ $ns }}"}) == 0
      for: 5m
      labels:
        severity_level: "5"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: Prometheus cannot scrape the isvc planner; new orders cannot be planned.
        description: |
          Orders wait with reason PlannerRequestFailed while the planner is down.
          1. Check the pod: `kubectl -n {{ $ns }} get pods -l app=isvc-planner`
          2. Read the logs: `kubectl -n {{ $ns }} logs deploy/isvc-planner -c planner`

    - alert: D8IsvcPlannerTargetAbsent
      expr: absent(up{job="isvc-planner-metrics", namespace="{{ $ns }}"}) == 1
      for: 15m
      labels:
        severity_level: "5"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: There is no isvc planner target in Prometheus.
        description: |
          The planner Deployment or its metrics Service is gone, or the ServiceMonitor does not select it.
          1. Check the Deployment: `kubectl -n {{ $ns }} get deploy isvc-planner`
          2. Check the Service and the ServiceMonitor: `kubectl -n {{ $ns }} get svc,servicemonitor -l module=isvc`

    - alert: D8IsvcPlannerInventoryNotSynced
      expr: max(isvc_planner_inventory_synced{namespace="{{ $ns }}"}) == 0
      for: 10m
      labels:
        severity_level: "5"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: The isvc planner has not listed the cluster's devices; it answers no plan.
        description: |
          The planner lists Nodes, ResourceSlices, DeviceClasses and ResourceClaims before it plans. It has
          not finished for 10 minutes: it may lack a permission or the DRA API may not be served.
          1. Read the logs: `kubectl -n {{ $ns }} logs deploy/isvc-planner -c planner`
          2. Check the DRA API: `kubectl api-resources --api-group=resource.k8s.io`

    - alert: D8IsvcPlannerRefusingMostRequests
      expr: |
        (
          sum(rate(isvc_planner_plans_total{outcome="Refused", namespace="{{ $ns }}"}[15m]))
            / sum(rate(isvc_planner_plans_total{namespace="{{ $ns }}"}[15m])) > 0.5
        )
        and sum(increase(isvc_planner_plans_total{namespace="{{ $ns }}"}[15m])) >= 10
      for: 15m
      labels:
        severity_level: "6"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: The isvc planner refuses more than half of the plans it is asked for.
        description: |
          Most orders find no placement. The refusal reasons tell why (the dashboard "Inference services"
          shows them): `sum by (reason) (rate(isvc_planner_plans_total{outcome="Refused"}[15m]))`.
          NoCapacity means the allowed devices are full (add devices or widen the classes' selectors);
          NoAcceleratorWithEnoughMemory means the models ordered are larger than any allowed device.
