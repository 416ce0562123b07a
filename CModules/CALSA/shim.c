#include "CALSA.h"

static void calsa_discard_error(const char *file, int line, const char *function,
                                int err, const char *fmt, ...) {
    (void)file; (void)line; (void)function; (void)err; (void)fmt;
}

void calsa_silence_library_errors(void) {
    snd_lib_error_set_handler(calsa_discard_error);
}
