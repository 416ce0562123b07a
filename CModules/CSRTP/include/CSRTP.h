// CSRTP: the thin C shim for libsrtp2 (Debian libsrtp2-dev), which the unit tests use as the
// reference for camagent's own SRTP (Sources/SecureTransport/SRTP.swift).
//
// Why it exists: Swift imports libsrtp2's headers only through a module, and
// SRTP_MAX_TRAILER_LEN is a macro built from other macros. No logic lives here.
#ifndef CSRTP_H
#define CSRTP_H

#include <srtp2/srtp.h>

static const int CSRTP_MAX_TRAILER_LEN = SRTP_MAX_TRAILER_LEN;

#endif
