// COpenH264: the thin C shim for OpenH264 (Debian libopenh264-dev).
//
// Why it exists: OpenH264's encoder and decoder are C++ objects; seen from C,
// a handle is a pointer to a pointer to a table of function pointers, and
// every call goes `(*handle)->Method(handle, ...)`. These inline wrappers make
// those calls plain C functions Swift can call. No logic lives here.
#ifndef COPENH264_H
#define COPENH264_H

#include <wels/codec_api.h>
#include <wels/codec_ver.h>

// MARK: Encoder (ISVCEncoder)

static inline int copenh264_encoder_default_params(ISVCEncoder *e, SEncParamExt *params) {
    return (*e)->GetDefaultParams(e, params);
}

static inline int copenh264_encoder_initialize(ISVCEncoder *e, const SEncParamExt *params) {
    return (*e)->InitializeExt(e, params);
}

static inline int copenh264_encoder_uninitialize(ISVCEncoder *e) {
    return (*e)->Uninitialize(e);
}

static inline int copenh264_encoder_encode(ISVCEncoder *e, const SSourcePicture *picture, SFrameBSInfo *info) {
    return (*e)->EncodeFrame(e, picture, info);
}

static inline int copenh264_encoder_force_idr(ISVCEncoder *e) {
    return (*e)->ForceIntraFrame(e, true);
}

static inline int copenh264_encoder_set_option(ISVCEncoder *e, ENCODER_OPTION option, void *value) {
    return (*e)->SetOption(e, option, value);
}

// MARK: Decoder (ISVCDecoder)

static inline long copenh264_decoder_initialize(ISVCDecoder *d, const SDecodingParam *params) {
    return (*d)->Initialize(d, params);
}

static inline long copenh264_decoder_uninitialize(ISVCDecoder *d) {
    return (*d)->Uninitialize(d);
}

/// `planes` receives the Y, U and V pointers of the decoded picture (valid
/// until the next call) when `info->iBufferStatus` is 1.
static inline DECODING_STATE copenh264_decoder_decode(ISVCDecoder *d, const unsigned char *bytes, int count,
                                                      unsigned char *planes[3], SBufferInfo *info) {
    return (*d)->DecodeFrameNoDelay(d, bytes, count, planes, info);
}

static inline long copenh264_decoder_set_option(ISVCDecoder *d, DECODER_OPTION option, void *value) {
    return (*d)->SetOption(d, option, value);
}

#endif
