// SwiftPM needs one source file per C target; all of COpus is in its header.
#include "COpus.h"
