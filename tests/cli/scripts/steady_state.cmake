# The capacity rule of plan / search / recommend (sim/studies/plan.hpp) measures past the closed
# loop's start-up train: Nemotron 3.5 Super VL NVFP4 on one B200, 32 clients of 6000 + 600 tokens,
# after 32 warm-up requests per client without the phase barrier and 1000 measured requests, has a
# p90 TTFT within 10 % of a run 10x as long; the old reading (one warm-up request per client behind
# the barrier, 128 measured) is several times it (the first cohort's queue of 32 prefills of ~80 ms).
set(base simulate --model nemotron-3.5-super-vl --gpu b200 --gpus 1 --tp 1 --precision nvfp4 --isl 6000 --osl 600
         --concurrency 32 --format json -q)
function(p90 out)
  execute_process(COMMAND ${SS} ${base} ${ARGN} OUTPUT_VARIABLE j RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "simulate ${ARGN} failed: ${rc}")
  endif()
  string(JSON v GET "${j}" records time_to_first_token p90)
  set(${out} ${v} PARENT_SCOPE)
endfunction()
p90(rule --warmup-requests 1024 --no-warmup-barrier --requests 1000)
p90(long --warmup-requests 1024 --no-warmup-barrier --requests 10000)
p90(old --warmup-requests 32 --requests 128)
# CMake has no floating-point math: compare in tenths of a millisecond.
string(REGEX REPLACE "\\..*" "" r "${rule}")
string(REGEX REPLACE "\\..*" "" l "${long}")
string(REGEX REPLACE "\\..*" "" o "${old}")
math(EXPR diff "${r} - ${l}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
math(EXPR lim "${l} / 10")
if(diff GREATER lim)
  message(FATAL_ERROR "p90 TTFT at the rule's length ${rule} ms is more than 10 % from the 10x run's ${long} ms")
endif()
math(EXPR thrice "3 * ${l}")
if(NOT o GREATER thrice)
  message(FATAL_ERROR "the short barrier run (${old} ms) should show the start-up train (> 3 x ${long} ms)")
endif()
message(STATUS "p90 TTFT: rule ${rule} ms, 10x ${long} ms, short ${old} ms")
