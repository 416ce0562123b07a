// SwiftPM needs one source file per C target; all of CSRTP is in its header.
#include "CSRTP.h"
