#!/usr/bin/env bash
# options.sh GRPO SRC — every subcommand refuses an option that does not apply to the chosen mode,
# or that it does not know, with exit status 2 and a message naming the option (and the mode).
# One row per case: the words of the command line (a file argument need not exist: options are
# checked before any file is read), then after "=>" the text the message must contain.
set -uo pipefail
grpo=$1
cases=(
  "tokenize --tokenizer T --skip-special => --skip-special does not apply to encoding"
  "tokenize --tokenizer T --decode --no-special => --no-special does not apply to --decode"
  "tokenize --tokenizer T --bogus => '--bogus'"
  "config keys --no-train => --no-train does not apply to keys"
  "config keys --plugin-path D => --plugin-path does not apply to keys"
  "config check F --bogus => '--bogus'"
  "init-model D --experts 3 => --experts does not apply to a dense model"
  "init-model D --aux-alpha 0.5 => --aux-alpha does not apply to a dense model"
  "generate --model M --prompt-ids 1 --seed 3 => --seed does not apply to greedy decoding"
  "generate --model M --prompt-ids 1 --greedy --temperature 1 => --temperature does not apply to --greedy"
  "template chatml --line 2 --messages [] => --line does not apply to --messages"
  "template chatml --messages [] --data F => --messages does not apply to --data"
  "template chatml --format {user} --data F => a TEMPLATE argument does not apply to --format"
  "train R.ini --out D => '--out'"
  "sft R.ini --bogus => '--bogus'"
  "eval R.ini --resume => '--resume'"
  "reward score --config R.ini --input S --bogus => '--bogus'"
  "plugins list --bogus => '--bogus'"
  "model info D --bogus => '--bogus'"
  "logprobs --model M --input I --bogus => --bogus"
  "plot M.jsonl -o O.svg --bogus => '--bogus'"
  "report D -o R.html --bogus => '--bogus'"
  "pack list --bogus => --bogus"
  "version --bogus => '--bogus'"
  "merge-lora B A O --bogus => '--bogus'"
)
failed=0 subcommands=()
for c in "${cases[@]}"; do
    words=${c%% => *} want=${c#* => }
    read -r -a argv <<< "$words"
    subcommands+=("${argv[0]}")
    msg=$("$grpo" "${argv[@]}" 2>&1 >/dev/null)
    rc=$?
    if [[ $rc -ne 2 ]]; then
        echo "FAIL grpo $words: exit $rc, expected 2 ($msg)"; failed=1
    elif [[ $msg != *"$want"* ]]; then
        echo "FAIL grpo $words: message lacks '$want': $msg"; failed=1
    else
        echo "ok   grpo $words"
    fi
done
# every subcommand of `grpo --help` has a row
for sub in $("$grpo" --help 2>&1 | awk '/^commands:/ {on = 1; next} on && NF {print $1}'); do
    if [[ " ${subcommands[*]} " != *" $sub "* ]]; then
        echo "FAIL: subcommand '$sub' has no row in tests/cli/options.sh"; failed=1
    fi
done
exit $failed
