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
# Four clients with fixed lengths queue in a train (3 of 4 prompts wait behind the one before):
# the text report names it; it is no cohort lock.
add_test(NAME cli_simulate_prefill_train COMMAND ${SS} simulate --model llama-3.1-70b --gpu h200 --gpus 8 --tp 8
         --precision fp8 --isl 8192 --osl 256 --concurrency 4 --requests 40 --engine vllm-0.19 --closed-loop-osl-spread 0 -q)
set_tests_properties(cli_simulate_prefill_train PROPERTIES PASS_REGULAR_EXPRESSION
  "cohorts +[0-9.]+% of prefill tokens[^\n:]*\nprefill queue +75\.0% of prompts waited[^\n]*: PREFILL TRAIN")
# The profile's own spread of the answer lengths (6 x (C/16)^0.25 x (OSL/1024)^0.25 tokens on vLLM
# 0.19: 3 at 4 clients and 256-token answers) is said, and breaks the train.
add_test(NAME cli_simulate_closed_loop_spread COMMAND ${SS} simulate --model llama-3.1-70b --gpu h200 --gpus 8 --tp 8
         --precision fp8 --isl 8192 --osl 256 --concurrency 4 --requests 40 --engine vllm-0.19 -q)
set_tests_properties(cli_simulate_closed_loop_spread PROPERTIES PASS_REGULAR_EXPRESSION
  "closed loop: fixed answer lengths spread by 3\\.0 tokens \\(sd = 6 x \\(4/16\\)\\^0\\.25 x \\(256/1024\\)\\^0\\.25\\), the vllm-0.19 profile"
  FAIL_REGULAR_EXPRESSION "PREFILL TRAIN")
# More clients than the KV cache holds whole requests: DeepSeek-R1 FP8 TP8 EP8 on the H200 under
# TensorRT-LLM, a BF16 MLA cache of 22,969 blocks of 32 tokens, 1,024 + 8,192 tokens = 288 blocks a
# request, 79 at once; 128 clients leave 49 queueing for a reservation, which the report names (not a
# prefill train); 64 clients fit, and no capacity line is printed.
add_test(NAME cli_simulate_kv_capacity COMMAND ${SS} simulate --model deepseek-r1 --gpu h200 --tp 8 --ep 8 --precision fp8
         --engine trtllm-1.1 --concurrency 128 --isl 1024 --osl 8192 --requests 256 -q)
set_tests_properties(cli_simulate_kv_capacity PROPERTIES PASS_REGULAR_EXPRESSION
  "memory: 22969 KV blocks x 32 tokens per replica; 79 sequences of 9216 tokens[^\n]*\n.*capacity +128 clients per replica, where the KV cache holds 79 whole requests of 9216 tokens: TensorRT-LLM reserves a request's whole sequence, so the other 49 queue until one finishes"
  FAIL_REGULAR_EXPRESSION "PREFILL TRAIN")
add_test(NAME cli_simulate_kv_capacity_fits COMMAND ${SS} simulate --model deepseek-r1 --gpu h200 --tp 8 --ep 8 --precision fp8
         --engine trtllm-1.1 --concurrency 64 --isl 1024 --osl 8192 --requests 128 -q)
set_tests_properties(cli_simulate_kv_capacity_fits PROPERTIES PASS_REGULAR_EXPRESSION "little's law check"
  FAIL_REGULAR_EXPRESSION "\ncapacity ")
add_test(NAME cli_sweep_csv COMMAND ${SS} sweep --concurrency 1,2,4 --requests 20 --isl 500 --osl 20 --format csv --threads 2)
set_tests_properties(cli_sweep_csv PROPERTIES PASS_REGULAR_EXPRESSION "^concurrency,request_count.*\n1,20,.*\n2,20,.*\n4,20,")
add_test(NAME cli_sweep_rate_json COMMAND ${SS} sweep --request-rate 0.5,1 --requests 10 --isl 200 --osl 10 --format json)
set_tests_properties(cli_sweep_rate_json PROPERTIES PASS_REGULAR_EXPRESSION "\"request_rate\": \\[")
foreach(bad IN ITEMS "--gpus;0" "--tp;3;--gpus;3" "--osl;0" "--request-rate;-1" "--gpus;1;--tp;1;--precision;bf16" "--model;nope" "--router;random")
  string(REPLACE ";" "_" name "${bad}")
  add_test(NAME cli_simulate_error${name} COMMAND ${SS} simulate ${bad} --requests 5)
  set_tests_properties(cli_simulate_error${name} PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: [^\n]+\n$")
endforeach()

# Topologies on instances. A lone 4000-token request on 1P1D TP8 over two p5en: one handoff of
# 203 MB (KV + Mamba state) over 8 EFA lanes of 50 GB/s + 65 us = 0.5725 ms, plus the vllm profile's
# fitted pull cost of 12 us per prompt token (48 ms): 48.5725 ms.
add_test(NAME cli_simulate_disagg COMMAND ${SS} simulate --model nemotron-3.5-super-vl --precision bf16
         --instance p5en.48xlarge --nodes 2 --topology disagg --prefill-workers 1 --decode-workers 1
         --concurrency 1 --requests 1 --isl 4000 --osl 50 --format json)
set_tests_properties(cli_simulate_disagg PROPERTIES PASS_REGULAR_EXPRESSION
  "\"kv_transfer\": {\n *\"avg_ms\": 48\\.57249[0-9]*,\n *\"bytes\": 202997760\\.0,\n *\"handoffs\": 1,.*disaggregated-1p1d: 1 x prefill TP8, 1 x decode TP8 on 2 x p5en")
add_test(NAME cli_sweep_disagg COMMAND ${SS} sweep --model nemotron-3.5-super-vl --precision bf16 --instance p5en.48xlarge
         --topology disagg --concurrency 1,8 --requests 16 --isl 4000 --osl 20 --format csv)
set_tests_properties(cli_sweep_disagg PROPERTIES PASS_REGULAR_EXPRESSION
  "kv_transfers,kv_transfer_ms_avg,kv_transfer_ms_max,kv_transfer_max_in_flight\n1,16,.*,16,48\\.572494[0-9]*,48\\.572494[0-9]*,1\n8,16,")
# The same topology from a scenario file's "topology" object.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/disagg_scenario.json [=[
{"model": "nemotron-3.5-super-vl", "precision": "bf16", "tensor_parallel_size": 8,
 "topology": {"kind": "disagg", "instance": "p5en.48xlarge", "nodes": 2, "prefill_workers": 1, "decode_workers": 1},
 "workload": {"concurrency": 1, "requests": 1, "isl": 4000, "osl": 50}}
]=])
add_test(NAME cli_simulate_scenario_topology COMMAND ${SS} simulate --scenario ${CMAKE_CURRENT_BINARY_DIR}/disagg_scenario.json)
set_tests_properties(cli_simulate_scenario_topology PROPERTIES PASS_REGULAR_EXPRESSION
  "disaggregated-1p1d.*KV \\+ state handoffs: 1, [0-9.]+ MiB in all, 48\\.572 ms mean")
add_test(NAME cli_simulate_agg_on_instances COMMAND ${SS} simulate --model nemotron-3.5-super-vl --precision bf16
         --instance p5en.48xlarge --nodes 2 --topology agg --concurrency 4 --requests 8 --isl 1000 --osl 20)
set_tests_properties(cli_simulate_agg_on_instances PROPERTIES PASS_REGULAR_EXPRESSION
  "aggregated: 2 x replica TP8 on 2 x p5en.48xlarge.*replica-1")
# Prefill on B200 nodes, decode on H200 nodes: the handoff crosses EFA at the smaller per-GPU share
# (both 50 GB/s) and the larger latency (p5en's 65 us): 48.5725 ms again.
add_test(NAME cli_simulate_mixed_gpus COMMAND ${SS} simulate --model nemotron-3.5-super-vl --precision bf16
         --topology disagg --prefill-gpu B200 --decode-gpu H200 --concurrency 1 --requests 1 --isl 4000 --osl 50)
set_tests_properties(cli_simulate_mixed_gpus PROPERTIES PASS_REGULAR_EXPRESSION
  "1 x p6-b200.48xlarge \\+ 1 x p5en.48xlarge.*48\\.572 ms mean")
foreach(bad IN ITEMS "--prefill-workers;2" "--topology;ring" "--topology;disagg;--instance;nope"
                     "--topology;disagg;--nodes;1;--model;nemotron-3.5-super-vl;--precision;bf16"
                     "--topology;disagg;--decode-gpu;H200;--decode-instance;p5en.48xlarge")
  string(REPLACE ";" "_" name "${bad}")
  add_test(NAME cli_simulate_topology_error${name} COMMAND ${SS} simulate ${bad} --requests 5)
  set_tests_properties(cli_simulate_topology_error${name} PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: [^\n]+\n$")
endforeach()
# MTP: K = 2 at acceptance 1.0, OSL 301: one prefill step + ceil(300 / 3) = 100 decode steps.
add_test(NAME cli_simulate_mtp COMMAND ${SS} simulate --model nemotron-3-super --concurrency 1 --requests 1
         --warmup-requests 0 --isl 1000 --osl 301 --num-speculative-tokens 2 --mtp-acceptance 1.0)
set_tests_properties(cli_simulate_mtp PROPERTIES PASS_REGULAR_EXPRESSION "replica-0 +101 ")
add_test(NAME cli_simulate_mtp_without_layers COMMAND ${SS} simulate --model llama-3.1-70b --num-speculative-tokens 2 --requests 5)
set_tests_properties(cli_simulate_mtp_without_layers PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: .*has no MTP layers[^\n]*\n$")
# Attention data parallelism: one replica of TP1 x DP2 (2 GPUs) with the experts over EP2; a dense
# model is refused (DP without MoE layers is just more replicas).
add_test(NAME cli_simulate_data_parallel COMMAND ${SS} simulate --model mixtral-8x7b --gpu h200 --tp 1 --dp 2 --ep 2
         --precision bf16 --isl 1000 --osl 100 --concurrency 8 --requests 16)
set_tests_properties(cli_simulate_data_parallel PROPERTIES PASS_REGULAR_EXPRESSION "on 2 x h200 \\(1 replica\\(s\\) of TP1 DP2 EP2")
add_test(NAME cli_simulate_data_parallel_dense COMMAND ${SS} simulate --model llama-3.1-8b --gpu h200 --tp 1 --dp 2 --requests 5)
set_tests_properties(cli_simulate_data_parallel_dense PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: .*data_parallel_size.*has none[^\n]*\n$")
# The engine profiles list their closed-loop spread of fixed answer lengths: 6 x (C/16)^0.25 x
# (OSL/1024)^0.25 tokens on vLLM 0.19,
# none on the synchronous 0.12.
add_test(NAME cli_list_engines_closed_loop COMMAND ${SS} list engines)
# ... and what their MoE layers run under attention DP: vLLM pads a prefill step's ranks and keeps
# the all-gather, SGLang sums the ranks' own tokens and TensorRT-LLM gathers them, both exchanging by
# all-to-all once an EP group spans more than one node.
add_test(NAME cli_list_engines_attention_dp COMMAND ${SS} list engines)
set_tests_properties(cli_list_engines_attention_dp PROPERTIES PASS_REGULAR_EXPRESSION
  "sglang-0.5.6 .* prefill summed; all-to-all past a node .*trtllm-1.3 .* prefill gathered; all-to-all past a node .*vllm-0.19 .* prefill padded; all-gather ")
set_tests_properties(cli_list_engines_closed_loop PROPERTIES PASS_REGULAR_EXPRESSION
  "vllm-0.12 +off .* 0 +[^\n]*\n.*vllm-0.19 +on .* 6 x \\(C/16\\)\\^0\\.25 x \\(OSL/1024\\)\\^0\\.25 +")
# An open loop above capacity says so. One request at a time (max_num_seqs 1) on Llama 3.1 8B FP8
# takes 458 ms at ISL 128 / OSL 100, so the replica serves 1 / 0.458 = 2.18 requests/s: offered 4.4
# (2x) it answers 2.18 and its queue grows; offered 1.1 (half) it answers them all.
set(ONE_SEAT --model llama-3.1-8b --gpu h100 --tp 1 --precision fp8 --max-num-seqs 1 --isl 128 --osl 100 --no-frontend --requests 400 -q)
add_test(NAME cli_simulate_overloaded COMMAND ${SS} simulate ${ONE_SEAT} --request-rate 4.4)
set_tests_properties(cli_simulate_overloaded PROPERTIES PASS_REGULAR_EXPRESSION
  "OVERLOADED: offered 4.4 requests/s; over the later half of the sends [^\n]* 2\\.1[5-9][0-9] served per second")
add_test(NAME cli_simulate_overloaded_json COMMAND ${SS} simulate ${ONE_SEAT} --request-rate 4.4 --format json)
set_tests_properties(cli_simulate_overloaded_json PROPERTIES PASS_REGULAR_EXPRESSION "\"overloaded\": true")
add_test(NAME cli_simulate_half_load COMMAND ${SS} simulate ${ONE_SEAT} --request-rate 1.1 --format json)
set_tests_properties(cli_simulate_half_load PROPERTIES PASS_REGULAR_EXPRESSION "\"overloaded\": false" FAIL_REGULAR_EXPRESSION "OVERLOADED")
add_test(NAME cli_sweep_overloaded COMMAND ${SS} sweep ${ONE_SEAT} --request-rate 1.1,4.4)
set_tests_properties(cli_sweep_overloaded PROPERTIES PASS_REGULAR_EXPRESSION
  "\nOVERLOADED: offered 4.4 requests/s[^\n]*\n$" FAIL_REGULAR_EXPRESSION "OVERLOADED: offered 1.1")
# A calibration file the scenario names but that is not there: the scenario's field is at fault,
# with the path it resolved (against the scenario's folder) and why it could not be read.
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/missing_calibration_scenario.json [=[
{"model": "nemotron-3-nano", "gpu": "h200", "calibration": "no-such-profile.json",
 "workload": {"concurrency": 1, "requests": 1, "isl": 100, "osl": 10}}
]=])
add_test(NAME cli_scenario_missing_calibration COMMAND ${SS} simulate --scenario ${CMAKE_CURRENT_BINARY_DIR}/missing_calibration_scenario.json)
set_tests_properties(cli_scenario_missing_calibration PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: [^\n]*/missing_calibration_scenario\\.json: calibration: cannot read '[^\n]*/no-such-profile\\.json': cannot open file: No such file or directory; give a profile file")
# The gaps between streamed tokens beside aiperf's ITL: 4,096-token prompts on one H100 stall the
# decodes beside them, and simulate says so in a line of its own.
add_test(NAME cli_simulate_token_gap_stall_line COMMAND ${SS} simulate --model llama-3.1-8b --gpu h100 --isl 4096 --osl 256
         --concurrency 32 --requests 500)
set_tests_properties(cli_simulate_token_gap_stall_line PROPERTIES PASS_REGULAR_EXPRESSION
  "inter_token_latency +ms.*token_gap +ms.*token_gap p99 [0-9.]+ ms is [0-9.]+x its median: prompts' prefill steps stall the decodes")
# MoE TP x EP runs on TensorRT-LLM (the header names the MoE TP) and is one line on vLLM.
add_test(NAME cli_simulate_moe_tp_ep_trtllm COMMAND $<TARGET_FILE:servesim> simulate --model qwen3-235b-a22b --gpu h200 --tp 8 --ep 4
         --gpus 8 --precision fp8 --engine trtllm --isl 500 --osl 50 --concurrency 4 --requests 8 -q)
set_tests_properties(cli_simulate_moe_tp_ep_trtllm PROPERTIES PASS_REGULAR_EXPRESSION "1 replica\\(s\\) of TP8 EP4 \\(MoE TP2\\)")
add_test(NAME cli_simulate_moe_tp_ep_vllm COMMAND $<TARGET_FILE:servesim> simulate --model qwen3-235b-a22b --gpu h200 --tp 8 --ep 4
         --gpus 8 --precision fp8 --isl 500 --osl 50 --concurrency 4 --requests 8)
set_tests_properties(cli_simulate_moe_tp_ep_vllm PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: command line: expert_parallel_size: 4 with tp x dp = 8: vLLM's expert parallelism spans the whole group")
# ... and which expert-parallel layouts each launches (MoE TP x EP on SGLang and TensorRT-LLM; the
# latter's attention DP only at TP 1).
add_test(NAME cli_list_engines_layouts COMMAND ${SS} list engines)
set_tests_properties(cli_list_engines_layouts PROPERTIES PASS_REGULAR_EXPRESSION
  "sglang-0.5.6 .* 1, TP x DP or between \\(MoE TP x EP\\)  .*trtllm-1.3 .* 1, TP x DP or between \\(MoE TP x EP\\); attention DP at TP 1 .*vllm-0.19 .* all-gather +1 or TP x DP ")
