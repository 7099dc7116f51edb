# CLI tests of list / memory / min-gpus / step.
add_test(NAME cli_list_models COMMAND $<TARGET_FILE:servesim> list models)
set_tests_properties(cli_list_models PROPERTIES PASS_REGULAR_EXPRESSION "nemotron-3.5-super-vl.*yes")
add_test(NAME cli_min_gpus_default COMMAND $<TARGET_FILE:servesim> min-gpus --model NEMOTRON-3.5-super-vl)
set_tests_properties(cli_min_gpus_default PROPERTIES PASS_REGULAR_EXPRESSION "H100   bf16 +16 +8x2 +16 .*H100   nvfp4 +8 +8x1 +8 .*B300   nvfp4 +1 +1x1 +1 ")
set_tests_properties(cli_min_gpus_default PROPERTIES FAIL_REGULAR_EXPRESSION "differ from the vendor")
add_test(NAME cli_memory_breakdown COMMAND $<TARGET_FILE:servesim> memory --model nemotron-3-super --gpu h200 --precision bf16 --tp 8)
set_tests_properties(cli_memory_breakdown PROPERTIES PASS_REGULAR_EXPRESSION "KV per token \\(bf16\\) +4.00 KiB")
add_test(NAME cli_step COMMAND $<TARGET_FILE:servesim> step --model nemotron-3-super --gpu H200 --tp 4 --batch 8 --context 2048)
set_tests_properties(cli_step PROPERTIES PASS_REGULAR_EXPRESSION "decode +moe")
# NVIDIA's NVFP4 MiniMax-M2.5 keeps attention in BF16: `model` says so, `step` costs it so.
add_test(NAME cli_model_experts_only_checkpoint COMMAND $<TARGET_FILE:servesim> model --model minimax-m2.5)
set_tests_properties(cli_model_experts_only_checkpoint PROPERTIES PASS_REGULAR_EXPRESSION "also published +nvfp4 \\(routed experts only")
add_test(NAME cli_step_experts_only_checkpoint COMMAND $<TARGET_FILE:servesim> step --model minimax-m2.5 --gpu b200 --tp 2 --precision nvfp4 --batch 4 --context 1024)
set_tests_properties(cli_step_experts_only_checkpoint PROPERTIES PASS_REGULAR_EXPRESSION
  "nvfp4 weights on the routed experts, the rest BF16.*decode +attention +QKV \\+ O GEMM [^\n]*torch.nn.functional.linear")
add_test(NAME cli_unknown_model COMMAND $<TARGET_FILE:servesim> memory --model nope --gpu h200)
set_tests_properties(cli_unknown_model PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_unknown_model_lists COMMAND $<TARGET_FILE:servesim> min-gpus --model nope)
set_tests_properties(cli_unknown_model_lists PROPERTIES PASS_REGULAR_EXPRESSION "known: .*nemotron-3-super")
add_test(NAME cli_does_not_fit COMMAND $<TARGET_FILE:servesim> memory --model nemotron-3-ultra --gpu H100 --precision bf16 --tp 1)
set_tests_properties(cli_does_not_fit PROPERTIES PASS_REGULAR_EXPRESSION "exceed the budget .* by ")
add_test(NAME cli_bad_config COMMAND $<TARGET_FILE:servesim> memory --model-file ${PROJECT_SOURCE_DIR}/tests/models/data/bad-pattern.json --gpu h200)
set_tests_properties(cli_bad_config PROPERTIES PASS_REGULAR_EXPRESSION "bad-pattern.json: hybrid_override_pattern: unknown block type")
# Hybrid KV cache as vLLM lays it out: Nemotron 3 Super TP2 FP8 on H100, 8320-token blocks, 7 per 9216-token sequence.
add_test(NAME cli_memory_hybrid_blocks COMMAND $<TARGET_FILE:servesim> memory --model nemotron-3-super --gpu h100 --precision fp8 --tp 2 --context 9216)
set_tests_properties(cli_memory_hybrid_blocks PROPERTIES PASS_REGULAR_EXPRESSION
  "KV cache blocks +[0-9]+ x 8320 tokens.*1 attention \\+ 5 mamba groups of 8 layers.*blocks per sequence at 9216 +7 \\(2 attention \\+ 5 state\\).*max sequences at 9216 +[0-9]+ \\(KV cache binds")
# --model-file on every subcommand that takes --model (a fixture HF config; not in the catalogue).
set(MD ${PROJECT_SOURCE_DIR}/tests/models/data)
add_test(NAME cli_model_file_step COMMAND $<TARGET_FILE:servesim> step --model-file ${MD}/tiny-deepseek-v3.json --gpu h200 --batch 4 --context 4096)
set_tests_properties(cli_model_file_step PROPERTIES PASS_REGULAR_EXPRESSION
  "decode +mla +decode attention over the latent.*prefill +mla +kv_b_proj decompression")
add_test(NAME cli_model_file_simulate COMMAND $<TARGET_FILE:servesim> simulate --model-file ${MD}/tiny-gpt-oss.json --gpu h200 --gpus 1 --tp 1
         --precision bf16 --isl 512 --osl 16 --concurrency 2 --requests 8)
set_tests_properties(cli_model_file_simulate PROPERTIES PASS_REGULAR_EXPRESSION "servesim simulate: tiny-gpt-oss .*request_throughput")
add_test(NAME cli_model_file_sweep COMMAND $<TARGET_FILE:servesim> sweep --model-file ${MD}/tiny-qwen3.5-moe_config.json --gpu h200 --gpus 1 --tp 1
         --isl 256 --osl 8 --concurrency 1,2 --requests 6 --format csv)
set_tests_properties(cli_model_file_sweep PROPERTIES PASS_REGULAR_EXPRESSION "^concurrency,request_count.*\n1,6,.*\n2,6,")
add_test(NAME cli_model_file_scenario COMMAND $<TARGET_FILE:servesim> simulate --scenario ${MD}/scenario-model-file.json)
set_tests_properties(cli_model_file_scenario PROPERTIES PASS_REGULAR_EXPRESSION "servesim simulate: tiny-gpt-oss ")
add_test(NAME cli_model_file_plan COMMAND $<TARGET_FILE:servesim> plan --model-file ${MD}/tiny-llama4.json --instance p5en.48xlarge --nodes 1
         --tp 1 --replicas 1 --topology agg --isl 256 --osl 8 --ttft-ms 1000 --itl-ms 100 --target-tps 100 --concurrency 1,2 --requests 6)
set_tests_properties(cli_model_file_plan PROPERTIES PASS_REGULAR_EXPRESSION "tiny-llama4")
add_test(NAME cli_model_file_min_gpus COMMAND $<TARGET_FILE:servesim> min-gpus --model-file ${MD}/tiny-kimi-k25.json --precisions bf16 --gpus h200)
set_tests_properties(cli_model_file_min_gpus PROPERTIES PASS_REGULAR_EXPRESSION "H200 +bf16 +1 +1x1")
add_test(NAME cli_model_file_memory_checkpoint_precision COMMAND $<TARGET_FILE:servesim> memory --model-file ${MD}/tiny-deepseek-v3.json --gpu h200)
set_tests_properties(cli_model_file_memory_checkpoint_precision PROPERTIES PASS_REGULAR_EXPRESSION "fp8_block weights")
add_test(NAME cli_model_and_model_file COMMAND $<TARGET_FILE:servesim> step --model llama-3.1-8b --model-file ${MD}/tiny-qwen3.json --gpu h200)
set_tests_properties(cli_model_and_model_file PROPERTIES PASS_REGULAR_EXPRESSION
  "^servesim: error: --model-file: give --model or --model-file, not both\n$")
add_test(NAME cli_model_file_not_registered COMMAND $<TARGET_FILE:servesim> step --model tiny-qwen3 --gpu h200)
set_tests_properties(cli_model_file_not_registered PROPERTIES PASS_REGULAR_EXPRESSION "unknown model \"tiny-qwen3\"")
add_test(NAME cli_model_unsupported_feature COMMAND $<TARGET_FILE:servesim> model --model-file ${MD}/tiny-gemma4.json)
set_tests_properties(cli_model_unsupported_feature PROPERTIES PASS_REGULAR_EXPRESSION
  "^servesim: error: [^\n]*tiny-gemma4.json: text_config.global_head_dim: unsupported: per-layer-type attention shapes[^\n]*\n$")
add_test(NAME cli_model_show COMMAND $<TARGET_FILE:servesim> model deepseek-v3)
set_tests_properties(cli_model_show PROPERTIES PASS_REGULAR_EXPRESSION "671\\.03 B total.*checkpoint +fp8")
add_test(NAME cli_list_models_families COMMAND $<TARGET_FILE:servesim> list models)
set_tests_properties(cli_list_models_families PROPERTIES PASS_REGULAR_EXPRESSION
  "deepseek-v3 +122 \\(3- 58E 61L\\).*gpt-oss-120b +72 \\(18\\* 36E 18S\\).*qwen3.5-397b-a17b +120 \\(15\\* 60E 45G\\)")
add_test(NAME cli_model_file_search COMMAND $<TARGET_FILE:servesim> search --model-file ${MD}/tiny-qwen3.json --gpu h200 --precision bf16
         --tp 1 --topology agg --isl 256 --osl 8 --concurrency 1,2 --requests 6 --ttft-ms 1000 --itl-ms 100)
set_tests_properties(cli_model_file_search PROPERTIES PASS_REGULAR_EXPRESSION "1 configurations: 1 simulated")
add_test(NAME cli_model_file_recommend COMMAND $<TARGET_FILE:servesim> recommend --model-file ${MD}/tiny-qwen3.json --gpu h200 --precision bf16
         --tp 1 --topology agg --isl 256 --osl 8 --concurrency 1,2 --requests 6 --ttft-ms 1000 --itl-ms 100 --target-tps 100 --format json)
set_tests_properties(cli_model_file_recommend PROPERTIES PASS_REGULAR_EXPRESSION "\"recommendations\": \\[\n *{")
add_test(NAME cli_model_file_validate COMMAND $<TARGET_FILE:servesim> validate ${PROJECT_SOURCE_DIR}/tests/sim/data/validate_sample.csv
         --model-file ${MD}/tiny-qwen3.json --gpu h200 --mode agg)
set_tests_properties(cli_model_file_validate PROPERTIES PASS_REGULAR_EXPRESSION "points: [0-9]+ simulated")
# MoE TP x EP: vLLM's expert parallelism spans the whole group (one line naming the engines that
# run it); TensorRT-LLM runs TP8 EP4 (32 experts a GPU, each half) at EP8's per-GPU weights (27.65 GiB).
add_test(NAME cli_memory_moe_tp_ep_is_not_vllms COMMAND $<TARGET_FILE:servesim> memory --model qwen3-235b-a22b --gpu h200 --tp 8 --ep 4 --precision fp8)
set_tests_properties(cli_memory_moe_tp_ep_is_not_vllms PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: command line: --ep: 4 with tp x dp = 8: vLLM's expert parallelism spans the whole group \\(1 or 8\\); MoE TP x EP \\(4 expert groups, each expert sharded 2 ways\\) is a TensorRT-LLM / SGLang layout")
add_test(NAME cli_memory_moe_tp_ep_trtllm COMMAND $<TARGET_FILE:servesim> memory --model qwen3-235b-a22b --gpu h200 --tp 8 --ep 4 --precision fp8 --engine trtllm)
set_tests_properties(cli_memory_moe_tp_ep_trtllm PROPERTIES PASS_REGULAR_EXPRESSION
  "TP8 EP4 \\(MoE TP2\\), fp8 weights.*\\(tp 8, pp 1, ep 4\\)[^\n]*\nweights +27.65 GiB")
# A Hugging Face id names its catalogue entry, a quantised repository's id its checkpoint: simulate
# runs it, search and recommend search that checkpoint alone (no --precision given).
add_test(NAME cli_hf_id_simulate COMMAND $<TARGET_FILE:servesim> simulate --model Qwen/Qwen3-235B-A22B-FP8 --gpu h200 --tp 8
         --isl 512 --osl 16 --concurrency 2 --requests 4 -q)
set_tests_properties(cli_hf_id_simulate PROPERTIES PASS_REGULAR_EXPRESSION
  "precision fp8_block \\(the checkpoint Qwen/Qwen3-235B-A22B-FP8 names\\).*ran: qwen3-235b-a22b, fp8_block weights")
add_test(NAME cli_hf_id_recommend COMMAND $<TARGET_FILE:servesim> recommend --model nvidia/Llama-3.3-70B-Instruct-FP8 --gpu h200 --tp 1,2
         --topology agg --isl 1024 --osl 128 --concurrency 4,8 --ttft-ms 2000 --itl-ms 100 --target-tps 500)
set_tests_properties(cli_hf_id_recommend PROPERTIES PASS_REGULAR_EXPRESSION "Pre-purchase: llama-3.3-70b.*agg TP[12] H200 fp8 "
                     FAIL_REGULAR_EXPRESSION "H200 bf16|H200 nvfp4")
add_test(NAME cli_hf_id_memory COMMAND $<TARGET_FILE:servesim> memory --model Qwen/Qwen3-235B-A22B-FP8 --gpu h200 --tp 8)
set_tests_properties(cli_hf_id_memory PROPERTIES PASS_REGULAR_EXPRESSION
  "qwen3-235b-a22b on H200, TP8, fp8_block weights.*the checkpoint Qwen/Qwen3-235B-A22B-FP8 names")
add_test(NAME cli_hf_id_min_gpus COMMAND $<TARGET_FILE:servesim> min-gpus --model nvidia/Llama-3.3-70B-Instruct-FP8 --gpus h200)
set_tests_properties(cli_hf_id_min_gpus PROPERTIES PASS_REGULAR_EXPRESSION "llama-3.3-70b, precisions fp8, nvfp4")
