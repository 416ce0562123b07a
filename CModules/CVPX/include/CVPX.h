// CVPX: the thin C shim for libvpx (Debian libvpx-dev), VP8 only.
//
// Why it exists: libvpx's init and control entry points are macros (they pass
// the ABI version, or dispatch on the control's type), which Swift cannot
// call; these inline wrappers are exactly those macros. No logic lives here.
#ifndef CVPX_H
#define CVPX_H

#include <vpx/vpx_encoder.h>
#include <vpx/vpx_decoder.h>
#include <vpx/vp8cx.h>
#include <vpx/vp8dx.h>

static inline vpx_codec_err_t cvpx_enc_init(vpx_codec_ctx_t *ctx, const vpx_codec_enc_cfg_t *cfg) {
    return vpx_codec_enc_init(ctx, vpx_codec_vp8_cx(), cfg, 0);
}

static inline vpx_codec_err_t cvpx_dec_init(vpx_codec_ctx_t *ctx) {
    return vpx_codec_dec_init(ctx, vpx_codec_vp8_dx(), NULL, 0);
}

static inline vpx_codec_err_t cvpx_control_int(vpx_codec_ctx_t *ctx, int id, int value) {
    return vpx_codec_control_(ctx, id, value);
}

// VPX_EFLAG_FORCE_KF is a macro of type long; exposed as a constant.
static const vpx_enc_frame_flags_t CVPX_FORCE_KEYFRAME = VPX_EFLAG_FORCE_KF;
static const int CVPX_DEADLINE_REALTIME = VPX_DL_REALTIME;

#endif
