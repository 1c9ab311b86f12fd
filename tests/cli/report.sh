#!/usr/bin/env bash
# report.sh GRPO [--browser] — `grpo report LOG_DIR -o REPORT.html` on a small log dir: the page
# holds the curves (SVG), the run file and the last step's completions, with every text
# HTML-escaped, and its tags balance (checked with a tag stack).
# --browser: the same page in headless Chromium (Debian's chromium; exit 77 = skipped when it is
# not installed): it loads with no console message, the browser's own DOM has the SVG curves, the
# completions table and the completion's <script> as text (no script element), and a screenshot
# holds far more than a blank page's.
set -uo pipefail
grpo=$1
browser=${2:-}
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
[[ $browser == --browser && $failed == 0 ]] || exit $failed

chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
# scripts/test.sh installs it: a skip outside CI only (tests/cli/skip.sh)
. "$(dirname "$0")/skip.sh"
[[ -n $chrome ]] || skip_or_fail "no headless Chromium (apt-get install chromium)"
# headless, as root in CI (no sandbox), a private profile, nothing fetched from the network
run_chrome() {
  timeout 120 "$chrome" --headless --no-sandbox --disable-gpu --no-first-run \
    --user-data-dir="$dir/profile" --enable-logging=stderr --v=0 "$@"
}
run_chrome --dump-dom "file://$dir/r.html" > "$dir/dom.html" 2> "$dir/chrome.log" ||
  { echo "FAIL: chromium could not load the report:"; tail -5 "$dir/chrome.log"; exit 1; }
if grep -q 'CONSOLE' "$dir/chrome.log"; then
  echo "FAIL: the page wrote to the browser console:"; grep 'CONSOLE' "$dir/chrome.log"; failed=1
fi
dom=$(cat "$dir/dom.html")
for want in '<svg' '>reward</text>' '<polyline' '<td><pre>1+1=</pre></td>' \
            '&lt;script&gt;alert(1)&lt;/script&gt; &amp; 2'; do
  [[ $dom == *"$want"* ]] || { echo "FAIL: the browser's DOM lacks: $want"; failed=1; }
done
[[ $dom != *'<script'* ]] || { echo "FAIL: the browser made a script element"; failed=1; }
run_chrome --screenshot="$dir/page.png" --window-size=1000,1400 "file://$dir/r.html" \
  2>> "$dir/chrome.log" >/dev/null
printf '<!DOCTYPE html><html><body></body></html>' > "$dir/blank.html"
run_chrome --screenshot="$dir/blank.png" --window-size=1000,1400 "file://$dir/blank.html" \
  2>> "$dir/chrome.log" >/dev/null
page=$(stat -c %s "$dir/page.png" 2>/dev/null || echo 0)
blank=$(stat -c %s "$dir/blank.png" 2>/dev/null || echo 0)
if (( blank == 0 || page < 4 * blank )); then
  echo "FAIL: the screenshot ($page bytes) is not much more than a blank page's ($blank bytes)"
  failed=1
fi
[[ $failed == 0 ]] && echo "ok   report in headless Chromium: no console message, curves and table in its DOM, screenshot $page bytes (blank page $blank)"
exit $failed
