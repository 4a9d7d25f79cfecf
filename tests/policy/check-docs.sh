#!/usr/bin/env bash
# docs/POLICY.md must carry the key table exactly as `hakmem config list --markdown` prints it.
set -euo pipefail
tool=$1 doc=$2
missing=0
while IFS= read -r line; do
  grep -qxF -- "$line" "$doc" || { echo "docs/POLICY.md lacks: $line"; missing=1; }
done < <("$tool" config list --markdown)
rows_doc=$(grep -c '^| `\[' "$doc")
rows_tool=$("$tool" config list --markdown | grep -c '^| `\[')
[ "$rows_doc" -eq "$rows_tool" ] || { echo "docs/POLICY.md has $rows_doc key rows, the table $rows_tool"; missing=1; }
[ $missing -eq 0 ] && echo "docs/POLICY.md matches the key table ($rows_tool keys)"
exit $missing
