/*  nosymbol - a test shared object that is not a consumer plugin.

    It loads fine and exports a function, but not fanhub_consumer_entry:
    the hub must refuse it naming the missing symbol.
*/
#include <fanhub/consumer.h>

FANHUB_EXPORT int fanhub_not_a_consumer (void);

FANHUB_EXPORT int
fanhub_not_a_consumer (void)
{
    return 42;
}
