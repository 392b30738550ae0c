{{/* Names, labels and the command lines every template shares. */}}

{{- define "remedy.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- end }}

{{- define "remedy.monitor" -}}
{{- if not (has .Values.mode (list "monitor" "remediate")) -}}
{{- fail (printf "mode: %q: monitor or remediate" .Values.mode) -}}
{{- end -}}
{{- if eq .Values.mode "monitor" }}true{{ end -}}
{{- end }}

{{- define "remedy.agentAccount" -}}
{{- .Values.agent.serviceAccount | default (printf "%s-agent" (include "remedy.fullname" .)) -}}
{{- end }}

{{- define "remedy.controllerAccount" -}}
{{- .Values.controller.serviceAccount | default (printf "%s-controller" (include "remedy.fullname" .)) -}}
{{- end }}

{{/* Labels: the chart's name, and the component given (none: the chart's name only). */}}
{{- define "remedy.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
{{- with .component }}
app.kubernetes.io/component: {{ . }}
{{- end }}
{{- end }}

{{/* A ServiceAccount subject of the release's namespace. */}}
{{- define "remedy.subject" -}}
- kind: ServiceAccount
  name: {{ .name }}
  namespace: {{ .namespace }}
{{- end }}

{{/* A values map of flags (camelCase keys) as a command's arguments, one YAML list item each,
in the keys' order: null is not passed, true is --flag, false --no-flag, a list repeats the
flag. "skip": keys rendered elsewhere. */}}
{{- define "remedy.flags" -}}
{{- $skip := .skip -}}
{{- range $key, $value := .flags }}
{{- if and (not (has $key $skip)) (not (kindIs "invalid" $value)) }}
{{- $flag := kebabcase $key }}
{{- if kindIs "bool" $value }}
- {{ printf "--%s%s" (ternary "" "no-" $value) $flag | quote }}
{{- else if kindIs "slice" $value }}
{{- range $value }}
- {{ printf "--%s" $flag | quote }}
- {{ toString . | quote }}
{{- end }}
{{- else }}
- {{ printf "--%s" $flag | quote }}
- {{ toString $value | quote }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* The port of a --metrics-bind IP:port; empty without one. */}}
{{- define "remedy.metricsPort" -}}
{{- with . }}{{ regexReplaceAll "^.*:" (toString .) "" }}{{ end -}}
{{- end }}

{{/* The pod annotations: the values', and Prometheus's port where metrics are served. */}}
{{- define "remedy.podAnnotations" -}}
{{- $port := include "remedy.metricsPort" .bind -}}
{{- $annotations := deepCopy .annotations -}}
{{- if $port }}{{ $_ := set $annotations "prometheus.io/port" $port }}{{ end -}}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Each role's Temporal settings: the shared ConfigMap, the API key from the role's own
Secret, and the Secret mounted at /etc/remedy/temporal. */}}
{{- define "remedy.temporalSecret" -}}
{{- if eq .role "agent" -}}
{{- .root.Values.temporal.agentSecret | default (printf "%s-agent-temporal" (include "remedy.fullname" .root)) -}}
{{- else -}}
{{- .root.Values.temporal.controllerSecret | default (printf "%s-controller-temporal" (include "remedy.fullname" .root)) -}}
{{- end -}}
{{- end }}

{{- define "remedy.runbooksFlag" -}}
{{- if .Values.runbooks.configMap }}
- "--runbooks"
- "/etc/remedy/runbooks"
{{- end }}
{{- end }}

{{- define "remedy.codecSecret" -}}
{{- .Values.codec.keySecret | default (printf "%s-codec-key" (include "remedy.fullname" .)) -}}
{{- end }}
