# abi_opaque.cmake - ctest script (cmake -P): TYPE is declared opaque in slotd/client.h and a
# program taking sizeof(struct TYPE) does not compile; with EXPECT_COMPLETE, that it does.
# -D CC=... -D INCLUDE=... -D SNIPPET=... -D TYPE=... [-D EXPECT_COMPLETE=1]
file(READ ${INCLUDE}/slotd/client.h header)
execute_process(COMMAND ${CC} -fsyntax-only -x c -I${INCLUDE} -DSLOTD_ABI_TYPE=${TYPE} ${SNIPPET}
                RESULT_VARIABLE rc ERROR_VARIABLE out OUTPUT_VARIABLE out)
if(EXPECT_COMPLETE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "struct ${TYPE} should be complete, but the snippet fails:\n${out}")
  endif()
  return()
endif()
string(FIND "${header}" "\nstruct ${TYPE};\n" declared)
if(declared EQUAL -1)
  message(FATAL_ERROR "slotd/client.h does not declare 'struct ${TYPE};' (opaque)")
endif()
string(FIND "${header}" "\nstruct ${TYPE} {" defined)
if(NOT defined EQUAL -1)
  message(FATAL_ERROR "slotd/client.h defines struct ${TYPE}: callers would compile in its size")
endif()
if(rc EQUAL 0 OR NOT out MATCHES "incomplete type")
  message(FATAL_ERROR "sizeof(struct ${TYPE}) did not fail as an incomplete type:\n${out}")
endif()
