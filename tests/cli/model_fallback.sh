#!/usr/bin/env bash
# model_fallback.sh GRPO — a model pack that claims an architecture but cannot be loaded (its
# library is not an ELF file) and stands first on the plugin path does not stop a command that
# another pack (the built-in dense pack) can serve: one warning names it, and the model runs.
set -uo pipefail
grpo=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$grpo" init-model "$dir/m" --layers 1 --hidden 32 --heads 2 --kv-heads 1 --intermediate 64 \
    >/dev/null || { echo "FAIL: init-model"; exit 1; }
mkdir "$dir/broken"
printf '[pack]\nname = brokenllama\nversion = 0.1.0\nabi = 1.3\nlibrary = libbroken.so\n\n' \
    > "$dir/broken/pack.ini"
printf '[brokenllama.m]\nkind = model\ndescription = claims Llama\narchitectures = LlamaForCausalLM\n' \
    >> "$dir/broken/pack.ini"
echo "not a library" > "$dir/broken/libbroken.so"
out=$("$grpo" generate --model "$dir/m" --prompt-ids 1,2 --max-new-tokens 2 \
      --plugin-path "$dir/broken" 2>"$dir/err")
rc=$?
err=$(cat "$dir/err")
if [[ $rc -ne 0 || $out != *'"completion_ids":['* ]]; then
    echo "FAIL: exit $rc, stdout '$out', stderr: $err"; exit 1
fi
if [[ $err != *"model plugin brokenllama.m cannot be loaded, trying the next serving"* ]]; then
    echo "FAIL: no warning naming the broken pack: $err"; exit 1
fi
echo "ok   a broken pack serving LlamaForCausalLM was skipped with: $err"
