#!/usr/bin/env bash
# docs/design.md shows the per-item state table as machine_next() implements it: the block
# between its machine-table markers must be exactly what tools/machine_table.c prints from the
# code. When the machine changes, `make design-table` writes the new table into the document.
# Its folder table names every source file of the library.
set -euo pipefail
src=${APBOT_SRC:?}
bin=${APBOT_MACHINE_TABLE:?}
doc=$src/docs/design.md

want=$("$bin")
have=$(sed -n '/^<!-- machine-table:begin -->$/,/^<!-- machine-table:end -->$/p' "$doc" | sed '1d;$d')
[[ -n $want ]] || { echo "t_design: machine-table printed nothing" >&2; exit 1; }
if [[ $want != "$have" ]]; then
    echo "t_design: docs/design.md's state table differs from machine.c (run make design-table):" >&2
    diff <(printf '%s\n' "$have") <(printf '%s\n' "$want") >&2 || true
    exit 1
fi
# Every code reference to a design document names this one.
if grep -rn 'DESIGN\.md' "$src/bot" "$src/include" "$src/tests" "$src/tools" "$src/docs" "$src/README.md" \
    --include='*.[ch]' --include='*.md' --include='*.sh' | grep -v 't_design.sh'; then
    echo "t_design: the lines above cite DESIGN.md; the repository's design is docs/design.md" >&2
    exit 1
fi
# The folder table names every file of the library (by its name without the extension).
missing=0
while IFS= read -r f; do
    b=$(basename "$f")
    b=${b%.*}
    if ! grep -qw -- "$b" "$doc"; then
        echo "t_design: docs/design.md does not name ${f#"$src"/} (add it to the folder table)" >&2
        missing=1
    fi
done < <(find "$src/bot" "$src/include" -name '*.[ch]' | sort)
[[ $missing = 0 ]] || exit 1
echo "t_design: docs/design.md holds machine.c's table ($(printf '%s\n' "$want" | wc -l) lines)"
