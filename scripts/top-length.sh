#!/usr/bin/env bash
# top-length.sh - the longest functions of the C code, as curl's scripts/top-length reports
# them: a function is counted from the line of its opening brace at column 0 to its closing
# brace at column 0 (clang-format's Linux braces put them there), blank lines included.
#
# usage: scripts/top-length.sh [--top N] [--max LINES] [DIR...]   (default: bot, 20 shown)
# With --max, exits 1 when a function is longer than LINES, naming it.
set -euo pipefail
top=20
max=0
dirs=()
while (($#)); do
    case $1 in
    --top) top=$2; shift 2 ;;
    --max) max=$2; shift 2 ;;
    *) dirs+=("$1"); shift ;;
    esac
done
((${#dirs[@]})) || dirs=(bot)
cd "$(dirname "$0")/.."

list=$(find "${dirs[@]}" -name '*.c' -print0 | sort -z | xargs -0 awk '
    FNR == 1 { name = ""; start = 0 }
    /^[A-Za-z_].*\(/ && !/;[ \t]*$/ { cand = $0; sub(/\(.*/, "", cand); n = split(cand, w, /[ \t*]+/); name = w[n] }
    /^\{/ && name != "" { start = FNR; fn = name }
    /^\}/ && start { printf "%d %s:%d %s\n", FNR - start + 1, FILENAME, start, fn; start = 0; name = "" }
' | sort -rn)

echo "longest functions (lines, file:line of the opening brace, name):"
# awk, not head: head would stop reading, and printf's SIGPIPE fails the script (pipefail)
printf '%s\n' "$list" | awk -v n="$top" 'NR <= n { printf "  %5d  %-40s %s\n", $1, $2, $3 }'
if ((max > 0)); then
    over=$(printf '%s\n' "$list" | awk -v m="$max" '$1 > m')
    if [[ -n $over ]]; then
        echo "functions longer than $max lines (split them at their own steps):" >&2
        printf '%s\n' "$over" | awk '{ printf "  %5d  %s %s\n", $1, $2, $3 }' >&2
        exit 1
    fi
fi
