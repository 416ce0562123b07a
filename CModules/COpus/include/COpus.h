// COpus: the thin C shim for libopus (Debian libopus-dev).
//
// Why it exists: opus_encoder_ctl is variadic, which Swift cannot call; these
// wrappers are the requests camagent makes. No logic lives here.
#ifndef COPUS_H
#define COPUS_H

#include <opus/opus.h>

static inline int copus_set_bitrate(OpusEncoder *encoder, opus_int32 bitsPerSecond) {
    return opus_encoder_ctl(encoder, OPUS_SET_BITRATE(bitsPerSecond));
}

static inline int copus_set_inband_fec(OpusEncoder *encoder, opus_int32 on) {
    return opus_encoder_ctl(encoder, OPUS_SET_INBAND_FEC(on));
}

static inline int copus_set_packet_loss_percent(OpusEncoder *encoder, opus_int32 percent) {
    return opus_encoder_ctl(encoder, OPUS_SET_PACKET_LOSS_PERC(percent));
}

#endif
