# CLI tests of comma-separated list options: an empty item (`a,,b`, a comma first or last) is one
# line naming the option, the item's position and the list, whatever the subcommand.
set(SS $<TARGET_FILE:servesim>)
set(LIST_REFUSAL "give the values separated by single commas, with none before the first or after the last")
add_test(NAME cli_list_empty_engine COMMAND ${SS} search --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100
         --ttft-ms 400 --itl-ms 25 --engine vllm,,sglang)
set_tests_properties(cli_list_empty_engine PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --engine: item 2 of 'vllm,,sglang' is empty; ${LIST_REFUSAL}")
add_test(NAME cli_list_empty_tp COMMAND ${SS} recommend --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100
         --ttft-ms 400 --itl-ms 25 --target-tps 1000 --tp 2,,4)
set_tests_properties(cli_list_empty_tp PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --tp: item 2 of '2,,4' is empty")
add_test(NAME cli_list_trailing_rate COMMAND ${SS} sweep --model nemotron-3-nano --gpu h200 --isl 1000 --osl 100
         --request-rate 30,40,)
set_tests_properties(cli_list_trailing_rate PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --request-rate: item 3 of '30,40,' is empty")
add_test(NAME cli_list_leading_gpus COMMAND ${SS} min-gpus --model nemotron-3-nano --gpus ,h200)
set_tests_properties(cli_list_leading_gpus PROPERTIES PASS_REGULAR_EXPRESSION "servesim: error: --gpus: item 1 of ',h200' is empty")
add_test(NAME cli_list_blank_item_images COMMAND ${SS} memory --model nemotron-3.5-super-vl --gpu b200 --precision nvfp4 --tp 1
         --context 6600 --images "1024x1024, ")
set_tests_properties(cli_list_blank_item_images PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --images: item 2 of '1024x1024, ' is empty")
add_test(NAME cli_list_empty_backends COMMAND ${SS} validate --backend vllm,,sglang ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli_list_empty_backends PROPERTIES PASS_REGULAR_EXPRESSION
  "servesim: error: --backend: item 2 of 'vllm,,sglang' is empty")
# Items are trimmed: "h200, b200" is two GPUs, not a refusal.
add_test(NAME cli_list_spaces_trimmed COMMAND ${SS} min-gpus --model nemotron-3-nano --gpus "h200, b200" --format json)
set_tests_properties(cli_list_spaces_trimmed PROPERTIES PASS_REGULAR_EXPRESSION "\"gpu\": \"B200\".*\"gpu\": \"H200\"|\"gpu\": \"H200\".*\"gpu\": \"B200\"")
set_tests_properties(cli_list_spaces_trimmed PROPERTIES FAIL_REGULAR_EXPRESSION "error")
