# Charts are drawn through an argument vector (Boost.Process), never a shell line.
add_test(NAME cli_plot_no_shell COMMAND ${CMAKE_COMMAND} -DSS=$<TARGET_FILE:servesim>
         -DDIR=${CMAKE_CURRENT_BINARY_DIR}/plot_no_shell -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/plot_no_shell.cmake)
# No source file runs a shell line: every child process goes through an argument vector.
add_test(NAME source_no_shell_calls COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR} -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/no_shell_calls.cmake)
if(SERVESIM_PY_SAN_ENV)  # servesim starts Python here: the sanitizer runtime must come first in it
  set_tests_properties(cli_plot_no_shell PROPERTIES ENVIRONMENT "${SERVESIM_PY_SAN_ENV}")
endif()
