# Charts are drawn through an argument vector (Boost.Process), never a shell line.
add_test(NAME cli_plot_no_shell COMMAND ${CMAKE_COMMAND} -DSS=$<TARGET_FILE:servesim>
         -DDIR=${CMAKE_CURRENT_BINARY_DIR}/plot_no_shell -P ${CMAKE_CURRENT_SOURCE_DIR}/cli/scripts/plot_no_shell.cmake)
