# CLI tests of `servesim simulate` and `servesim sweep`: aiperf JSON layout, summary, sweep
# CSV/JSON, and one-line errors for impossible configurations.
set(SS $<TARGET_FILE:servesim>)
add_test(NAME cli_simulate_acceptance COMMAND ${SS} simulate --model nemotron-3-super --gpu h200 --gpus 8 --tp 8
         --precision fp8 --isl 2000 --osl 500 --concurrency 32 --requests 1000 --seed 1 --format json)
set_tests_properties(cli_simulate_acceptance PROPERTIES PASS_REGULAR_EXPRESSION
  "\"request_throughput\".*\"unit\": \"requests/sec\"|\"time_to_first_token\".*\"p99\"")
add_test(NAME cli_simulate_summary COMMAND ${SS} simulate --concurrency 4 --requests 40 --isl 500 --osl 50)
set_tests_properties(cli_simulate_summary PROPERTIES PASS_REGULAR_EXPRESSION "inter_token_latency.*request_throughput")
add_test(NAME cli_simulate_flags COMMAND ${SS} simulate --request-rate 2 --requests 30 --isl 1000 --isl-stddev 100
         --osl 64 --max-num-seqs 16 --max-num-batched-tokens 2048 --block-size 32 --enable-prefix-caching
         --gpu-memory-utilization 0.85 --router least_kv_load --gpus 16 --format json)
set_tests_properties(cli_simulate_flags PROPERTIES PASS_REGULAR_EXPRESSION "\"output_token_throughput\"")
add_test(NAME cli_sweep_csv COMMAND ${SS} sweep --concurrency 1,2,4 --requests 20 --isl 500 --osl 20 --format csv --threads 2)
set_tests_properties(cli_sweep_csv PROPERTIES PASS_REGULAR_EXPRESSION "^concurrency,request_count.*\n1,20,.*\n2,20,.*\n4,20,")
add_test(NAME cli_sweep_rate_json COMMAND ${SS} sweep --request-rate 0.5,1 --requests 10 --isl 200 --osl 10 --format json)
set_tests_properties(cli_sweep_rate_json PROPERTIES PASS_REGULAR_EXPRESSION "\"request_rate\": \\[")
foreach(bad IN ITEMS "--gpus;0" "--tp;3;--gpus;3" "--osl;0" "--request-rate;-1" "--gpus;1;--tp;1;--precision;bf16" "--model;nope" "--router;random")
  string(REPLACE ";" "_" name "${bad}")
  add_test(NAME cli_simulate_error${name} COMMAND ${SS} simulate ${bad} --requests 5)
  set_tests_properties(cli_simulate_error${name} PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: [^\n]+\n$")
endforeach()
