#!/bin/sh
# One-shot, once the server answers: the namespace, and remedy's search attributes (the Web UI's
# filters and `remedy status` use them; a workflow that sets an unknown one fails its task).
# The remedy processes register any that are missing too; this makes them exist before any
# workflow runs. Names and types: workflows/search_attributes.py (a test keeps them in step).
set -eu
ns="${NAMESPACE:-default}"
until temporal operator cluster health >/dev/null 2>&1; do sleep 2; done
temporal operator namespace describe -n "$ns" >/dev/null 2>&1 \
  || temporal operator namespace create -n "$ns" --retention 30d
add() {
  temporal operator search-attribute create -n "$ns" --name "$1" --type "$2" \
    || echo "search attribute $1 already exists"
}
add RemedyNode Keyword
add RemedyPool Keyword
add RemedyFault Keyword
add RemedyRunbook Keyword
add RemedyRung Keyword
add RemedyPhase Keyword
add RemedyPhaseSince Datetime
add RemedyOutcome Keyword
add RemedyGpuSerials KeywordList
add RemedyLease Keyword
add RemedyJob Keyword
add RemedyJobState Keyword
add RemedyRungsRun KeywordList
echo "namespace $ns and remedy's search attributes are ready"
