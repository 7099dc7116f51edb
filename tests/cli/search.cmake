# CLI tests of `servesim search`, `recommend` and `nccl`: results, one-line errors.
set(SS $<TARGET_FILE:servesim>)
add_test(NAME cli_search_agg COMMAND ${SS} search --model nemotron-h-8b --gpu h200 --isl 512 --osl 64 --concurrency 1,16,64
         --requests 40 --ttft-ms 2000 --itl-ms 200 --topology agg)
set_tests_properties(cli_search_agg PROPERTIES PASS_REGULAR_EXPRESSION
  "Space: H200 \\(p5en.48xlarge\\); precisions bf16, fp8; KV cache the checkpoint's \\(fp8 for fp8/nvfp4 weights, else bf16\\)\n8 configurations: 8 simulated.*Pareto frontier per family.*agg TP1 H200 fp8 seqs [0-9]+ tokens [0-9]+ +64")
add_test(NAME cli_search_json COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100 --concurrency 1,16
         --requests 40 --ttft-ms 400 --itl-ms 25 --tp 1,2 --pd-ratios 1:1 --target-tps 20000 --format json)
set_tests_properties(cli_search_json PROPERTIES PASS_REGULAR_EXPRESSION
  "\"best\": {.*\"deployment\": {.*\"frontiers\": \\[.*\"family\": \"aggregated H200\".*\"family\": \"disaggregated H200\"")
add_test(NAME cli_search_needs_slo COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100)
set_tests_properties(cli_search_needs_slo PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --ttft-ms: required")
add_test(NAME cli_search_one_load COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100 --ttft-ms 1
         --itl-ms 1 --target-tps 5 --total-gpus 8)
set_tests_properties(cli_search_one_load PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --total-gpus and --target-tps: one load to size for: give one of")
add_test(NAME cli_search_bad_gpu COMMAND ${SS} search --model nemotron-3-nano --gpu a100 --isl 1000 --osl 100 --ttft-ms 1 --itl-ms 1)
set_tests_properties(cli_search_bad_gpu PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --gpu: unknown GPU or instance 'a100'")
add_test(NAME cli_recommend COMMAND ${SS} recommend --model nemotron-3-nano --gpu h100,h200 --isl 1000 --osl 100 --concurrency 1,16
         --requests 40 --ttft-ms 400 --itl-ms 25 --tp 1,2 --pd-ratios 1:1 --same-gpu --target-tps 20000)
set_tests_properties(cli_recommend PROPERTIES PASS_REGULAR_EXPRESSION
  "\\$/M output tok.*H[12]00 +p5.*\\$/M output tok: \\$/hour / \\(the target's output tokens/s x 3,600\\) x 10\\^6.*TDP, an upper bound.*prediction band")
add_test(NAME cli_nccl COMMAND ${SS} nccl --instance p5en.48xlarge --nodes 2)
set_tests_properties(cli_nccl PROPERTIES PASS_REGULAR_EXPRESSION
  "16 x H200.*mpirun --allow-run-as-root -np 16 -N 8 .*all_reduce_perf -b 8 -e 16G -f 2.*busbw")
add_test(NAME cli_search_dask_bad_address COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100
         --ttft-ms 400 --itl-ms 25 --dask not-an-address)
set_tests_properties(cli_search_dask_bad_address PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --dask: (cannot reach the Dask scheduler at not-an-address|dask.distributed is not installed)")
if(SERVESIM_PY_SAN_ENV)  # servesim starts Python here: the sanitizer runtime must come first in it
  set_tests_properties(cli_search_dask_bad_address PROPERTIES ENVIRONMENT "${SERVESIM_PY_SAN_ENV}")
endif()
# Under a token-gap SLO the search keeps the aggregated replica whose prompts prefill in 1,024-token
# chunks (gap p99 ~36 ms) and drops the 8,192-token one (~85 ms prefill steps among its decodes).
add_test(NAME cli_search_gap_slo COMMAND ${SS} search --model llama-3.1-8b --gpu h100 --isl 4096 --osl 256 --tp 1 --precision bf16
         --topology agg --concurrency 8,16,32,64 --max-num-batched-tokens 1024,8192 --ttft-ms 3000 --itl-ms 50 --gap-ms 50
         --statistic p99 --target-tps 20000 -q)
set_tests_properties(cli_search_gap_slo PROPERTIES PASS_REGULAR_EXPRESSION
  "token gap p99 <= 50 ms.*best under the SLO .*gap ms.*agg TP1 H100 bf16 seqs 1024 tokens 1024 ")
add_test(NAME cli_search_bad_gap_ms COMMAND ${SS} search --model llama-3.1-8b --gpu h100 --isl 1000 --osl 100 --ttft-ms 500
         --itl-ms 50 --gap-ms nan --target-tps 1000)
set_tests_properties(cli_search_bad_gap_ms PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --gap-ms: must be a finite number >= 0")
# MTP draft counts are searched only on a model with MTP layers; a bad count is one line.
add_test(NAME cli_search_mtp_needs_mtp_layers COMMAND ${SS} recommend --model llama-3.1-8b --gpu h200 --isl 1000 --osl 100
         --ttft-ms 500 --itl-ms 50 --target-tps 1000 --num-speculative-tokens 0,1)
set_tests_properties(cli_search_mtp_needs_mtp_layers PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --num-speculative-tokens: llama-3.1-8b has no MTP layers to draft with")
add_test(NAME cli_search_bad_mtp_count COMMAND ${SS} search --model nemotron-3-super --gpu h200 --isl 1000 --osl 100
         --ttft-ms 500 --itl-ms 50 --target-tps 1000 --num-speculative-tokens 17)
set_tests_properties(cli_search_bad_mtp_count PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --num-speculative-tokens: '17' is not a whole number in 0..16")
# --headroom: the candidates are sized (and, open loop, offered) the target x (1 + headroom); the
# header names both; a bad value, or one without a load target to size, is one line.
add_test(NAME cli_recommend_headroom COMMAND ${SS} recommend --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100 --ttft-ms 400
         --itl-ms 25 --tp 1 --topology agg --precision fp8 --target-rps 10 --arrival poisson --headroom 0.2 -q)
set_tests_properties(cli_recommend_headroom PROPERTIES PASS_REGULAR_EXPRESSION
  "10 requests/s x OSL 100 = 1000 output tok/s \\(sized for 12 requests/s, 1200 output tok/s: 20 % headroom\\).*Offered load: 12 requests/s \\(the target \\+ 20 % headroom\\)")
add_test(NAME cli_search_bad_headroom COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100 --ttft-ms 400
         --itl-ms 25 --target-tps 1000 --headroom 11)
set_tests_properties(cli_search_bad_headroom PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --headroom: must be a fraction of the load target from 0 to 10, e.g. 0.2 to size for 1.2 x the target, got 11")
add_test(NAME cli_search_headroom_needs_a_target COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100
         --ttft-ms 400 --itl-ms 25 --total-gpus 8 --headroom 0.2)
set_tests_properties(cli_search_headroom_needs_a_target PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --headroom: sizes a load target: give --target-tps or --target-rps")
# --ep: MoE TP x EP sizes are TensorRT-LLM's and SGLang's; on vLLM alone nothing is left (one line
# naming the engines), a size dividing no layout is named, and --ep with --no-expert-parallel is refused.
add_test(NAME cli_search_ep_vllm_launches_none COMMAND ${SS} search --model qwen3-235b-a22b --gpu h200 --precision fp8 --tp 8 --ep 4
         --topology agg --isl 1000 --osl 200 --ttft-ms 2000 --itl-ms 60)
set_tests_properties(cli_search_ep_vllm_launches_none PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --engine: no configuration to search: the engines given launch none of the layouts")
add_test(NAME cli_search_ep_divides_no_layout COMMAND ${SS} search --model qwen3-235b-a22b --gpu h200 --precision fp8 --tp 8 --ep 3
         --engine trtllm --topology agg --isl 1000 --osl 200 --ttft-ms 2000 --itl-ms 60)
set_tests_properties(cli_search_ep_divides_no_layout PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --ep: no configuration to search: no layout of the sizes given serves qwen3-235b-a22b \\(each --ep must divide")
add_test(NAME cli_search_ep_and_no_ep COMMAND ${SS} search --model qwen3-235b-a22b --gpu h200 --ep 4 --no-expert-parallel
         --isl 1000 --osl 200 --ttft-ms 2000 --itl-ms 60)
set_tests_properties(cli_search_ep_and_no_ep PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --ep: give --ep \\(the expert-parallel sizes to try\\) or --no-expert-parallel \\(EP 1 only\\), not both")
