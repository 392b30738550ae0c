{{/* What each feature of the agent needs from its pod, read from its flags: the chart's copy
of workers/manifests/needs.py (tests/test_chart.py renders both for every combination of the
features and checks the chart's DaemonSet with check.py). remedy's defaults where a flag is
null: --state-dir /var/lib/remedy, --pod-resources the kubelet's socket, --kernel-log auto.
Returns YAML: privileged, hostPID, unconfined, capabilities, env, mounts (path, writable,
kind), in the order needs.py lists them. The state directory is root's: the agent always
runs as root. */}}
{{- define "remedy.agent.needs" -}}
{{- $f := .Values.agent.flags -}}
{{- $monitor := include "remedy.monitor" . -}}
{{- $state := $f.stateDir | default "/var/lib/remedy" -}}
{{- $mounts := list (dict "path" (toString $state) "writable" true "kind" "DirectoryOrCreate") -}}
{{- $caps := list -}}
{{- $privileged := false -}}{{- $hostPID := false -}}{{- $unconfined := false -}}
{{- $env := list -}}
{{- if or (kindIs "invalid" $f.expectedGpus) (ne (int $f.expectedGpus) 0) -}}
{{- $env = append $env (dict "name" "NVIDIA_VISIBLE_DEVICES" "value" "all") -}}
{{- end -}}
{{- $log := toString ($f.kernelLog | default "auto") -}}
{{- $kind := regexReplaceAll ":.*$" $log "" -}}
{{- $arg := ternary (trimPrefix (printf "%s:" $kind) $log) "" (contains ":" $log) -}}
{{- $feature := printf "the kernel log (--kernel-log %s)" $log -}}
{{- $source := ne $log "none" -}}
{{- if eq $log "none" -}}
{{- else if eq $log "auto" -}}
{{- fail (printf "%s: auto reads whatever the node lets it, so no pod grants exactly what it needs: name the source (journal:DIR, kmsg, file:PATH)" $feature) -}}
{{- else if eq $kind "kmsg" -}}
{{- $privileged = true -}}
{{- $mounts = append $mounts (dict "path" ($arg | default "/dev/kmsg") "writable" false "kind" "CharDevice") -}}
{{- else if eq $kind "journal" -}}
{{- if not $arg -}}
{{- fail (printf "%s: journalctl reads the container's own journal, which has none: name the host's (journal:/var/log/journal)" $feature) -}}
{{- end -}}
{{- $mounts = append $mounts (dict "path" (dir $arg) "writable" false "kind" "Directory") -}}
{{- else if or (and (eq $kind "file") $arg) (contains "/" $log) -}}
{{- $caps = append $caps "DAC_READ_SEARCH" -}}
{{- $mounts = append $mounts (dict "path" (dir ($arg | default $log)) "writable" false "kind" "Directory") -}}
{{- else -}}
{{- fail (printf "--kernel-log %q: use auto, kmsg, journal, journal:DIR, file:PATH or none" $log) -}}
{{- end -}}
{{- if and $source (not (kindIs "invalid" $f.cursor)) -}}
{{- $mounts = append $mounts (dict "path" (dir (toString $f.cursor)) "writable" true "kind" "DirectoryOrCreate") -}}
{{- end -}}
{{- $podResources := ternary "/var/lib/kubelet/pod-resources/kubelet.sock" $f.podResources (kindIs "invalid" $f.podResources) -}}
{{- if and $f.kubernetes $podResources -}}
{{- $mounts = append $mounts (dict "path" (dir $podResources) "writable" false "kind" "Directory") -}}
{{- end -}}
{{- if and $f.allowReset (not $monitor) -}}
{{- $privileged = true -}}
{{- end -}}
{{- if and $f.allowReboot (not $monitor) -}}
{{- $words := splitList " " (toString $f.rebootCommand | default "systemctl reboot" | trim) | compact -}}
{{- $enter := list -}}{{- $past := false -}}
{{- range $words }}{{ if eq . "--" }}{{ $past = true }}{{ end }}{{ if not $past }}{{ $enter = append $enter . }}{{ end }}{{ end -}}
{{- $target := has "--target=1" $enter -}}
{{- range $i, $w := $enter }}{{ if and (has $w (list "-t" "--target")) (lt (add1 $i) (len $enter)) }}{{ if eq (index $enter (add1 $i)) "1" }}{{ $target = true }}{{ end }}{{ end }}{{ end -}}
{{- $program := base (first $words | default "") -}}
{{- $reboot := printf "reboots (--allow-reboot, --reboot-command %s)" (join " " $words) -}}
{{- if and (eq $program "nsenter") $target -}}
{{- $hostPID = true -}}{{- $unconfined = true -}}
{{- $caps = concat $caps (list "SYS_ADMIN" "SYS_PTRACE" "SYS_CHROOT" "SYS_BOOT") -}}
{{- else if eq $program "systemctl" -}}
{{- fail (printf "%s: systemctl in the agent's container reaches no systemd of the host: use 'nsenter --target 1 --mount --uts --ipc --net --pid -- systemctl reboot'" $reboot) -}}
{{- else -}}
{{- fail (printf "%s: remedy cannot tell what %s needs" $reboot ($program | default "it")) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "privileged" $privileged "hostPID" $hostPID "unconfined" $unconfined "capabilities" (sortAlpha (uniq $caps)) "env" $env "mounts" $mounts) -}}
{{- end }}

{{/* The host paths the needs name, as volumes and mounts: one for a path under another
needed one, writable when anything under it must be written (render.py's _mount). */}}
{{- define "remedy.agent.hostPaths" -}}
{{- $wanted := .mounts -}}
{{- $seen := list -}}
{{- $out := list -}}
{{- range $m := $wanted -}}
{{- $under := false -}}
{{- range $o := $wanted }}{{ if and (ne $o.path $m.path) (hasPrefix (printf "%s/" (trimSuffix "/" $o.path)) $m.path) }}{{ $under = true }}{{ end }}{{ end -}}
{{- if and (not $under) (not (has $m.path $seen)) -}}
{{- $seen = append $seen $m.path -}}
{{- $writable := false -}}
{{- range $w := $wanted }}{{ if and $w.writable (or (eq $w.path $m.path) (hasPrefix (printf "%s/" (trimSuffix "/" $m.path)) $w.path)) }}{{ $writable = true }}{{ end }}{{ end -}}
{{- $out = append $out (dict "name" (printf "host%s" (replace "/" "-" $m.path)) "path" $m.path "kind" $m.kind "writable" $writable) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "paths" $out) -}}
{{- end }}
