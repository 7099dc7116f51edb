# What every run says it ran, and how plan / search / recommend read capacity (steady state,
# prefill-train flags, one statistic, the open-loop plan).
set(SS $<TARGET_FILE:servesim>)
add_test(NAME cli_what_ran_matches_scenario COMMAND ${CMAKE_COMMAND} -DSS=${SS} -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/what_ran.cmake)
add_test(NAME cli_capacity_steady_state COMMAND ${CMAKE_COMMAND} -DSS=${SS} -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/steady_state.cmake)
# The text header of simulate names the run; sweep's table and JSON carry the same block.
add_test(NAME cli_simulate_what_ran_text COMMAND ${SS} simulate --model llama-3.1-8b --gpu h200 --isl 1000 --osl 200
         --concurrency 4 --requests 20 --kv-cache-dtype fp8 -q)
set_tests_properties(cli_simulate_what_ran_text PROPERTIES PASS_REGULAR_EXPRESSION
  "ran: llama-3\\.1-8b, [^\n]*KV cache fp8; 1 x h200[^\n]*\n  engine vllm-[0-9.]+: max_num_seqs [0-9]+, max_num_batched_tokens [0-9]+[^\n]*\n  memory: [0-9]+ KV blocks x 16 tokens per replica; [0-9]+ sequences of 1200 tokens[^\n]*\n  calibration: [^\n]*measured on H200")
add_test(NAME cli_sweep_what_ran COMMAND ${SS} sweep --model llama-3.1-8b --gpu h200 --isl 500 --osl 20 --concurrency 1,2
         --requests 10 --format json)
set_tests_properties(cli_sweep_what_ran PROPERTIES PASS_REGULAR_EXPRESSION "\"what_ran\": {[^}]*\"calibration\"")
# plan: p90 by default, the rule and the statistic in the header, every topology's block.
add_test(NAME cli_plan_header_says_rule COMMAND ${SS} plan --model llama-3.1-8b --instance p5en.48xlarge --nodes 1
         --precision fp8 --tp 1 --topology agg --isl 1000 --osl 100 --ttft-ms 600 --itl-ms 100 --target-tps 1000
         --concurrency 4 --requests 40 -q)
set_tests_properties(cli_plan_header_says_rule PROPERTIES PASS_REGULAR_EXPRESSION
  "ran: llama-3\\.1-8b, [^\n]*KV cache fp8;[^\n]*\n.*Capacity read: closed loop, clients started at spread phases, each point after a warm-up that ends when the loop is steady \\(at most 32 requests per client\\) without a phase barrier, then 40 measured requests; SLO statistic p90\n.*TTFT p90 ms")
# The open-loop plan: at 1 request/s of 1000 + 100 tokens, one TP1 replica of Llama-3.1-8B FP8
# on a p5en (8 replicas) meets the SLO: 1 copy, 1 node.
add_test(NAME cli_plan_open_loop COMMAND ${SS} plan --model llama-3.1-8b --instance p5en.48xlarge --nodes 1
         --precision fp8 --tp 1 --topology agg --isl 1000 --osl 100 --ttft-ms 600 --itl-ms 100 --target-rps 1
         --arrival poisson --concurrency 1 --requests 200 --format json -q)
set_tests_properties(cli_plan_open_loop PROPERTIES PASS_REGULAR_EXPRESSION
  "\"arrival\": \"poisson\".*\"open_loop\": \\[\n *{\n *\"copies\": 1,\n *\"feasible\": true")
add_test(NAME cli_plan_arrival_needs_rate COMMAND ${SS} plan --model llama-3.1-8b --instance p5en.48xlarge --nodes 1
         --isl 1000 --osl 100 --ttft-ms 600 --itl-ms 100 --target-tps 1000 --arrival poisson)
set_tests_properties(cli_plan_arrival_needs_rate PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: --arrival: needs --target-rps[^\n]*\n$")
# --price INSTANCE=USD (repeatable, before or after the subcommand) replaces an instance's $/hour:
# a one-node plan then costs exactly that.
add_test(NAME cli_price_override COMMAND ${SS} plan --model llama-3.1-8b --instance p5en.48xlarge --nodes 1
         --precision fp8 --tp 1 --topology agg --isl 1000 --osl 100 --ttft-ms 600 --itl-ms 100 --target-tps 1000
         --concurrency 4 --requests 40 --price p5en.48xlarge=84.8 --price p5.48xlarge=55 -q)
set_tests_properties(cli_price_override PROPERTIES PASS_REGULAR_EXPRESSION "aggregated +4 +[0-9]+ +1 +8 +1 +84\\.80 ")
add_test(NAME cli_price_listed COMMAND ${SS} --price p5.48xlarge=55.5 list instances --format json)
set_tests_properties(cli_price_listed PROPERTIES PASS_REGULAR_EXPRESSION
  "\"name\": \"p5.48xlarge\",[^]]*\"usd_per_hour\": \"--price on the command line\"\n *},\n *\"usd_per_hour\": 55\\.5")
foreach(bad IN ITEMS "nope.xlarge=3" "p5.48xlarge=-1" "p5.48xlarge" "p5.48xlarge=abc")
  string(MAKE_C_IDENTIFIER "${bad}" name)
  add_test(NAME cli_price_error_${name} COMMAND ${SS} --price ${bad} list instances)
  set_tests_properties(cli_price_error_${name} PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: --price[^\n]+\n$")
endforeach()
# The open-loop recommend: the offered load in the header, the rate each copy is offered in the
# table, and what one copy fewer breaks.
add_test(NAME cli_recommend_open_loop COMMAND ${SS} recommend --model llama-3.1-8b --gpu h200 --precision bf16 --topology agg
         --tp 1,2 --dp 1 --isl 2000 --osl 200 --ttft-ms 300 --itl-ms 15 --target-rps 60 --arrival poisson -q)
set_tests_properties(cli_recommend_open_loop PROPERTIES PASS_REGULAR_EXPRESSION
  "Offered load: 60 requests/s, poisson arrivals \\(open loop\\).*req/s per copy.*H200 +p5en\\.48xlarge +agg TP[12] [^\n]* (ttft|itl|ttft\\+itl)\n")
add_test(NAME cli_recommend_arrival_needs_rate COMMAND ${SS} recommend --model llama-3.1-8b --gpu h200 --isl 2000 --osl 200
         --ttft-ms 300 --itl-ms 15 --target-tps 12000 --arrival poisson)
set_tests_properties(cli_recommend_arrival_needs_rate PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: --arrival: needs --target-rps[^\n]*\n$")
# Images on 30 % of requests: the mean prompt is 1000 + 0.3 x 1280 vision tokens (a 1024x1024
# image is 2 x 2 tiles + a thumbnail of 256 tokens each), within the binomial noise of 400 requests.
add_test(NAME cli_simulate_image_fraction COMMAND ${SS} simulate --model nemotron-3.5-super-vl --gpu b200 --gpus 1 --tp 1
         --precision nvfp4 --isl 1000 --osl 20 --concurrency 8 --requests 400 --images 1024x1024 --image-fraction 0.3 -q)
set_tests_properties(cli_simulate_image_fraction PROPERTIES PASS_REGULAR_EXPRESSION
  "input_sequence_length +tokens +1(3[3-9][0-9]|4[0-3][0-9])\\.[0-9]+ +1000\\.00 +1000\\.00 +2280\\.00")
add_test(NAME cli_image_fraction_needs_images COMMAND ${SS} simulate --model nemotron-3.5-super-vl --gpu b200 --image-fraction 0.3)
set_tests_properties(cli_image_fraction_needs_images PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: --image-fraction: needs --images[^\n]*\n$")
add_test(NAME cli_emit_scenario_resimulates COMMAND ${CMAKE_COMMAND} -DSS=${SS} -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/emit_scenario.cmake)
# GB300 is placed on a GB300 NVL72 compute tray that no source prices: the row's $/hour is "-" and a
# footnote says how to give one; --price gb300-nvl72-tray=USD prices it (2 trays of 4 GPUs x 400).
add_test(NAME cli_recommend_unpriced_tray COMMAND ${SS} recommend --model qwen3-8b --gpu gb300 --precision bf16 --topology agg --tp 1
         --isl 1024 --osl 64 --concurrency 4,8 --ttft-ms 2000 --itl-ms 100 --target-tps 500)
set_tests_properties(cli_recommend_unpriced_tray PROPERTIES PASS_REGULAR_EXPRESSION
  "GB300 +gb300-nvl72-tray .* - .*\\$/hour -: no source in the catalogue prices gb300-nvl72-tray .*--price gb300-nvl72-tray=USD_PER_HOUR sets one")
add_test(NAME cli_recommend_priced_tray COMMAND ${SS} recommend --price gb300-nvl72-tray=400 --model qwen3-8b --gpu gb300 --precision bf16
         --topology agg --tp 1 --isl 1024 --osl 64 --concurrency 4,8 --ttft-ms 2000 --itl-ms 100 --target-tps 500)
set_tests_properties(cli_recommend_priced_tray PROPERTIES PASS_REGULAR_EXPRESSION "GB300 +gb300-nvl72-tray .* 400.00 "
                     FAIL_REGULAR_EXPRESSION "no source in the catalogue prices")
add_test(NAME cli_plan_unpriced_tray COMMAND ${SS} plan --model qwen3-8b --instance gb300-nvl72-tray --nodes 1 --tp 1 --precision bf16
         --topology agg --isl 1024 --osl 64 --concurrency 4 --ttft-ms 2000 --itl-ms 100 --target-tps 500)
set_tests_properties(cli_plan_unpriced_tray PROPERTIES PASS_REGULAR_EXPRESSION "aggregated .* - .*\\$/hour -: no source in the catalogue prices gb300-nvl72-tray")
