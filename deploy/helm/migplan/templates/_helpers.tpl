{{/* The image both commands run: repository, and the tag when one is set (the kustomize base uses migplan:latest). */}}
{{- define "migplan.image" -}}
{{- .Values.image.repository }}:{{ .Values.image.tag | default "latest" }}
{{- end -}}
