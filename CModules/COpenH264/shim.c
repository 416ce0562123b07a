// SwiftPM needs one source file per C target; all of COpenH264 is in its header.
#include "COpenH264.h"
