// CALSA: the thin C shim for ALSA's libasound.
//
// Why it exists: libasound's error handler type is variadic (Swift cannot
// implement one), and a few parameter helpers are macros. No logic lives here.
#ifndef CALSA_H
#define CALSA_H

#include <alsa/asoundlib.h>

// Stop libasound from printing its own errors to stderr: camagent reports every
// failure itself, with the device name, through its Logger.
void calsa_silence_library_errors(void);

#endif
