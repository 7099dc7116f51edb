# The capacity rule of plan / search / recommend (sim/studies/plan.hpp) measures the closed loop's
# steady state: Nemotron 3.5 Super VL NVFP4 on one B200, 32 clients of 6000 + 600 tokens. The
# rule (clients started at independent phases, a warm-up that ends when the loop is steady, then
# measured until precise, 1000 at most) reads a mean TTFT within 5 % of a run 10x as long after 1,024 rounds of
# warm-up; the old reading (one warm-up request per client behind the barrier, 128 measured) is
# several times it (the first cohort's queue of 32 prefills of ~100 ms).
set(base simulate --model nemotron-3.5-super-vl --gpu b200 --gpus 1 --tp 1 --precision nvfp4 --isl 6000 --osl 600
         --concurrency 32 --format json -q)
function(ttft out stat)
  execute_process(COMMAND ${SS} ${base} ${ARGN} OUTPUT_VARIABLE j RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "simulate ${ARGN} failed: ${rc}")
  endif()
  string(JSON v GET "${j}" records time_to_first_token ${stat})
  set(${out} ${v} PARENT_SCOPE)
endfunction()
ttft(rule avg --warmup-requests 1024 --warmup-until-steady --measure-until-precise --requests 1000)
ttft(long avg --warmup-requests 32768 --no-warmup-barrier --requests 10000)
ttft(old p90 --warmup-requests 32 --requests 128)
# CMake has no floating-point math: compare in whole milliseconds.
string(REGEX REPLACE "\\..*" "" r "${rule}")
string(REGEX REPLACE "\\..*" "" l "${long}")
string(REGEX REPLACE "\\..*" "" o "${old}")
math(EXPR diff "${r} - ${l}")
if(diff LESS 0)
  math(EXPR diff "-${diff}")
endif()
math(EXPR lim "${l} / 20")
if(diff GREATER lim)
  message(FATAL_ERROR "mean TTFT at the rule's length ${rule} ms is more than 5 % from the 10x run's ${long} ms")
endif()
math(EXPR thrice "3 * ${l}")
if(NOT o GREATER thrice)
  message(FATAL_ERROR "the short barrier run (${old} ms) should show the start-up train (> 3 x ${long} ms)")
endif()
message(STATUS "mean TTFT: rule ${rule} ms, 10x ${long} ms; p90 of the short barrier run ${old} ms")
