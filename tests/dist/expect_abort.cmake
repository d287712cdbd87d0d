# CTest's Dist.MpiAbortEndsEveryRank: runs `MPIEXEC -n 2 TESTS --abort-from-rank-1`, where rank 1
# aborts the job with code 3 while rank 0 waits in a barrier, and passes when the job ended (rather
# than hanging until CTest's timeout) with a failure code, and rank 1's message, printed before the
# abort, made it out (abort() flushes stdio).
# Usage: cmake -DMPIEXEC=... -DNUMPROC_FLAG=... -DTESTS=... -P expect_abort.cmake
execute_process(COMMAND ${MPIEXEC} ${NUMPROC_FLAG} 2 --oversubscribe ${TESTS} --abort-from-rank-1
                RESULT_VARIABLE code OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
message("exit code: ${code}\n${out}${err}")
if(code EQUAL 0 OR NOT code MATCHES "^[0-9]+$")
  message(FATAL_ERROR "the job did not end with a failure code (${code})")
endif()
if(NOT out MATCHES "rank 1 aborts the job with exit code 3")
  message(FATAL_ERROR "rank 1's message before the abort is missing: stdio was not flushed")
endif()
if(out MATCHES "passed the barrier")
  message(FATAL_ERROR "a rank went on after the abort")
endif()
