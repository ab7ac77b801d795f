#!/usr/bin/env bash
# The code-review run of shardproof: checks one or more specs and writes what a
# pull request shows (docs/code-review.md, "In a pull request"):
#   OUT/sarif/<name>.sarif   annotations on the spec lines (upload as SARIF)
#   OUT/summary.md           one Markdown comment for all specs
#   OUT/html/<name>.html     the picture of each proof
#   OUT/json/<name>.json     the machine report
# A spec with a relation file next to it (X.relations.yaml beside X.yaml) is
# also compared with it, so a changed relation is flagged (exit 5).
#
# Usage: tools/review.sh [--out DIR] SPEC.yaml... [-- CHECK ARGS...]
# Environment: SHARDPROOF (the binary; default build/shardproof).
# Exit: the most serious of the checks' codes: 3 (bad input) > 1 (REFUTED)
#       > 5 (relations changed) > 2 (UNKNOWN) > 0 (VERIFIED); 64 for bad usage.
set -uo pipefail

usage() {
  sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 64
}

out=review
specs=()
extra=()
while (($#)); do
  case "$1" in
  --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
  --out=*) out=${1#--out=}; shift ;;
  -h|--help) usage ;;
  --) shift; extra=("$@"); break ;;
  -*) echo "review: unknown option $1" >&2; usage ;;
  *) specs+=("$1"); shift ;;
  esac
done
((${#specs[@]})) || { echo "review: no spec given" >&2; usage; }

bin=${SHARDPROOF:-$(dirname "$0")/../build/shardproof}
[ -x "$bin" ] || { echo "review: $bin is not an executable (build first, or set SHARDPROOF)" >&2; exit 3; }
mkdir -p "$out/sarif" "$out/html" "$out/json" || exit 3

# Worse first: a bad input hides everything; a refutation beats a change of
# relations, which beats an undecided check.
severity() {
  case "$1" in 3) echo 5 ;; 1) echo 4 ;; 5) echo 3 ;; 2) echo 2 ;; 0) echo 0 ;; *) echo 6 ;; esac
}

worst=0
summary="$out/summary.md"
: >"$summary"
declare -A seen=()
for spec in "${specs[@]}"; do
  case "$spec" in *.relations.yaml) continue ;; esac # a relation file, compared with its spec below
  name=$(basename "$spec" .yaml)
  # Two specs of one name in different folders must not overwrite each other.
  if [ -n "${seen[$name]:-}" ]; then
    name="$name-$(printf '%s' "$spec" | cksum | cut -d' ' -f1)"
  fi
  seen[$name]=1
  args=(check --quiet "$spec" --sarif "$out/sarif/$name.sarif" --summary-md "$out/$name.md"
        --html "$out/html/$name.html" --json "$out/json/$name.json")
  rel="${spec%.yaml}.relations.yaml"
  [ -f "$rel" ] && args+=(--relations "$rel")
  "$bin" "${args[@]}" "${extra[@]}" >"$out/$name.log" 2>&1
  code=$?
  echo "review: $spec -> exit $code ($out/html/$name.html)"
  if [ -f "$out/$name.md" ]; then
    cat "$out/$name.md" >>"$summary"
    rm -f "$out/$name.md"
  else # bad input: no report was written, the error is the summary
    { echo "## shardproof: error in \`$spec\` (exit $code)"; echo; echo '```'; cat "$out/$name.log"; echo '```'; } >>"$summary"
  fi
  echo >>"$summary"
  if (($(severity "$code") > $(severity "$worst"))); then
    worst=$code
  fi
done
exit "$worst"
