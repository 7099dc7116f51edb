# CLI tests of the Dynamo layer: sessions with the KV router and host offload, the planner, one-line errors.
set(SS $<TARGET_FILE:servesim>)
# One session of 3 turns on 2 replicas: the kv router keeps it on one replica (per-replica hit rates
# 0 % and the rest), and the per-turn table follows.
add_test(NAME cli_dynamo_sessions_kv COMMAND ${SS} simulate --model llama-3.1-8b --gpu h200 --gpus 2 --tp 1 --precision fp8
         --router kv --sessions 1 --turns 3 --isl 8000 --turn-isl 1000 --osl 100 --kv-offload cpu:100)
set_tests_properties(cli_dynamo_sessions_kv PROPERTIES PASS_REGULAR_EXPRESSION
  "per replica: (0\\.0% [1-9][0-9.]*%|[1-9][0-9.]*% 0\\.0%).*offload cpu: 100 GiB per replica.*kv router: expected.*per turn of the sessions")
add_test(NAME cli_dynamo_sessions_conflict COMMAND ${SS} simulate --sessions 4 --concurrency 8)
set_tests_properties(cli_dynamo_sessions_conflict PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_dynamo_offload_bad COMMAND ${SS} simulate --kv-offload ram:10)
set_tests_properties(cli_dynamo_offload_bad PROPERTIES PASS_REGULAR_EXPRESSION "--kv-offload: expected cpu:GIB\\[,disk:GIB\\]")
# An empty item of the list was dropped (cpu:8,,disk:100 read as cpu:8,disk:100): one line now.
add_test(NAME cli_dynamo_offload_empty_item COMMAND ${SS} memory --model llama-3.1-8b --gpu h100 --precision fp8 --tp 1 --context 2000 --kv-offload cpu:8,,disk:100)
set_tests_properties(cli_dynamo_offload_empty_item PROPERTIES PASS_REGULAR_EXPRESSION "--kv-offload: item 2 of 'cpu:8,,disk:100' is empty")
# 10 requests/s evenly spaced for 20 minutes at 4 per worker: 3 workers, 1.0 GPU-hour.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/flat_profile.csv "time_s,rps\n0,10\n1200,10\n")
add_test(NAME cli_dynamo_planner COMMAND ${SS} planner --model llama-3.1-8b --gpu h200 --gpus 1 --tp 1 --precision fp8
         --isl 1000 --osl 100 --load-profile ${CMAKE_CURRENT_BINARY_DIR}/flat_profile.csv --arrivals uniform
         --adjustment-interval 60 --replica-rps 4 --ttft-ms 2000 --itl-ms 100 --no-fixed-fleet)
set_tests_properties(cli_dynamo_planner PROPERTIES PASS_REGULAR_EXPRESSION "GPU-hours 1\\.0 against 1\\.0 for the fixed fleet")
add_test(NAME cli_dynamo_planner_no_slo COMMAND ${SS} planner --peak-rps 5)
set_tests_properties(cli_dynamo_planner_no_slo PROPERTIES PASS_REGULAR_EXPRESSION "planner: ttft_ms: give the SLO")
# memory --kv-offload: 100 GiB of host memory hold 51,200 blocks of 2 MiB (Llama-3.1-8B BF16, TP1).
add_test(NAME cli_dynamo_memory_offload COMMAND ${SS} memory --model llama-3.1-8b --gpu h200 --precision bf16 --tp 1 --context 8000
         --kv-offload cpu:100)
set_tests_properties(cli_dynamo_memory_offload PROPERTIES PASS_REGULAR_EXPRESSION
  "cpu tier +100\\.00 GiB = 51200 blocks = 819200 tokens.*onboard 8000 tokens +499 blocks, 998\\.00 MiB per GPU: 19\\.045 ms")
# Disaggregated: 10 requests/s for 20 minutes at 4 per prefill and 8 per decode worker: 3 prefill
# + 2 decode workers (5 GPUs at TP1), 5/3 = 1.7 GPU-hours.
add_test(NAME cli_dynamo_planner_disagg COMMAND ${SS} planner --model llama-3.1-8b --gpu h200 --tp 1 --precision fp8
         --topology disagg --isl 1000 --osl 100 --load-profile ${CMAKE_CURRENT_BINARY_DIR}/flat_profile.csv --arrivals uniform
         --adjustment-interval 60 --prefill-rps 4 --decode-rps 8 --ttft-ms 2000 --itl-ms 100 --no-fixed-fleet)
set_tests_properties(cli_dynamo_planner_disagg PROPERTIES PASS_REGULAR_EXPRESSION
  "prefill +prefill held +decode +decode held.*\n0\\.00 +10\\.00 +10\\.00 +3 +3 +2 +2 .*GPU-hours 1\\.7 against 1\\.7 for the fixed fleet")
add_test(NAME cli_dynamo_planner_bad_rule COMMAND ${SS} planner --peak-rps 5 --ttft-ms 500 --rule queue)
set_tests_properties(cli_dynamo_planner_bad_rule PROPERTIES PASS_REGULAR_EXPRESSION "planner: rule: expected throughput or load, got 'queue'")
# Reserved + on-demand over a two-level load (6 then 14 requests/s for an hour each, 4 per worker):
# 2 reserved GPUs x 2 h x $5 + 1.967 GPU-hours x $7.912 = $35.56, the cheapest of 0, 2 and 4 reserved.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/two_level_profile.csv "time_s,rps\n0,6\n3600,6\n3600.001,14\n7200,14\n")
add_test(NAME cli_dynamo_planner_reserved COMMAND ${SS} planner --model llama-3.1-8b --gpu h200 --gpus 1 --tp 1 --precision fp8
         --isl 1000 --osl 100 --load-profile ${CMAKE_CURRENT_BINARY_DIR}/two_level_profile.csv --arrivals uniform
         --adjustment-interval 60 --replica-rps 4 --ttft-ms 2000 --itl-ms 100 --no-fixed-fleet --reserved-price 5)
set_tests_properties(cli_dynamo_planner_reserved PROPERTIES PASS_REGULAR_EXPRESSION
  "2  2 x 2\\.00 h x 5\\.000 = 20\\.00 +1\\.967 +1\\.967 x 7\\.912 = 15\\.56 +35\\.56 +cheapest.*\\$20\\.00 \\+ \\$15\\.56 = \\$35\\.56")
# Sessions with host offload on 2 prefill + 1 decode workers: the per-turn table and the tier line.
add_test(NAME cli_dynamo_sessions_disagg COMMAND ${SS} simulate --model llama-3.1-8b --gpu h200 --tp 1 --precision fp8
         --topology disagg --prefill-workers 2 --decode-workers 1 --router kv --sessions 4 --turns 3 --isl 4000
         --turn-isl 500 --osl 100 --enable-prefix-caching --kv-offload cpu:100)
set_tests_properties(cli_dynamo_sessions_disagg PROPERTIES PASS_REGULAR_EXPRESSION
  "offload cpu: 100 GiB per replica.*kv router: expected.*% in its offload tiers.*per turn of the sessions")
# A short window of the diurnal curve (3 minutes from its trough) never reaches --peak-rps: the
# header says the peak it simulated is the window's, not the flag's.
add_test(NAME cli_planner_short_window_peak COMMAND $<TARGET_FILE:servesim> planner --model llama-3.1-8b --gpu h200 --tp 1
         --isl 500 --osl 50 --peak-rps 5 --ttft-ms 1000 --itl-ms 50 --hours 0.05 --replica-rps 3)
set_tests_properties(cli_planner_short_window_peak PROPERTIES PASS_REGULAR_EXPRESSION
  "peak [0-9.]+ requests/s \\(the most the simulated hours reach; --peak-rps 5 falls outside them\\)")
