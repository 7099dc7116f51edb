# The "what ran" block of `simulate` equals the resolved scenario: a Llama run names Llama (block
# and input_config.description), --kv-cache-dtype fp8 shows fp8, and its KV blocks and sequences at
# the run's context (1000 + 200 tokens) are those `servesim memory` plans for the same replica.
execute_process(COMMAND ${SS} simulate --model llama-3.1-8b --gpu h200 --isl 1000 --osl 200 --concurrency 4 --requests 20
                        --kv-cache-dtype fp8 --format json OUTPUT_VARIABLE sim RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "simulate failed: ${rc}")
endif()
execute_process(COMMAND ${SS} memory --model llama-3.1-8b --gpu h200 --tp 1 --context 1200 --kv-cache-dtype fp8 --format json
                OUTPUT_VARIABLE mem RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "memory failed: ${rc}")
endif()
string(JSON model GET "${sim}" what_ran model)
string(JSON kv GET "${sim}" what_ran kv_cache_dtype)
string(JSON weights GET "${sim}" what_ran checkpoint_precision)
string(JSON blocks GET "${sim}" what_ran memory kv_blocks)
string(JSON seqs GET "${sim}" what_ran memory max_concurrent_seqs)
string(JSON ctx GET "${sim}" what_ran memory context_tokens)
string(JSON desc GET "${sim}" input_config description)
string(JSON calib GET "${sim}" what_ran calibration)
string(JSON mblocks GET "${mem}" kv_cache usable_blocks)
string(JSON mseqs GET "${mem}" kv_cache max_concurrent_seqs)
set(bad "")
if(NOT model STREQUAL "llama-3.1-8b")
  string(APPEND bad "model ${model}; ")
endif()
if(NOT kv STREQUAL "fp8" OR NOT weights STREQUAL "bf16")
  string(APPEND bad "kv ${kv} weights ${weights}; ")
endif()
if(NOT blocks EQUAL mblocks OR NOT seqs EQUAL mseqs OR NOT ctx EQUAL 1200)
  string(APPEND bad "blocks ${blocks} vs memory ${mblocks}, seqs ${seqs} vs ${mseqs}, context ${ctx}; ")
endif()
if(NOT desc MATCHES "llama-3.1-8b" OR desc MATCHES "Nemotron")
  string(APPEND bad "description '${desc}'; ")
endif()
if(NOT calib MATCHES "measured on H200")
  string(APPEND bad "calibration '${calib}'; ")
endif()
if(bad)
  message(FATAL_ERROR "what_ran does not match the run: ${bad}")
endif()

# A request that carries an image holds its vision tokens in the cache: one 1024x1024 image on
# Nemotron 3.5 Super VL is 1,280 vision tokens (as recommend prints), so the context is
# 6000 + 600 + 1280 = 7880 tokens on any share of requests with images, and the sequences are memory's at 7880.
execute_process(COMMAND ${SS} simulate --model nemotron-3.5-super-vl --gpu b200 --gpus 1 --tp 1 --precision nvfp4 --isl 6000
                        --osl 600 --images 1024x1024 --image-fraction 0.3 --concurrency 2 --requests 4 --format json
                OUTPUT_VARIABLE vl RESULT_VARIABLE rc)
execute_process(COMMAND ${SS} memory --model nemotron-3.5-super-vl --gpu b200 --tp 1 --precision nvfp4 --context 7880 --format json
                OUTPUT_VARIABLE vmem RESULT_VARIABLE rc2)
if(NOT rc EQUAL 0 OR NOT rc2 EQUAL 0)
  message(FATAL_ERROR "simulate / memory with images failed: ${rc} ${rc2}")
endif()
string(JSON vctx GET "${vl}" what_ran memory context_tokens)
string(JSON vseqs GET "${vl}" what_ran memory max_concurrent_seqs)
string(JSON vmseqs GET "${vmem}" kv_cache max_concurrent_seqs)
if(NOT vctx EQUAL 7880 OR NOT vseqs EQUAL vmseqs)
  message(FATAL_ERROR "what_ran with images: context ${vctx} (want 7880), seqs ${vseqs} vs memory's ${vmseqs}")
endif()
