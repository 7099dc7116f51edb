# CLI tests of `servesim plan`: both topologies planned, the reference study, one-line errors.
set(SS $<TARGET_FILE:servesim>)
add_test(NAME cli_plan_acceptance COMMAND ${SS} plan --model nemotron-3.5-super-vl --instance p5en.48xlarge --nodes 2
         --precision bf16 --isl 4000 --osl 500 --ttft-ms 600 --itl-ms 100 --target-tps 10000 --format json)
set_tests_properties(cli_plan_acceptance PROPERTIES PASS_REGULAR_EXPRESSION
  "\"columns\".*\"name\": \"aggregated\".*\"replicas\": [1-9][0-9]*.*\"name\": \"disaggregated-1p1d\".*\"replicas\": [1-9][0-9]*")
add_test(NAME cli_plan_reference COMMAND ${SS} plan --concurrency 1,4,16)
set_tests_properties(cli_plan_reference PROPERTIES PASS_REGULAR_EXPRESSION
  "Ran the reference study: nemotron-3.5-super-vl on 2 x p5en.48xlarge.*limited by")
add_test(NAME cli_plan_does_not_fit COMMAND ${SS} plan --model nemotron-3.5-super-vl --instance p5en.48xlarge --nodes 1
         --topology disagg --ttft-ms 600 --itl-ms 100 --target-tps 1000 --isl 100 --osl 10)
set_tests_properties(cli_plan_does_not_fit PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --nodes: the topology needs 16 GPUs")
add_test(NAME cli_plan_bad_statistic COMMAND ${SS} plan --statistic p75)
set_tests_properties(cli_plan_bad_statistic PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --statistic: unknown statistic 'p75'; known: p50, p90, p99")
# A saturated prefill worker whose blocks are all held by handed-off requests waits for the pulls
# (it used to report a request that could never be admitted).
add_test(NAME cli_plan_disagg_saturated_prefill COMMAND ${SS} plan --model nemotron-3.5-super-vl --instance p6-b300.48xlarge
         --nodes 2 --precision nvfp4 --isl 4000 --osl 500 --ttft-ms 600 --itl-ms 100 --target-tps 50000
         --concurrency 512 --topology disagg --requests 1500)
set_tests_properties(cli_plan_disagg_saturated_prefill PROPERTIES PASS_REGULAR_EXPRESSION "disaggregated-1p1d +512")
add_test(NAME cli_plan_model_needs_slo COMMAND ${SS} plan --model nemotron-3-super --instance p5en.48xlarge --nodes 1 --isl 1000 --osl 100)
set_tests_properties(cli_plan_model_needs_slo PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --ttft-ms: required with --model")
# Prefill on B200 nodes, decode on H200 nodes: each role on its own instance type, priced per node used.
add_test(NAME cli_plan_mixed_instances COMMAND ${SS} plan --model nemotron-3-super --instance p5en.48xlarge --nodes 1
         --precision fp8 --isl 4000 --osl 500 --ttft-ms 600 --itl-ms 100 --target-tps 10000 --topology disagg
         --prefill-instance p6-b200.48xlarge --concurrency 1,16 --format json)
set_tests_properties(cli_plan_mixed_instances PROPERTIES PASS_REGULAR_EXPRESSION
  "p6-b200.48xlarge \\+ 1 x p5en.48xlarge.*\"instances_per_replica\": 2.*\"usd_per_hour\": [0-9.]+")
# The reference study takes a rate target and says what ran (the user's ISL and rate, not the reference's).
add_test(NAME cli_plan_reference_takes_a_rate COMMAND ${SS} plan --target-rps 20 --isl 2000 --concurrency 1,4 --requests 200)
set_tests_properties(cli_plan_reference_takes_a_rate PROPERTIES PASS_REGULAR_EXPRESSION
  "Ran the reference study: nemotron-3.5-super-vl on 2 x p5en.48xlarge, bf16, .*ISL 2000 / OSL 500.*target 20 requests/s")
# An SLO on the gap between streamed tokens (--gap-ms): 4,096-token prompts on an aggregated TP1
# replica stall its decodes for a prefill step (~85 ms), so the aggregated copy stops where its p99
# gap crosses 50 ms and the advice names the stall; a bad value is one line.
add_test(NAME cli_plan_gap_slo COMMAND ${SS} plan --model llama-3.1-8b --instance p5.48xlarge --nodes 2 --isl 4096 --osl 256
         --ttft-ms 2000 --itl-ms 50 --gap-ms 50 --statistic p99 --target-tps 20000 --tp 1 --prefill-tp 1 --decode-tp 1)
set_tests_properties(cli_plan_gap_slo PROPERTIES PASS_REGULAR_EXPRESSION
  "gap p99 ms.*Plan: SLO TTFT p99 <= 2000 ms, ITL p99 <= 50 ms, token gap p99 <= 50 ms.*aggregated .*the token gap limits it: prompts' prefill steps stall the decodes")
add_test(NAME cli_plan_bad_gap_ms COMMAND ${SS} plan --gap-ms -5)
set_tests_properties(cli_plan_bad_gap_ms PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --gap-ms: must be a finite number >= 0")
# --headroom: the plan names the target and what its copies are sized for.
add_test(NAME cli_plan_headroom COMMAND ${SS} plan --model nemotron-3-nano --instance p5en.48xlarge --nodes 1 --isl 1000 --osl 100
         --ttft-ms 300 --itl-ms 20 --target-tps 20000 --concurrency 1,4,16 --requests 100 --headroom 0.25)
set_tests_properties(cli_plan_headroom PROPERTIES PASS_REGULAR_EXPRESSION
  "target 20000 output tok/s \\(sized for 25000 output tok/s: 25 % headroom\\)")
add_test(NAME cli_plan_bad_headroom COMMAND ${SS} plan --headroom nan)
set_tests_properties(cli_plan_bad_headroom PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --headroom: must be a fraction of the load target from 0 to 10")
add_test(NAME cli_plan_headroom_past_the_rate_limit COMMAND ${SS} plan --model llama-3.1-8b --instance p5.48xlarge --nodes 1
         --isl 100 --osl 10 --ttft-ms 100 --itl-ms 10 --target-rps 9e6 --headroom 0.5)
set_tests_properties(cli_plan_headroom_past_the_rate_limit PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --headroom: sizes for 1.35e\\+07 requests/s \\(--target-rps 9e\\+06 x 1.5\\), past what --target-rps takes")
# plan --dp: attention-DP workers (MoE models); a dense model is one line, as TensorRT-LLM's DP with TP > 1.
add_test(NAME cli_plan_dp_needs_moe COMMAND ${SS} plan --model llama-3.1-8b --instance p5en.48xlarge --nodes 1 --tp 1 --dp 2
         --isl 1000 --osl 200 --ttft-ms 2000 --itl-ms 100 --target-tps 2000)
set_tests_properties(cli_plan_dp_needs_moe PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --dp: attention data parallelism needs MoE layers to share \\(llama-3.1-8b has none\\)")
add_test(NAME cli_plan_dp_trtllm_tp1 COMMAND ${SS} plan --model deepseek-r1 --instance p6-b200.48xlarge --nodes 2 --precision nvfp4
         --tp 2 --dp 4 --ep 8 --engine trtllm --isl 1000 --osl 200 --ttft-ms 2000 --itl-ms 100 --target-tps 20000)
set_tests_properties(cli_plan_dp_trtllm_tp1 PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: command line: --dp: 4 with tensor parallel size 2: TensorRT-LLM's attention DP runs each rank's attention on one GPU")
