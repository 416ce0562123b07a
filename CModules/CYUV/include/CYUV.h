// CYUV: the thin C shim for libyuv.
//
// Why it exists: Debian's libyuv-dev ships no pkg-config file and no module map,
// so this module is what lets Swift import its headers and link `yuv`.
// Only the headers camagent uses are included. No logic lives here.
#ifndef CYUV_H
#define CYUV_H

#include <libyuv/version.h>
#include <libyuv/video_common.h>
#include <libyuv/convert.h>
#include <libyuv/convert_from.h>
#include <libyuv/planar_functions.h>
#include <libyuv/rotate.h>
#include <libyuv/scale.h>

// LIBYUV_VERSION is a macro; exposed so `camagent devices` can report it.
static const int CYUV_VERSION = LIBYUV_VERSION;

#endif
