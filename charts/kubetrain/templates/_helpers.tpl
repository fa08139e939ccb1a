{{/* The name of every object: fullnameOverride, else the release name with "-kubetrain" unless it has it. */}}
{{- define "kubetrain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kubetrain.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "kubetrain.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: kubeflow-training-operator
{{- end -}}

{{- define "kubetrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "kubetrain.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name: name the existing ServiceAccount the operator runs as (or set serviceAccount.create=true)" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
The --enable-scheme list when operator.enabledSchemes is empty: the kinds of the CRDs the chart installs,
the MPIJob of mpiJobAPI and Kubeflow Trainer v2's TrainJob included. (The operator's own default is the kubeflow.org/v1 kinds, which would leave
v2beta1 MPIJobs unreconciled.) Names as `kubetrain operator --enable-scheme` takes them.
*/}}
{{- define "kubetrain.enabledSchemes" -}}
{{- $schemes := .Values.operator.enabledSchemes -}}
{{- if and (not $schemes) .Values.crds.install -}}
{{- $schemes = list "pytorchjob" "tfjob" "xgboostjob" "paddlejob" "jaxjob" "mxjob" -}}
{{- $schemes = append $schemes (ternary "mpijob" "mpijob-v2beta1" (eq .Values.mpiJobAPI "v1")) -}}
{{- $schemes = append $schemes "trainjob" -}}
{{- end -}}
{{- toJson (default (list) $schemes) -}}
{{- end -}}

{{/* The Jobs view's objects: the full name with "-dashboard". */}}
{{- define "kubetrain.dashboardName" -}}
{{- printf "%s-dashboard" (include "kubetrain.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubetrain.dashboardSelectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: dashboard
{{- end -}}

{{/* The status endpoint's headless Service: its name is in the operator's certificate and the pods' URL. */}}
{{- define "kubetrain.statusServiceName" -}}
{{- printf "%s-status" (include "kubetrain.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}
