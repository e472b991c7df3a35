#!/bin/sh
# Does a change alter how results are shown? One results file, rendered by two checkouts of pkb: `pkb report`
# (table at 120 columns, --json, --html) and `pkb leaderboard`, compared byte for byte. A refactor must leave
# all four identical (refactor_identity.sh checks the runs that write the file).
#   sh benchmarks/report_identity.sh RESULTS.sqlite BEFORE_CHECKOUT AFTER_CHECKOUT
set -u
db=$(realpath "$1"); out=$(mktemp -d)
for side in before after; do
  [ "$side" = before ] && code=$(realpath "$2") || code=$(realpath "$3")
  pkb() { (cd "$code" && PYTHONPATH="$code" COLUMNS=120 python -c \
      "from pkb.cli.main import main; raise SystemExit(main())" "$@"); }
  pkb report --db "$db" > "$out/table_$side" 2>&1
  pkb report --db "$db" --json > "$out/json_$side" 2>&1
  pkb report --db "$db" --html "$out/html_$side" > /dev/null 2>&1
  pkb leaderboard --db "$db" > "$out/leaderboard_$side" 2>&1
done
status=0
for what in table json html leaderboard; do
  if cmp -s "$out/${what}_before" "$out/${what}_after"; then echo "$what: identical ($(wc -c < "$out/${what}_after") bytes)"
  else echo "$what: DIFFERS (diff $out/${what}_before $out/${what}_after)"; status=1; fi
done
exit $status
