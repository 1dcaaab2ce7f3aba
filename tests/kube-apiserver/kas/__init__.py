"""A fake Kubernetes API server for tests (standard library only).

Modules:
  main       command line, certificates, kubeconfig, server start and stop
  certs      openssl CLI helpers
  resources  the table of kinds, CRD registration, discovery and OpenAPI documents
  selectors  label and field selectors
  patch      merge, strategic merge and JSON patches
  fields     field validation (fieldValidation=Strict|Warn|Ignore): the schema, unknown and
             repeated fields
  store      objects, resourceVersion, watch history, watchers, list snapshots
  auth       tokens, client certificates, RBAC-ish rules, reviews
  api        REST semantics (create/update/patch/delete/eviction/scale/...)
  control    fault injection and the request log
  httpd      the HTTP handler: routing, watch streaming, the control endpoint
"""

VERSION_INFO = {
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.4",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2025-01-01T00:00:00Z",
    "goVersion": "go1.23.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}
