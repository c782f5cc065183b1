#!/usr/bin/env bash
# t_systemd.sh - the units in contrib/systemd/ are what systemd accepts and what apbot reads:
# each passes `systemd-analyze verify` (with ExecStart= pointing at the built apbot); each
# service's exposure (`systemd-analyze security --offline`) is at most 2.0 ("OK"); every
# LoadCredential= name is one apbot reads from $CREDENTIALS_DIRECTORY (apbot refuses nothing
# it does not know: a misspelt name would silently leave the secret out); the options the
# units pass to apbot are ones its commands accept (--help of each); the queue's directory is
# the only writable path and the timers are Persistent=.
# Env (set by ctest): APBOT_BIN, APBOT_SRC. Skipped without systemd-analyze (make test
# installs systemd).
set -euo pipefail

: "${APBOT_BIN:?APBOT_BIN not set}"
SRC=${APBOT_SRC:-$(cd "$(dirname "$0")/.." && pwd)}

. "$SRC/tests/lib/harness.sh"
harness_init systemd
if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze is absent (make test installs systemd)"
    exit 0
fi

units=$work/units
mkdir -p "$units"
for u in "$SRC"/contrib/systemd/*; do
    sed "s|/usr/local/bin/apbot|$APBOT_BIN|g" "$u" >"$units/$(basename "$u")"
done
n=$(find "$units" -name '*.service' -o -name '*.timer' | wc -l)
[ "$n" -ge 6 ] || fail "only $n units in contrib/systemd"

known="erp-user erp-password review-password smtp-user smtp-password"
for u in "$units"/*; do
    name=$(basename "$u")
    # a template is verified as an instance of itself
    target=$u
    case $name in *@.service)
        target=$units/${name%@.service}@apbot-run.service.service
        cp "$u" "$target" ;;
    esac
    if out=$(cd "$units" && systemd-analyze verify "$target" 2>&1); then
        ok "$name: systemd-analyze verify"
    else
        fail "$name: systemd-analyze verify: $out"
    fi
    case $name in *.service)
        exposure=$(systemd-analyze security --offline=true "$target" 2>/dev/null |
            sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p')
        if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e <= 2.0) }'; then
            ok "$name: exposure $exposure"
        else
            fail "$name: exposure '$exposure' (want at most 2.0)"
        fi
        for c in $(sed -n 's/^LoadCredential=\([^:]*\):.*/\1/p' "$u"); do
            case " $known " in *" $c "*) ok "$name: credential $c is one apbot reads" ;;
            *) fail "$name: LoadCredential=$c is no credential apbot reads ($known)" ;; esac
        done
        grep -q '^ProtectSystem=strict$' "$u" || fail "$name: ProtectSystem=strict missing"
        grep -q '^NoNewPrivileges=yes$' "$u" || fail "$name: NoNewPrivileges=yes missing"
        grep -q '^PrivateTmp=yes$' "$u" || fail "$name: PrivateTmp=yes missing"
        grep -q '^StateDirectory=apbot$' "$u" || fail "$name: StateDirectory=apbot missing"
        if grep -q '^ReadWritePaths=' "$u"; then fail "$name: more writable paths than the queue's"; fi
        # the command's options are ones apbot accepts
        cmd=$(sed -n '/^ExecStart=/,/[^\\]$/p' "$u" | tr -d '\\\n' | sed 's/^ExecStart=[^ ]* //')
        sub=$(printf '%s' "$cmd" | awk '{ print $1 }')
        help=$("$APBOT_BIN" "$sub" --help 2>&1 || true)
        for opt in $(printf '%s' "$cmd" | grep -o -- '--[a-z-]*' | sort -u); do
            # a here-string, not printf | grep -q: grep -q leaves at its first match, and a
            # printf still writing the rest then dies of SIGPIPE, which pipefail takes for a
            # miss (1 in about 3,000 on a loaded machine)
            if grep -q -- "$opt" <<<"$help"; then ok "$name: apbot $sub $opt"
            else fail "$name: apbot $sub does not know $opt"; fi
        done ;;
    *.timer)
        grep -q '^Persistent=true$' "$u" || fail "$name: Persistent=true missing" ;;
    esac
done

harness_finish systemd
