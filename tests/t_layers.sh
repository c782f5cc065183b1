#!/usr/bin/env bash
# The folders are the architecture (docs/design.md): every #include "..." of the library, the
# command layer and the tools is held to the module graph below, so a dependency that points
# the wrong way - or a command reaching past include/apbot/ into a module - fails here, naming
# the file, the line and the rule. A public header (include/apbot/X.h) counts as the module
# that implements it.
set -euo pipefail
src=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$src"

# What each module may include, besides itself (and nothing may include a module above it).
declare -A may=(
    [base]=""
    [model]="base"
    [web]="base"
    [input]="base model"
    [queue]="base model"
    [flow]="base model web"
    [erp]="base model web flow"
    [record]="base model web input flow"
    [run]="base model web input queue flow erp"
    [office]="base model web input queue flow erp run"
    [lib]="base model web input queue flow erp record run office"
)
# The module each public face belongs to.
declare -A face=(
    [apbot]=lib [error]=base [mem]=base [buf]=base [text]=base [clock]=base [secret]=base
    [money]=model [invoice]=model [linetax]=model [machine]=model
    [reader]=input [vendors]=input [store]=queue [flow]=flow [erp]=erp [runner]=run
    [review]=office [reviewers]=office [report]=office [serve]=office [trace]=office [record]=record
)

bad=0
complain() {
    echo "$1" >&2
    bad=1
}

# Every public header has a module, and every module folder is in the graph.
for h in include/apbot/*.h; do
    n=$(basename "$h" .h)
    [[ -n ${face[$n]:-} ]] || complain "$h: a public header no module claims (add it to t_layers.sh and docs/design.md)"
done
for d in bot/*/; do
    m=$(basename "$d")
    [[ $m == cli ]] && continue
    [[ -n ${may[$m]+x} ]] || complain "$d: a module folder the graph does not know (add it to t_layers.sh and docs/design.md)"
done

# A file's includes against the modules it may use. $1 file, $2 its module, $3 what it may use.
check_file() {
    local f=$1 mod=$2 allowed=" $2 $3 " ln line target m
    while IFS=: read -r ln line; do
        target=${line#*\"}
        target=${target%%\"*}
        case $target in
        apbot/*.h)
            m=${face[$(basename "$target" .h)]:-}
            [[ -n $m ]] || {
                complain "$f:$ln: includes $target, which is no public face"
                continue
            }
            ;;
        helpers/*)
            [[ $mod == tools ]] || complain "$f:$ln: only the tools and tests use the test helpers ($target)"
            continue # the soak reuses the tests' ground-truth checks
            ;;
        */*)
            m=${target%%/*}
            if [[ $mod == cli || $mod == tools ]]; then
                complain "$f:$ln: the command layer and the tools use only include/apbot/ (not $target)"
                continue
            fi
            ;;
        *)
            continue # a header of the file's own folder
            ;;
        esac
        [[ $allowed == *" $m "* ]] ||
            complain "$f:$ln: module $mod includes $target of module $m, which it may not use (tests/t_layers.sh)"
    done < <(grep -n '^#include "' "$f" || true)
}

for d in bot/*/; do
    m=$(basename "$d")
    for f in "$d"*.[ch]; do
        if [[ $m == cli ]]; then
            check_file "$f" cli "${may[lib]} lib"
        else
            check_file "$f" "$m" "${may[$m]}"
        fi
    done
done
for f in bot/*.c; do
    check_file "$f" lib "${may[lib]}"
done
for f in include/apbot/*.h; do
    n=$(basename "$f" .h)
    m=${face[$n]:-lib}
    # A public header includes public headers only (the command layer cannot see bot/).
    while IFS=: read -r ln line; do
        complain "$f:$ln: a public header includes a module's private header: $line"
    done < <(grep -n '^#include "' "$f" | grep -v '"apbot/' || true)
    check_file "$f" "$m" "${may[$m]}"
done
for f in tools/*.c; do
    check_file "$f" tools "${may[lib]} lib"
done

if ((bad)); then
    echo "t_layers: FAILED (docs/design.md draws the modules and what each may use)" >&2
    exit 1
fi
echo "t_layers: every include follows the module graph"
