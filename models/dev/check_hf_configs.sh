#!/bin/sh
# Developer check: every Hugging Face config.json in a folder either imports, or fails with one
# line naming what is unsupported (never a crash, a stack trace or several lines).
#   models/dev/check_hf_configs.sh FOLDER [SERVESIM]      (default SERVESIM: build/servesim)
# Files named *hf_quant_config.json are siblings read with their config, not configs themselves.
# Prints one line per config: "ok   NAME  blocks  total/active B  checkpoint" or "fail NAME  error".
dir=${1:?usage: check_hf_configs.sh FOLDER [SERVESIM]}
bin=${2:-build/servesim}
ok=0; unsupported=0; bad=0
for f in "$dir"/*.json; do
  case "$f" in *hf_quant_config.json) continue ;; esac
  name=$(basename "$f")
  out=$("$bin" model --model-file "$f" --format json 2>&1); rc=$?
  if [ $rc -eq 0 ]; then
    ok=$((ok + 1))
    printf 'ok   %-58s %s\n' "$name" "$(printf '%s' "$out" | /usr/bin/python3 -c 'import json,sys; j=json.load(sys.stdin); print(j["layers"], "blocks", "%.2f/%.2f B" % (j["llm_total_params"]/1e9, j["active_params"]/1e9), j["checkpoint_precision"])')"
  elif [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q '^servesim: error: .*unsupported'; then
    unsupported=$((unsupported + 1))
    printf 'fail %-58s %s\n' "$name" "$out"
  else
    bad=$((bad + 1))
    printf 'BAD  %-58s rc %s: %s\n' "$name" "$rc" "$out"
  fi
done
echo "imported $ok, unsupported (one line) $unsupported, bad $bad"
[ $bad -eq 0 ]
