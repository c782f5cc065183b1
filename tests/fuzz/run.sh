#!/usr/bin/env bash
# run.sh - runs libFuzzer targets one after the other, each for a given time on its seed corpus,
# and prints one line per target at the end: executions, coverage, findings.
#
#   tests/fuzz/run.sh BUILD_DIR SECONDS [NAME...]     (NAME: csvin, page, ...; default: all)
#
# New inputs go to BUILD_DIR/fuzz-corpus/NAME. The seeds are read, never written: the target's
# own in tests/fuzz/corpus/NAME and the repository's files of the kind it reads (origins below:
# test data, bundled flows). Crashes, leaks, timeouts and out-of-memory inputs go to
# BUILD_DIR/fuzz-findings/NAME/, the log to BUILD_DIR/fuzz-logs/NAME.log. A target stops at its
# first finding; the script exits 1 when any target found something. Runs under nice (the
# machine is shared); FUZZ_NICE=0 to run at normal priority, FUZZ_ARGS for more libFuzzer flags.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${1:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
seconds=${2:?usage: run.sh BUILD_DIR SECONDS [NAME...]}
shift 2
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
    for f in "$here"/fuzz_*.c; do
        n=$(basename "$f" .c)
        names+=("${n#fuzz_}")
    done
fi
# Seeds that live elsewhere in the repository (test data, bundled flows), relative to its root,
# one per line: a directory (its files, recursively) or a file, where the directory also holds
# other kinds. libFuzzer takes only directories as corpora, so run.sh links them into
# BUILD_DIR/fuzz-seeds/NAME/, made afresh for each run. Files over 99 KiB are left out:
# the largest seed sets the largest input libFuzzer generates, and a 110 KB CSV or a 3 MB UBL
# file made a target several times slower.
origins() {
    cd "$root" || exit 1
    case $1 in
    csvin) printf '%s\n' fixtures/invoices tests/data/*.csv ;;
    ublin) printf '%s\n' tests/data/einvoices/ubl ;;
    ciiin) printf '%s\n' tests/data/einvoices/cii tests/data/einvoices/facturx/*.xml ;;
    flow) printf '%s\n' flows/*.xml tests/data/flows tests/data/pages/*.xml ;;
    page | page_fast) printf '%s\n' tests/data/pages/*.html ;;
    har) printf '%s\n' tests/data/har/*.har ;;
    esac
}
nice_n=${FUZZ_NICE:-10}
summary=()
found_any=0
for n in "${names[@]}"; do
    bin="$build/fuzz/fuzz_$n"
    if [ ! -x "$bin" ]; then
        summary+=("$(printf '%-9s not built (%s)' "$n" "$bin")")
        found_any=1
        continue
    fi
    work="$build/fuzz-corpus/$n"
    findings="$build/fuzz-findings/$n"
    log="$build/fuzz-logs/$n.log"
    mkdir -p "$work" "$findings" "$(dirname "$log")"
    args=(-max_total_time="$seconds" -print_final_stats=1 -timeout=30 -rss_limit_mb=2048
          -artifact_prefix="$findings/")
    kin=$n # page_fast reads pages: page's dictionary and seeds
    [ "$n" = page_fast ] && kin=page
    [ -f "$here/$kin.dict" ] && args+=(-dict="$here/$kin.dict")
    seeds=()
    [ -d "$here/corpus/$kin" ] && seeds+=("$here/corpus/$kin")
    links="$build/fuzz-seeds/$n"
    rm -rf "$links"
    mkdir -p "$links"
    while IFS= read -r o; do
        if [ ! -e "$root/$o" ]; then
            echo "run.sh: seed origin $o of $n is missing" >&2
            found_any=1
            continue
        fi
        while IFS= read -r -d '' f; do
            rel=${f#"$root"/}
            ln -s "$f" "$links/${rel//\//_}"
        done < <(find "$root/$o" -type f -size -100k -print0)
    done < <(origins "$n")
    seeds+=("$links")
    echo "fuzz_$n: ${seconds}s ($log)"
    before=$(find "$findings" -type f | wc -l)
    # shellcheck disable=SC2086
    nice -n "$nice_n" "$bin" "${args[@]}" ${FUZZ_ARGS:-} "$work" "${seeds[@]}" >"$log" 2>&1
    rc=$?
    after=$(find "$findings" -type f | wc -l)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    cov=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -n 's/.*\(cov: [0-9]*\) \(ft: [0-9]*\).*/\1 \2/p')
    new=$((after - before))
    if [ "$rc" -ne 0 ] || [ "$new" -gt 0 ]; then
        found_any=1
        what=$(grep -m1 -E '^==[0-9]+==ERROR|^SUMMARY|runtime error|ALARM|out-of-memory' "$log" |
            cut -c1-120)
        status="FINDING (exit $rc, $new new in $findings): ${what:-see $log}"
    else
        status="no findings"
    fi
    summary+=("$(printf '%-9s %12s execs  %-22s %s' "$n" "${execs:-?}" "${cov:-cov: ?}" "$status")")
done
echo
echo "fuzz summary (${seconds}s each):"
printf '%s\n' "${summary[@]}"
exit $found_any
