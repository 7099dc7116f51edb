# CLI tests of `servesim validate`: the CSV path (merging of repeats, the unmodellable list), JSON
# and CSV outputs, the aiperf-folder round trip (a run exported by `simulate --export` validated
# against itself: 0 % error), and one-line errors.
set(SS $<TARGET_FILE:servesim>)
set(VDATA ${PROJECT_SOURCE_DIR}/tests/sim/data)
add_test(NAME cli_validate_csv COMMAND ${SS} validate ${VDATA}/validate_sample.csv --model-file ${VDATA}/llama-3.1-8b.json --threads 2)
set_tests_properties(cli_validate_csv PROPERTIES PASS_REGULAR_EXPRESSION
  "16 rows -> 14 distinct points \\(1 of them merged from repeats, 2 repeated rows folded in.*14 points: 6 simulated, 8 not modellable.*trtllm +llama-3.1-8b +h100 +agg +1 .*vllm +llama-3.1-8b +h200 +agg +4 .*Not modellable \\(8 points")
add_test(NAME cli_validate_json COMMAND ${SS} validate ${VDATA}/validate_sample.csv --model-file ${VDATA}/llama-3.1-8b.json
         --gpu h200 --mode agg --format json)
set_tests_properties(cli_validate_json PROPERTIES PASS_REGULAR_EXPRESSION
  "\"filtered_out\": 5,\n *\"points\": 9,\n *\"ran\": 4,\n *\"unmodellable\": 5\n.*\"merged_rows\": 2,")
add_test(NAME cli_validate_csv_output COMMAND sh -c
  "'${SS}' validate '${VDATA}/validate_sample.csv' --backend trtllm --engine-any --output '${CMAKE_CURRENT_BINARY_DIR}/validate_points.csv' >/dev/null && cat '${CMAKE_CURRENT_BINARY_DIR}/validate_points.csv'")
set_tests_properties(cli_validate_csv_output PROPERTIES PASS_REGULAR_EXPRESSION
  "^id,source,merged,backend.*\nllama8b_h100_trtllm_agg_1024x1024_c8_tp1_a,.*,8,1,1,")
# Round trip: simulate --export writes the aiperf folder with the scenario as input_config.
set(RT ${CMAKE_CURRENT_BINARY_DIR}/validate_roundtrip)
add_test(NAME cli_validate_aiperf_roundtrip COMMAND sh -c
  "rm -rf '${RT}' && '${SS}' simulate --model nemotron-3-nano --gpu h100 --gpus 1 --tp 1 --precision fp8 --isl 1000 --osl 50 --concurrency 4 --requests 24 --warmup-requests 4 --export '${RT}/run1' >/dev/null && '${SS}' validate '${RT}'")
set_tests_properties(cli_validate_aiperf_roundtrip PROPERTIES PASS_REGULAR_EXPRESSION
  "1 points: 1 simulated, 0 not modellable.*vllm +nemotron-3-nano +h100 +agg +1 +0 +0 +[+-]?0\\.0% +0\\.0% +0\\.0% +[+-]?0\\.0% +0\\.0% +0\\.0% +[+-]?0\\.0%")
set(i 0)
foreach(bad IN ITEMS "/nonexistent.csv" "${VDATA}/llama-3.1-8b.json" "${PROJECT_SOURCE_DIR}/tests"
                     "${VDATA}/validate_sample.csv;--statistic;p99" "${VDATA}/validate_sample.csv;--output;x.txt"
                     "${VDATA}/validate_sample.csv;--harness;trtllm" "${VDATA}/validate_sample.csv;--seeds;0")
  math(EXPR i "${i} + 1")
  add_test(NAME cli_validate_error_${i} COMMAND ${SS} validate ${bad})
  set_tests_properties(cli_validate_error_${i} PROPERTIES PASS_REGULAR_EXPRESSION "^servesim: error: [^\n]+\n$")
endforeach()
