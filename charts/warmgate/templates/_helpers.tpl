{{/* Chart name, truncated to a DNS label. */}}
{{- define "warmgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the prefix of every object name of the release. */}}
{{- define "warmgate.fullname" -}}
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

{{/* Chart label value. */}}
{{- define "warmgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the operator pod (immutable in the Deployment's selector). */}}
{{- define "warmgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "warmgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* Labels of every object of the release. */}}
{{- define "warmgate.labels" -}}
helm.sh/chart: {{ include "warmgate.chart" . }}
{{ include "warmgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: warmgate
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "warmgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "warmgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image reference; the tag defaults to the chart's appVersion. */}}
{{- define "warmgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* True (non-empty) when the operator watches every namespace: an explicit opt-in. */}}
{{- define "warmgate.clusterWide" -}}
{{- if .Values.clusterWide }}
{{- if .Values.watchNamespaces }}
{{- fail "clusterWide=true watches every namespace: leave watchNamespaces empty" }}
{{- end }}true
{{- end }}
{{- end }}

{{/* The watched namespaces, one per line: as listed, else the release's own namespace. */}}
{{- define "warmgate.watchNamespaces" -}}
{{- range (.Values.watchNamespaces | default (list .Release.Namespace)) }}
{{ . }}
{{- end }}
{{- end }}

{{/*
The leader election's timings, checked as client-go checks them (the operator refuses them
too, at start): a leader gives up before a standby may take over, after a few tries.
*/}}
{{- define "warmgate.leaseChecks" -}}
{{- $ha := .Values.highAvailability }}
{{- if le (float64 $ha.leaseDurationSeconds) (float64 $ha.renewDeadlineSeconds) }}
{{- fail "highAvailability.leaseDurationSeconds must be greater than renewDeadlineSeconds" }}
{{- end }}
{{- if le (float64 $ha.renewDeadlineSeconds) (mulf 1.2 $ha.retryPeriodSeconds) }}
{{- fail "highAvailability.renewDeadlineSeconds must be greater than 1.2 x retryPeriodSeconds" }}
{{- end }}
{{- end }}

{{/*
Rules on the watched resource, granted per watched namespace (Role) or cluster-wide (ClusterRole).
kopf 1.45 posts Events through the core v1 API; events.k8s.io is granted too because kopf's
deployment docs list it and other kopf versions use it (create only).
*/}}
{{- define "warmgate.namespacedRules" -}}
# Framework (kopf): watch the SpecDecodeDeployments (an initial list, then a watch); patch only to
# remove the finalizer `warmgate.dev/finalizer` that earlier builds set.
- apiGroups: ["warmgate.dev"]
  resources: ["specdecodedeployments"]
  verbs: ["list", "watch", "patch"]
# Application: the sync writes `status` (conditions, plan) to the status subresource, and
# "Planning" there before it plans a new generation.
- apiGroups: ["warmgate.dev"]
  resources: ["specdecodedeployments/status"]
  verbs: ["patch"]
# Framework (kopf): post Events about handler results (kopf.info/kopf.warn and handler errors).
# Application (warmup stage): list the Events of a warmup Job whose Pod does not exist, to
# report the Job controller's FailedCreate (quota, Pod Security) as the Warmed reason.
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "list"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
# Application (warmup stage): read the plan's warmup Jobs (get, list by label) and create
# them with their ConfigMaps and the recipe-cache claim; stop a Job whose Pod waited past the
# pending deadline (patch: suspend and mark it); delete the Jobs of superseded plans or of a
# changed warmup (a running one holds Gaudi cards) and the ConfigMaps nothing mounts any more.
# Read the cache claim (get) for its UID. List the Job's Pods to read the runner's verdict.
# Recipe-cache claims (issue 23 item 12): list the ones labelled as the object's and delete a
# claim made from an older or removed claimTemplate once nothing mounts it (only one the
# object controls, with its UID as precondition; a user's existingClaim is never deleted).
# List the namespace's SpecDecodeDeployments (above) and serving Deployments (below) before
# a warmup, so its runner prunes the recipe-cache entries of objects that are gone.
# Application (served record, `<name>-served`): replace the ConfigMap that records the plan
# serving now when a newly verified plan rolls in (update), and read a child of the wanted name
# that a create found taken, to use it only when this object controls it (get).
# Application (the follower, issue 14): watch the Jobs, Pods, Deployments and Services labelled
# `warmgate.dev/name` (a server-side label selector), so a child's change wakes its parent.
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "create", "update", "delete"]
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "create", "delete"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list", "watch"]
# Application: the children's owner references set blockOwnerDeletion, which clusters with the
# OwnerReferencesPermissionEnforcement admission plugin (e.g. OpenShift) allow only to a client
# that may update the owner's finalizers.
- apiGroups: ["warmgate.dev"]
  resources: ["specdecodedeployments/finalizers"]
  verbs: ["update"]
# Application (serving stage): read the serving Deployment, create it, and replace it when a
# newly verified plan rolls in or a hand edit drifted it (update); follow spec.serving.replicas
# while a new plan warms (deployments/scale); list its ReplicaSets, to open the readiness gate
# only of Pods it owns; read the Service, create it, and patch it back when it drifted.
- apiGroups: ["apps"]
  resources: ["deployments"]
  verbs: ["get", "list", "watch", "create", "update"]
- apiGroups: ["apps"]
  resources: ["deployments/scale"]
  verbs: ["patch"]
- apiGroups: ["apps"]
  resources: ["replicasets"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "patch"]
# Application (serving stage): open the `warmgate.dev/warmed` readiness gate of serving Pods
# that run a verified plan (a Pod condition, written through the status subresource).
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["patch"]
{{- end }}

{{/* Cluster-scoped framework rules that every install needs (CRDs are cluster-scoped). */}}
{{- define "warmgate.clusterRules" -}}
# Framework (kopf): runtime observation of CustomResourceDefinitions, so the operator notices
# when the SpecDecodeDeployment CRD is installed, upgraded or removed while it runs.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  verbs: ["list", "watch"]
{{- if .Values.gaudiCards }}
# A sharded warmup (gaudiCards=true, an explicit opt-in): the free habana.ai/gaudi cards per
# node, read before its Job is made: every Node's allocatable and every Pod's requests.
- apiGroups: [""]
  resources: ["nodes", "pods"]
  verbs: ["list"]
{{- end }}
{{- end }}
