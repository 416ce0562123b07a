// SwiftPM needs one source file per C target; all of CV4L2 is in its header.
#include "CV4L2.h"
