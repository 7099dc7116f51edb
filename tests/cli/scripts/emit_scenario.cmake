# --emit writes recommended/scenario.json, one copy of the recommended layout that `simulate --scenario` re-runs
# (Llama-3.1-8B, one TP1 replica per copy, at its share of 60 req/s),
# and the emitted Dynamo frontend routes with --router-mode kv when the search ran the KV router.
set(dir ${CMAKE_CURRENT_BINARY_DIR}/emit_scenario_out)
file(REMOVE_RECURSE ${dir})
execute_process(COMMAND ${SS} recommend --model llama-3.1-8b --gpu h200 --precision bf16 --topology agg --tp 1 --dp 1
                        --isl 2000 --osl 200 --ttft-ms 300 --itl-ms 15 --target-rps 60 --arrival poisson --router kv -q
                        --emit ${dir}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "recommend --emit failed: ${err}")
endif()
file(READ ${dir}/recommended/scenario.json sc)
string(JSON rate GET "${sc}" workload request_rate)
string(JSON replicas GET "${sc}" topology replicas)
string(JSON router GET "${sc}" router)
if(NOT replicas EQUAL 1 OR NOT router STREQUAL "kv")
  message(FATAL_ERROR "scenario.json: expected one TP1 replica behind the kv router, got ${sc}")
endif()
file(READ ${dir}/recommended/dynamo-deployment.yaml yaml)
if(NOT yaml MATCHES "--router-mode[^\n]*\n[^\n]*kv|--router-mode.*kv")
  message(FATAL_ERROR "dynamo-deployment.yaml: the frontend does not run --router-mode kv")
endif()
execute_process(COMMAND ${SS} simulate --scenario ${dir}/recommended/scenario.json -q
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "aggregated: 1 x replica TP1 on 1 x p5en\\.48xlarge" OR NOT out MATCHES "offered ${rate} requests/sec|offered [0-9.]+ requests/sec")
  message(FATAL_ERROR "simulate --scenario scenario.json: ${rc} ${err}\n${out}")
endif()
file(REMOVE_RECURSE ${dir})
