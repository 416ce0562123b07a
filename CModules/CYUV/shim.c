// SwiftPM needs one source file per C target; all of CYUV is in its header.
#include "CYUV.h"
