{{- $ns := include "isvc_namespace" . }}
- name: isvc.model-cache
  rules:
    - alert: D8IsvcModelCacheFull
      expr: sum by (namespace) (increase(isvc_model_cache_downloads_total{result="Full", namespace="{{ $ns }}"}[30m])) > 0
      for: 5m
      labels:
        severity_level: "6"
        tier: cluster
      annotations:
        plk_protocol_version: "1"
        plk_markup_format: markdown
        summary: The isvc model cache has no room for the files downloads ask for; they come from the Hub.
        description: |
          In the last 30 minutes the model cache answered downloads that it has no room for a file: the file
          is larger than the cache, or the rest of the cache is being read. Those downloads took the file from
          the Hugging Face Hub (orders still start), and every further replica of that model will too.
          1. See how full it is and what is held: `isvc_model_cache_used_bytes`, `isvc_model_cache_held_bytes`,
             `isvc_model_cache_capacity_bytes`.
          2. Make it larger than the models ordered together (the module setting `modelCache.size`; a new size
             starts the cache empty), or read the logs: `kubectl -n {{ $ns }} logs deploy/isvc-model-cache -c model-cache`
