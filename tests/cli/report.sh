#!/usr/bin/env bash
# report.sh GRPO — `grpo report LOG_DIR -o REPORT.html` on a small log dir: the page holds the
# curves (SVG), the run file and the last step's completions, with every text HTML-escaped, and
# its tags balance (checked with a tag stack, no browser here).
set -uo pipefail
grpo=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
printf '{"step":1,"reward":0.1,"kl":0.01}\n{"step":2,"reward":0.4,"kl":0.02}\n' > "$dir/metrics.jsonl"
printf '[grpo]\nbeta = 0.04 ; <b>\n' > "$dir/config.ini"
cat > "$dir/completions.jsonl" <<'JSON'
{"step":1,"prompt":"old","completion":"old","rewards":{"acc":0},"reward":0,"advantage":0}
{"step":2,"prompt":"1+1=","completion":"<script>alert(1)</script> & 2","rewards":{"acc":1,"fmt":null},"reward":1,"advantage":0.5}
JSON
"$grpo" report "$dir" -o "$dir/r.html" || { echo "FAIL: grpo report exited $?"; exit 1; }
html=$(cat "$dir/r.html")
failed=0
for want in '<svg' '>reward</text>' 'beta = 0.04 ; &lt;b&gt;' '<h3>step 2</h3>' \
            '&lt;script&gt;alert(1)&lt;/script&gt; &amp; 2' 'acc 1<br>fmt -<br>'; do
    [[ $html == *"$want"* ]] || { echo "FAIL: the report lacks: $want"; failed=1; }
done
[[ $html != *'<script>'* ]] || { echo "FAIL: a completion's <script> reached the page unescaped"; failed=1; }
[[ $html != *'step 1</h3>'* ]] || { echo "FAIL: an older step's completions are shown"; failed=1; }
# tags balance (void and SVG leaf elements aside)
open=$(grep -o '<[a-z0-9]*[ >]' "$dir/r.html" | tr -d '<> ' | grep -v -x -e meta -e br -e rect -e line -e polyline | sort | uniq -c)
close=$(grep -o '</[a-z0-9]*>' "$dir/r.html" | tr -d '</>' | sort | uniq -c)
[[ $open == "$close" ]] || { echo "FAIL: unbalanced tags:"; diff <(echo "$open") <(echo "$close"); failed=1; }
[[ $failed == 0 ]] && echo "ok   report: curves, run file, escaped completions, balanced tags"
exit $failed
