{{- /* Usage: {{ include "isvc_module_labels" (list . (dict "app" "isvc-controller")) | nindent 2 }}
Renders a `labels:` block with the Deckhouse module labels (heritage, module) and any extra labels. */ -}}
{{- define "isvc_module_labels" -}}
{{- $ctx := index . 0 -}}
labels:
  heritage: deckhouse
  module: {{ $ctx.Chart.Name }}
{{- if gt (len .) 1 }}
{{- range $key, $value := index . 1 }}
  {{ $key }}: {{ $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{- /* Usage: {{ include "isvc_namespace" . }} — the namespace of the controller and the planner. */ -}}
{{- define "isvc_namespace" -}}
{{- .Values.isvc.namespace | default "d8-isvc" -}}
{{- end }}

{{- /* Usage: {{ include "isvc_planner_url" . }} — the in-cluster URL the controller calls the planner at. */ -}}
{{- define "isvc_planner_url" -}}
https://isvc-planner.{{ include "isvc_namespace" . }}.svc:8080
{{- end }}

{{- /* Usage: {{ if include "isvc_catalog_enabled" . }} — non-empty unless catalog.mode is None. */ -}}
{{- define "isvc_catalog_enabled" -}}
{{- if ne .Values.isvc.catalog.mode "None" }}true{{ end -}}
{{- end }}

{{- /* Usage: {{ if include "isvc_cert_manager_present" . }} — non-empty when the cluster serves cert-manager Certificates. */ -}}
{{- define "isvc_cert_manager_present" -}}
{{- if .Capabilities.APIVersions.Has "cert-manager.io/v1/Certificate" }}true{{ end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_public_domain_template" . }} — the module setting, else the cluster-wide one, else empty. */ -}}
{{- define "isvc_public_domain_template" -}}
{{- .Values.isvc.publicDomainTemplate | default (dig "modules" "publicDomainTemplate" "" (.Values.global | default dict)) -}}
{{- end }}

{{- /* Usage: {{ include "isvc_pod_security_context" . | nindent 6 }} — pod-level context for PSS restricted. */ -}}
{{- define "isvc_pod_security_context" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 64535
  runAsGroup: 64535
  fsGroup: 64535
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- /* Usage: {{ include "isvc_container_security_context" . | nindent 10 }} — container-level context for PSS restricted. */ -}}
{{- define "isvc_container_security_context" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: ["ALL"]
  seccompProfile:
    type: RuntimeDefault
{{- end }}

{{- /* Usage: {{ if include "isvc_deckhouse" . }} — non-empty when Deckhouse renders the chart (it always passes the module registry). */ -}}
{{- define "isvc_deckhouse" -}}
{{- if dig "modulesImages" "registry" "base" "" (.Values.global | default dict) }}true{{ end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_image" (list . "controller") }} — the image of a component.
Under Deckhouse: the module image helper (module registry, digest from the module build, images/<name>/).
With plain helm: `isvc.images.<name>`, which must then be set. */ -}}
{{- define "isvc_image" -}}
{{- $ctx := index . 0 -}}
{{- $name := index . 1 -}}
{{- if include "isvc_deckhouse" $ctx -}}
{{- include "helm_lib_module_image" (list $ctx $name) -}}
{{- else -}}
{{- $image := dig $name "" ($ctx.Values.isvc.images | default dict) -}}
{{- if not $image }}{{ fail (printf "isvc.images.%s is required without Deckhouse (see module/README.md, plain Helm)" $name) }}{{ end -}}
{{- $image -}}
{{- end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_model_fetch_image" . }} — the image whose init container downloads Hugging Face
models: the setting modelFetchImage, else the module's own modelFetcher image (under Deckhouse, or
isvc.images.modelFetcher with plain helm), else empty (no download step). */ -}}
{{- define "isvc_model_fetch_image" -}}
{{- if .Values.isvc.modelFetchImage -}}
{{- .Values.isvc.modelFetchImage -}}
{{- else if include "isvc_deckhouse" . -}}
{{- include "helm_lib_module_image" (list . "modelFetcher") -}}
{{- else -}}
{{- dig "modelFetcher" "" (.Values.isvc.images | default dict) -}}
{{- end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_kube_rbac_proxy_image" . }} — Deckhouse's common kube-rbac-proxy image, else isvc.images.kubeRbacProxy, else empty (metrics served unproxied). */ -}}
{{- define "isvc_kube_rbac_proxy_image" -}}
{{- if include "isvc_deckhouse" . -}}
{{- include "helm_lib_module_common_image" (list . "kubeRbacProxy") -}}
{{- else -}}
{{- dig "kubeRbacProxy" "" (.Values.isvc.images | default dict) -}}
{{- end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_image_pull_policy" . }} */ -}}
{{- define "isvc_image_pull_policy" -}}
{{- dig "pullPolicy" "IfNotPresent" (.Values.isvc.images | default dict) -}}
{{- end }}

{{- /* Usage: {{ include "isvc_image_pull_secrets" . | nindent 6 }} — the module registry secret (registry-secret.yaml), when rendered. */ -}}
{{- define "isvc_image_pull_secrets" -}}
{{- if include "isvc_registry_dockercfg" . }}
imagePullSecrets:
  - name: registrysecret
{{- end }}
{{- end }}

{{- /* Usage: {{ include "isvc_registry_dockercfg" . }} — the module's registry credentials (external module), else the global ones, else empty. */ -}}
{{- define "isvc_registry_dockercfg" -}}
{{- dig "registry" "dockercfg" "" (.Values.isvc | default dict) | default (dig "modulesImages" "registry" "dockercfg" "" (.Values.global | default dict)) -}}
{{- end }}

{{- /* Usage: {{ include "isvc_priority_class" . | nindent 6 }} — Deckhouse's cluster-medium under Deckhouse; isvc.priorityClassName (may be empty) with plain helm. */ -}}
{{- define "isvc_priority_class" -}}
{{- if include "isvc_deckhouse" . -}}
{{- include "helm_lib_priority_class" (tuple . "cluster-medium") -}}
{{- else if .Values.isvc.priorityClassName -}}
priorityClassName: {{ .Values.isvc.priorityClassName }}
{{- end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_system_placement" . | nindent 6 }} — nodeSelector and tolerations of system components (lib-helm "system" strategy). */ -}}
{{- define "isvc_system_placement" -}}
{{- include "helm_lib_node_selector" (tuple . "system") }}
{{ include "helm_lib_tolerations" (tuple . "system") }}
{{- end }}

{{- /* Usage: {{ include "isvc_affinity" (list . (dict "app" "isvc-controller")) | nindent 6 }} — the module's own pods
never land on a node carrying one of the labels of `gpuNodeLabelKeys` (GPU nodes: a required node affinity,
DoesNotExist), and with the labels given and HA on, replicas go to different nodes (lib-helm's anti-affinity).
Renders nothing when neither applies. */ -}}
{{- define "isvc_affinity" -}}
{{- $ctx := index . 0 -}}
{{- $labels := index . 1 -}}
{{- $affinity := dict -}}
{{- if $labels -}}
{{- $affinity = (include "helm_lib_pod_anti_affinity_for_ha" (list $ctx $labels) | fromYaml).affinity | default dict -}}
{{- end -}}
{{- with $ctx.Values.isvc.gpuNodeLabelKeys -}}
{{- $expressions := list -}}
{{- range . -}}
{{- $expressions = append $expressions (dict "key" . "operator" "DoesNotExist") -}}
{{- end -}}
{{- $_ := set $affinity "nodeAffinity" (dict "requiredDuringSchedulingIgnoredDuringExecution" (dict "nodeSelectorTerms" (list (dict "matchExpressions" $expressions)))) -}}
{{- end -}}
{{- if $affinity }}
affinity:
  {{- toYaml $affinity | nindent 2 }}
{{- end }}
{{- end }}

{{- /* Usage: {{ include "isvc_kube_rbac_proxy" (list . "controller" 9090) | nindent 8 }} — the kube-rbac-proxy sidecar that serves
/metrics of a component over HTTPS on port `https-metrics` (8443) to whoever may `get deployments/prometheus-metrics`
of that Deployment; the component itself listens on 127.0.0.1:<port>. Renders nothing without a proxy image. */ -}}
{{- define "isvc_kube_rbac_proxy" -}}
{{- $ctx := index . 0 -}}
{{- $component := index . 1 -}}
{{- $port := index . 2 -}}
{{- with include "isvc_kube_rbac_proxy_image" $ctx }}
- name: kube-rbac-proxy
  image: {{ . | quote }}
  imagePullPolicy: {{ include "isvc_image_pull_policy" $ctx }}
  args:
    - --secure-listen-address=$(KUBE_RBAC_PROXY_LISTEN_ADDRESS):8443
    - --v=2
    - --logtostderr=true
    - --stale-cache-interval=1h30m
    - --livez-path=/livez
  env:
    - name: KUBE_RBAC_PROXY_LISTEN_ADDRESS
      valueFrom:
        fieldRef:
          fieldPath: status.podIP
    - name: KUBE_RBAC_PROXY_CONFIG
      value: |
        upstreams:
          - upstream: http://127.0.0.1:{{ $port }}/metrics
            path: /metrics
            authorization:
              resourceAttributes:
                namespace: {{ include "isvc_namespace" $ctx }}
                apiGroup: apps
                apiVersion: v1
                resource: deployments
                subresource: prometheus-metrics
                name: isvc-{{ $component }}
  ports:
    - name: https-metrics
      containerPort: 8443
      protocol: TCP
  livenessProbe:
    httpGet:
      path: /livez
      port: 8443
      scheme: HTTPS
  readinessProbe:
    httpGet:
      path: /livez
      port: 8443
      scheme: HTTPS
  resources:
    requests:
      {{- include "helm_lib_module_ephemeral_storage_only_logs" $ctx | nindent 6 }}
      cpu: 10m
      memory: 25Mi
  {{- include "isvc_container_security_context" $ctx | nindent 2 }}
{{- end }}
{{- end }}

{{- /* Usage: {{ if include "isvc_metrics_proxied" . }} — non-empty when kube-rbac-proxy fronts the metrics. */ -}}
{{- define "isvc_metrics_proxied" -}}
{{- if include "isvc_kube_rbac_proxy_image" . }}true{{ end -}}
{{- end }}

{{- /* Usage: {{ $cert := include "isvc_serving_cert" (list . "isvc-planner" "isvc-planner-tls" .Values.isvc.internal.plannerCert) | fromYaml }}
— the serving certificate of the Service named second (crt, key, ca; PEM): the one a hook gives (the last
argument), else the one kept in the Secret named third (so upgrades keep it), else a new one from an authority of
its own, valid ten years, for the Service's names. */ -}}
{{- define "isvc_serving_cert" -}}
{{- $ctx := index . 0 }}{{- $service := index . 1 }}{{- $secret := index . 2 }}{{- $given := index . 3 | default (dict) }}
{{- $ns := include "isvc_namespace" $ctx }}
{{- $existing := lookup "v1" "Secret" $ns $secret }}
{{- if $given.crt }}
{{- dict "crt" $given.crt "key" $given.key "ca" $given.ca | toYaml }}
{{- else if and $existing $existing.data }}
{{- dict "crt" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) "ca" (index $existing.data "ca.crt" | b64dec) | toYaml }}
{{- else }}
{{- $authority := genCA (printf "%s-ca" $service) 3650 }}
{{- $names := list $service (printf "%s.%s" $service $ns) (printf "%s.%s.svc" $service $ns) }}
{{- $cert := genSignedCert (printf "%s.%s.svc" $service $ns) nil $names 3650 $authority }}
{{- dict "crt" $cert.Cert "key" $cert.Key "ca" $authority.Cert | toYaml }}
{{- end }}
{{- end }}

{{- /* Usage: {{ include "isvc_model_cache_storage_class" . }} — the StorageClass of the model cache's volume:
modelCache.storageClassName, else the default StorageClass Deckhouse discovered, else the cluster's default
StorageClass (looked up at install), else empty. */ -}}
{{- define "isvc_model_cache_storage_class" -}}
{{- $cache := .Values.isvc.modelCache | default dict -}}
{{- $discovered := dig "discovery" "defaultStorageClass" "" (.Values.global | default dict) -}}
{{- if $cache.storageClassName -}}
{{- $cache.storageClassName -}}
{{- else if $discovered -}}
{{- $discovered -}}
{{- else -}}
{{- $defaults := list -}}
{{- range (lookup "storage.k8s.io/v1" "StorageClass" "" "").items | default list -}}
{{- if eq (dig "metadata" "annotations" "storageclass.kubernetes.io/is-default-class" "" .) "true" -}}
{{- $defaults = append $defaults .metadata.name -}}
{{- end -}}
{{- end -}}
{{- first $defaults | default "" -}}
{{- end -}}
{{- end }}

{{- /* Usage: {{ if include "isvc_model_cache_enabled" . }} — modelCache.enabled when set, else on where a StorageClass
for its volume is known (isvc_model_cache_storage_class). */ -}}
{{- define "isvc_model_cache_enabled" -}}
{{- $cache := .Values.isvc.modelCache | default dict -}}
{{- if hasKey $cache "enabled" -}}
{{- if $cache.enabled }}true{{ end -}}
{{- else if include "isvc_model_cache_storage_class" . -}}
true
{{- end -}}
{{- end }}

{{- /* Usage: {{ include "isvc_model_cache_url" . }} — the in-cluster URL download steps ask the model cache at. */ -}}
{{- define "isvc_model_cache_url" -}}
http://isvc-model-cache.{{ include "isvc_namespace" . }}.svc:8080
{{- end }}

{{- /* Usage: {{ include "isvc_model_cache_max_bytes" . }} — nine tenths of modelCache.size in bytes (Gi or Ti): the
cache's bound, leaving the file system's own blocks and the share ext4 keeps for root. */ -}}
{{- define "isvc_model_cache_max_bytes" -}}
{{- $size := .Values.isvc.modelCache.size | toString -}}
{{- $count := regexFind "^[0-9]+" $size -}}
{{- $unit := get (dict "Gi" 1073741824 "Ti" 1099511627776) (trimPrefix $count $size) -}}
{{- if not $unit }}{{ fail (printf "modelCache.size %q: a whole number of Gi or Ti" $size) }}{{ end -}}
{{- div (mul ($count | int64) $unit 9) 10 -}}
{{- end }}

{{- /* Usage: {{ include "isvc_model_cache_volume" . }} — the name of the cache's claim, from its size and class: a
claim's size cannot shrink nor its class change, so another size or class is another (empty) claim. */ -}}
{{- define "isvc_model_cache_volume" -}}
isvc-model-cache-{{ list .Values.isvc.modelCache.size (include "isvc_model_cache_storage_class" .) | toJson | sha256sum | trunc 8 }}
{{- end }}
