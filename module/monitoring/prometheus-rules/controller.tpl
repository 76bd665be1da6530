{{- $ns := include "isvc_namespace" . }}
- name: isvc.controller
  rules:
    - alert: D8IsvcControllerTargetDown
      expr: max by (job) (up{job="isvc-controller-metrics", namespace="{{ $ns }}"}) == 0
      for: 5m
      labels:
        severity_level: "5"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: Prometheus cannot scrape the isvc controller; orders are not reconciled.
        description: |
          No controller replica answers on its metrics port: orders are neither planned nor updated.
          1. Check the pods: `kubectl -n {{ $ns }} get pods -l app=isvc-controller`
          2. Read the logs: `kubectl -n {{ $ns }} logs deploy/isvc-controller -c controller`

    - alert: D8IsvcControllerTargetAbsent
      expr: absent(up{job="isvc-controller-metrics", namespace="{{ $ns }}"}) == 1
      for: 15m
      labels:
        severity_level: "5"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: There is no isvc controller target in Prometheus.
        description: |
          The controller Deployment or its metrics Service is gone, or the ServiceMonitor does not select it.
          1. Check the Deployment: `kubectl -n {{ $ns }} get deploy isvc-controller`
          2. Check the Service and the ServiceMonitor: `kubectl -n {{ $ns }} get svc,servicemonitor -l module=isvc`

    - alert: D8IsvcReconcileErrors
      expr: |
        sum by (kind) (rate(isvc_reconcile_total{result="error", namespace="{{ $ns }}"}[10m]))
          / sum by (kind) (rate(isvc_reconcile_total{namespace="{{ $ns }}"}[10m])) > 0.2
      for: 15m
      labels:
        severity_level: "6"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: More than a fifth of the controller's reconcile passes fail.
        description: |
          The controller backs off and retries each failed pass; a lasting error rate means it cannot write
          to the API or a step keeps raising. The `kind` label says whether orders or classes fail.
          1. Read the logs: `kubectl -n {{ $ns }} logs deploy/isvc-controller -c controller | grep -i failed`
          2. Look for conditions that say NotJudged: `kubectl get inferenceservices -A`
