{{/* Chart name, truncated to a DNS label. */}}
{{- define "ocisource.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name of every resource: <release>-<chart>, or the release name when it already contains the chart name. */}}
{{- define "ocisource.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels that select the controller pods. */}}
{{- define "ocisource.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ocisource.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels on every resource. */}}
{{- define "ocisource.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "ocisource.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: source-controller
{{- end }}

{{/* Name of the ServiceAccount. */}}
{{- define "ocisource.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "ocisource.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Image reference: repository@digest or repository:tag. */}}
{{- define "ocisource.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Advertised address of the artifact server, used in status.artifact.url. */}}
{{- define "ocisource.storageAdvAddr" -}}
{{- if .Values.controller.storageAdvAddr }}
{{- .Values.controller.storageAdvAddr }}
{{- else }}
{{- printf "%s.%s.svc.cluster.local.:%d" (include "ocisource.fullname" .) .Release.Namespace (int .Values.service.artifact.port) }}
{{- end }}
{{- end }}

{{/* Replica count: `replicas` (the older name) when set, else `replicaCount`. */}}
{{- define "ocisource.replicas" -}}
{{- if kindIs "invalid" .Values.replicas }}{{ int .Values.replicaCount }}{{ else }}{{ int .Values.replicas }}{{ end }}
{{- end }}

{{/* True when leader election is on: asked for, or needed because replicas > 1. */}}
{{- define "ocisource.leaderElect" -}}
{{- if or .Values.controller.leaderElect (gt (int (include "ocisource.replicas" .)) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/*
Pod securityContext: podSecurityContext, plus fsGroup 65532 when the storage is a claim
(so the volume is writable by the image's user), unless podSecurityContext sets fsGroup
(even to null) or the cluster is OpenShift (its SCC assigns the fsGroup).
*/}}
{{- define "ocisource.podSecurityContext" -}}
{{- $ctx := deepCopy (.Values.podSecurityContext | default dict) }}
{{- $openshift := .Capabilities.APIVersions.Has "security.openshift.io/v1" }}
{{- if and (include "ocisource.claimName" .) (not (hasKey $ctx "fsGroup")) (not $openshift) }}
{{- $_ := set $ctx "fsGroup" 65532 }}
{{- end }}
{{- toYaml $ctx }}
{{- end }}

{{/* Name of the claim holding the storage, empty for emptyDir. */}}
{{- define "ocisource.claimName" -}}
{{- if eq .Values.storage.type "pvc" }}
{{- include "ocisource.fullname" . }}
{{- else if eq .Values.storage.type "existingClaim" }}
{{- required "storage.existingClaim is required when storage.type is existingClaim" .Values.storage.existingClaim }}
{{- else if ne .Values.storage.type "emptyDir" }}
{{- fail (printf "storage.type must be emptyDir, pvc or existingClaim, not %q" .Values.storage.type) }}
{{- end }}
{{- end }}

{{/*
RBAC rules. These are exactly the API calls the controller makes, as listed by
`ocisource rbac` (src/api/rbac.rs); hack/chart-check.sh fails when they differ.
"ocisource.rules.namespaced": rules on namespaced resources other than leases, granted in
the release namespace (Role) or cluster-wide (ClusterRole) depending on watchAllNamespaces.
*/}}
{{- define "ocisource.rules.namespaced" -}}
- apiGroups: ["ocisource.dev"]
  resources: ["ocirepositories"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["ocisource.dev"]
  resources: ["ocirepositories/status"]
  verbs: ["patch"]
- apiGroups: ["ocisource.dev"]
  resources: ["ocirepositories/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["secrets", "serviceaccounts"]
  verbs: ["get"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["externalartifacts"]
  verbs: ["create", "patch"]
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["externalartifacts/status"]
  verbs: ["patch"]
{{- if .Values.controller.objectLevelWorkloadIdentity }}
- apiGroups: [""]
  resources: ["serviceaccounts/token"]
  verbs: ["create"]
{{- end }}
{{- if .Values.controller.fluxDropInSelector }}
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["ocirepositories"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["source.toolkit.fluxcd.io"]
  resources: ["ocirepositories/status"]
  verbs: ["patch"]
{{- end }}
{{- end }}

{{/* The leader-election Lease lives in the release namespace, whatever is watched. */}}
{{- define "ocisource.rules.leases" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["get", "create", "update"]
{{- end }}

