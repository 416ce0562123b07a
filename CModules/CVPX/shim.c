// SwiftPM needs one source file per C target; all of CVPX is in its header.
#include "CVPX.h"
