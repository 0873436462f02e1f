/*  case_filter - FANHUB_CASE=GLOB runs only the matching cases of a
    cmocka test program.

    Linked into every unit test program (tests/CMakeLists.txt),
    so no main has to ask for it: before main runs, the glob (cmocka's '*'
    and '?') is handed to cmocka_set_test_filter, which
    cmocka_run_group_tests then applies. Unset or empty: every case runs.

        FANHUB_CASE=test_torn_tail ctest --test-dir build/release \
            -R unit.test_spool --output-on-failure
*/
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

__attribute__ ((constructor)) static void
s_case_filter (void)
{
    const char *pattern = getenv ("FANHUB_CASE");
    if (pattern && pattern[0])
        cmocka_set_test_filter (pattern);
}
