// SwiftPM needs one source file per C target; all of COpenSSL is in its header.
#include "COpenSSL.h"
