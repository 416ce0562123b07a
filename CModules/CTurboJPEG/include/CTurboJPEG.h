// CTurboJPEG: the thin C shim for libjpeg-turbo's TurboJPEG API.
//
// Why it exists: Debian's libturbojpeg0-dev has no module map, so this module
// lets Swift import turbojpeg.h and link `turbojpeg`. camagent decodes MJPEG
// with it because Debian's libyuv (MJPGToNV12) cannot decode 4:2:2 JPEGs,
// which is what UVC webcams send. No logic lives here.
#ifndef CTURBOJPEG_H
#define CTURBOJPEG_H

#include <turbojpeg.h>

#endif
