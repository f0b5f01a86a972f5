# exit_code.cmake - runs BIN with ARGS (a ;-list) and fails unless it exits EXPECT and its
# stdout+stderr contains MATCH (a plain substring).
execute_process(COMMAND ${BIN} ${ARGS} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                TIMEOUT 20)
set(all "${out}${err}")
if(NOT rc STREQUAL "${EXPECT}")
  message(FATAL_ERROR "${BIN} ${ARGS}: exit ${rc}, expected ${EXPECT}\n${all}")
endif()
string(FIND "${all}" "${MATCH}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${BIN} ${ARGS}: output lacks '${MATCH}':\n${all}")
endif()
message(STATUS "exit ${rc} as expected; output has '${MATCH}'")
