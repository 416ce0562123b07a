// SwiftPM needs one source file per C target; all of CTurboJPEG is in its header.
#include "CTurboJPEG.h"
