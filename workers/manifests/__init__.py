"""The Kubernetes manifests of deploy/ as a program sees them: what each feature of the node
agent needs from its pod (needs.py), a check that its DaemonSet gives exactly that (check.py),
and deploy/ rendered for one install, its namespace and service accounts everywhere they are
named (render.py; `remedy render-manifests`), and the Helm chart that deploy/ is the default
render of (chart.py; `make manifests`)."""
