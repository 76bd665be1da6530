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
http://isvc-planner.{{ include "isvc_namespace" . }}.svc:8080
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
