# A chart path with a quote is passed to the plotter as it is: no shell parses it, so the
# command hidden in the name never runs and the chart is written under that very name.
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(name "x'; touch PWNED; echo '.png")
execute_process(COMMAND "${SS}" plan --concurrency 1,4 --plot "${name}" WORKING_DIRECTORY "${DIR}"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "plan --plot failed (${rc}): ${err}")
endif()
if(EXISTS "${DIR}/PWNED")
  message(FATAL_ERROR "a shell ran the command hidden in the --plot path")
endif()
foreach(f "x'; touch PWNED; echo '.png" "x'; touch PWNED; echo '-throughput.png" "x'; touch PWNED; echo '-sweep.json"
          "x'; touch PWNED; echo '-plan.json")
  if(NOT EXISTS "${DIR}/${f}")
    message(FATAL_ERROR "not written: ${DIR}/${f}")
  endif()
endforeach()
